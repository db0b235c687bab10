"""`make demo` for segmenter: upload five labelled phantoms as an nnU-Net folder (the client's own
files, not a server path), fit the SEMIR minor on them, train the supernode classifiers, train a
WNE denoiser, then Denoise -> Segment as a chained job (no client in the loop) and one inline
Segment call."""

from __future__ import annotations

import tempfile
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from paperworks.segmenter.v1 import segmenter_pb2
from paperworks.services.segmenter import data
from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE


def _done(client, job, title):
    final = follow(client, job.id, title)
    if PROTO_TO_STATE[final.state] != "SUCCEEDED":
        raise SystemExit(f"{job.id} ended {PROTO_TO_STATE[final.state]}: {final.error.message}")
    return final


def _upload_dataset(client) -> dict:
    """Five 32^3 phantoms written as an nnU-Net folder here and uploaded (as a .tar.gz)."""
    with tempfile.TemporaryDirectory(prefix="segmenter-demo-") as tmp:
        cases = data.cohort(data.PhantomConfig(), range(300, 305))
        folder = data.write_dataset(Path(tmp) / "Dataset001", cases, data.STRUCTURES)
        reply = client.upload(folder, "segmenter")
    console.print(f"uploaded {reply.artifact.name} ({reply.artifact.size_bytes} bytes)")
    return {"source": {"upload": reply.artifact.sha256}}


def run(client, out: Path) -> None:
    dataset = _upload_dataset(client)
    fit = _done(
        client,
        client.submit("segmenter", "fit_minor_params", dataset=dataset, trials=30),
        "segmenter.fit_minor_params",
    )
    r = fit.result
    console.print(
        f"minor: boundary Dice {r['boundary_dice']:.3f} (hand-set {r['hand_set_boundary_dice']:.3f}), "
        f"{r['supernodes_mean']:.0f} supernodes per 32^3 volume, oracle Dice {dict(r['oracle_dice'])}"
    )
    train = _done(
        client,
        client.submit("segmenter", "train_segmenter", minor_job_id=fit.id, dataset=dataset, steps=150),
        "segmenter.train_segmenter",
    )
    console.print(f"GINE classifiers, train Dice {MessageToDict(train.result['train_dice'])}")
    den = _done(
        client,
        client.submit("segmenter", "train_denoiser", dataset=dataset, steps=150),
        "segmenter.train_denoiser",
    )
    d = den.result
    console.print(
        f"WNE DnCNN: PSNR {d['psnr_noisy']:.1f} -> {d['psnr_denoised']:.1f} dB, "
        f"NE defect {d['ne_defect']:.1e}"
    )
    test = {"synthetic": {"seed": 11, "count": 2, "size": 32}}
    chain = _done(
        client,
        client.submit(
            "segmenter", "denoise", model_job_id=den.id, dataset=test, then_segment={"model_job_id": train.id}
        ),
        "segmenter.denoise",
    )
    seg = _done(client, client.get(chain.result["segment_job_id"]), "segmenter.segment (chained)")
    console.print(f"chained segment {seg.id}: structures (voxels) {MessageToDict(seg.result['structures'])}")
    image, _ = data.phantom(data.PhantomConfig(), 99)
    reply = client.stub("segmenter").Segment(
        segmenter_pb2.SegmentRequest(model_job_id=train.id, image_nifti=data.write_nifti(image)),
        metadata=client.metadata,
        timeout=60,
    )
    console.print(
        f"inline Segment: {reply.supernodes} supernodes, "
        + ", ".join(f"{s.name} {s.voxels} voxels in {s.components} components" for s in reply.structures)
    )
    paths = client.pull_artifacts(seg.id, out)
    console.print("artifacts: " + ", ".join(p.name for p in paths) + f" in {out}")
