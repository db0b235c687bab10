"""`make demo` for clip: a tiny CLIP trained on the shapes world, a robustness evaluation (clean and
PGD 4/255: zero-shot, view ensemble, R-TPT, RITA), and a VACSR adapter trained on its features."""

from __future__ import annotations

from pathlib import Path

from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE


def _done(client, job, label: str):
    done = follow(client, job.id, label)
    if PROTO_TO_STATE[done.state] != "SUCCEEDED":
        raise SystemExit(f"{label} ended {PROTO_TO_STATE[done.state]}: {done.error.message}")
    return done


def run(client, out: Path) -> None:
    clip = _done(client, client.submit("clip", "train_clip", steps=300), "clip.train_clip")
    console.print(f"tiny CLIP: zero-shot shape accuracy {clip.result['zero_shot_accuracy']:.2f}")
    rob = _done(
        client,
        client.submit(
            "clip",
            "evaluate_robustness",
            model={"model_job_id": clip.id},
            test={"world": {"seed": 7, "n": 40}},
            eps_255=[0, 4],
            views=32,
            methods=["zero_shot", "ensemble", "rtpt", "rita"],
        ),
        "clip.evaluate_robustness",
    )
    for r in rob.result["rows"]:
        console.print(
            f"  eps {r['eps_255']:g}/255  {r['method']:<10} accuracy {r['accuracy']:.2f}  "
            f"{1000 * r['seconds_per_image']:.1f} ms/image"
        )
    ada = _done(
        client,
        client.submit(
            "clip",
            "train_adapter",
            model={"model_job_id": clip.id},
            adapter="vacsr",
            train_items=600,
            val_items=200,
            epochs=10,
        ),
        "clip.train_adapter",
    )
    console.print(
        f"VACSR adapter: validation RSUM {ada.result['val_rsum']:.1f} after {ada.result['epochs']} epochs"
    )
    paths = client.pull_artifacts(rob.id, out)
    console.print("artifacts: " + ", ".join(p.name for p in paths))
