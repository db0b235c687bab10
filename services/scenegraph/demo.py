"""`make demo` for scenegraph: write synthetic scenes as a dataset folder on the client's side,
upload it (no path is shared with the server), train a PE-Net-style model with the DS-Net head on
it, evaluate it in PredCls and SGDet, then parse one uploaded image inline with the Predict RPC."""
from __future__ import annotations

import tempfile
from pathlib import Path

from paperworks.services.scenegraph.data.__main__ import write_image, write_scenes
from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE

TRAIN = {"seed": 7, "images": 240}
TEST = {"synthetic": {"seed": 8, "images": 100}}


def _done(client, job, title):
    final = follow(client, job.id, title)
    if PROTO_TO_STATE[final.state] != "SUCCEEDED":
        raise SystemExit(f"{job.id} ended {PROTO_TO_STATE[final.state]}: {final.error.message}")
    return final


def run(client, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="scenegraph-client-") as here:
        upload = client.upload(write_scenes(Path(here) / "scenes", **TRAIN).parent).artifact
    console.print(f"uploaded the dataset folder as {upload.name} ({upload.size_bytes} bytes)")
    job = client.submit("scenegraph", "train", dataset={"source": {"upload": upload.sha256}}, base="penet",
                        head="dsnet", detector_epochs=8, relation_epochs=8)
    console.print(f"submitted [bold]{job.id}[/] (PE-Net + DS-Net head on 240 synthetic 64x64 scenes)")
    trained = _done(client, job, "scenegraph.train")
    r = trained.result
    console.print(f"{int(r['images'])} images, {int(r['relations'])} annotated triplets; relation loss "
                  f"{r['first_relation_loss']:.3f} -> {r['relation_loss']:.3f}")
    evaluated = _done(client, client.submit("scenegraph", "evaluate", train_job_id=trained.id, dataset=TEST,
                                            modes=["predcls", "sgdet"]), "scenegraph.evaluate")
    for mode, m in evaluated.result["modes"].items():
        console.print(f"{mode}: R@100 {m['R@100']:.3f}  ngR@100 {m['ngR@100']:.3f}  mR@100 {m['mR@100']:.3f}")
    with tempfile.TemporaryDirectory(prefix="scenegraph-client-") as here:
        write_image(Path(here) / "scene.png", seed=8)
        image = client.upload(Path(here) / "scene.png").artifact
    reply = client.call("scenegraph", "Predict", timeout=60, train_job_id=trained.id,
                        source={"upload": image.sha256}, top_k=5)
    console.print(f"Predict ({reply.mode}): " + ", ".join(f"{o.index}:{o.box.label}" for o in reply.objects))
    for t in reply.triplets:
        console.print(f"  {t.subject}:{reply.objects[t.subject].box.label} {t.predicate} "
                      f"{t.object}:{reply.objects[t.object].box.label}  {t.score:.3f}")
    paths = client.pull_artifacts(trained.id, out) + client.pull_artifacts(evaluated.id, out)
    console.print("artifacts: " + ", ".join(p.name for p in paths) + f" in {out}")
