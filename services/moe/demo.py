"""`make demo` for moe: a dense model upcycled to 4 experts (top-2), a short DPSL training
(symmetric alpha = 0.25 prior) with its routing metrics, then a small SkillNet policy trained and
rolled out on every task."""

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
    up = _done(client, client.submit("moe", "upcycle", dense_steps=200, world={"seed": 1}), "moe.upcycle")
    console.print(
        f"dense accuracy {up.result['dense_accuracy']:.3f} -> upcycled {up.result['upcycled_accuracy']:.3f} "
        f"({up.result['experts']} experts, top-{up.result['top_k']})"
    )
    for terms, label in (
        ([{"type": "load_balance", "weight": 0.01}], "load balancing"),
        ([{"type": "dpsl", "alpha": [0.25]}], "DPSL alpha=0.25"),
    ):
        job = _done(
            client,
            client.submit("moe", "train_moe", model_job_id=up.id, router_losses=terms, steps=100),
            "moe.train_moe",
        )
        r = job.result
        console.print(
            f"{label}: accuracy {r['accuracy']:.3f}, confidence {r['confidence']:.3f}, entropy "
            f"{r['entropy']:.3f} nats, max/mean load {r['max_mean_load']:.2f}"
        )
    evaluated = _done(
        client,
        client.submit("moe", "evaluate_routing", model_job_id=job.id, alpha=[0.25]),
        "moe.evaluate_routing",
    )
    paths = client.pull_artifacts(evaluated.id, out)
    console.print("artifacts: " + ", ".join(p.name for p in paths))
    policy = _done(
        client,
        client.submit("moe", "train_skill_policy", demos_per_task=4, steps=100, batch_size=128),
        "moe.train_skill_policy",
    )
    skills = _done(
        client,
        client.submit("moe", "evaluate_skills", model_job_id=policy.id, episodes_per_task=2),
        "moe.evaluate_skills",
    )
    console.print(f"SkillNet policy: success {skills.result['success']:.2f} over every task (short training)")
    client.pull_artifacts(skills.id, out)
