"""The segmenter service over real gRPC on the embedded stack: few-shot minor fit (on an uploaded
nnU-Net folder) and GINE training (from a server path), Segment as a job and inline, inputs a
client in another folder uploads, WNE denoiser, the Denoise -> Segment chain without the client,
job references checked at submit, and the field-naming errors."""

from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
from pathlib import Path

import grpc
import nibabel as nib
import numpy as np
import pytest
from google.rpc import code_pb2
from paperworks.segmenter.v1 import segmenter_pb2
from paperworks.services.segmenter import data
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.rpc.tensors import from_numpy, to_numpy
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.errors import field_violations
from support import TOKENS, announced_models, finished, service_fixtures

CFG = data.PhantomConfig(size=24, lesions=2, lesion_radius=2.0)
SPACING = (1.0, 0.8, 0.8)


stack, client = service_fixtures("segmenter")


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    cases = data.cohort(CFG, range(4))
    return data.write_dataset(tmp_path_factory.mktemp("nnunet"), cases, data.STRUCTURES, SPACING)


@pytest.fixture(scope="module")
def fitted(client, dataset_dir):
    """Fitted on the folder as the client uploads it (a .tar.gz), not on a server path."""
    sha = client.upload(dataset_dir, "segmenter").artifact.sha256
    return finished(
        client,
        client.submit("segmenter", "fit_minor_params", dataset={"source": {"upload": sha}}, trials=8),
    )


@pytest.fixture(scope="module")
def trained(client, dataset_dir, fitted):
    return finished(
        client,
        client.submit(
            "segmenter",
            "train_segmenter",
            minor_job_id=fitted.id,
            dataset={"path": str(dataset_dir)},
            structures=[1],
            structure_names=["lesion"],
            steps=40,
        ),
    )


@pytest.fixture(scope="module")
def denoiser(client):
    return finished(
        client,
        client.submit(
            "segmenter",
            "train_denoiser",
            dataset={"synthetic": {"seed": 2, "count": 3, "size": 24}},
            steps=20,
        ),
    )


def test_fit_minor_params_reports_the_six_parameters(fitted):
    r = fitted.result
    assert set(r["params"]) == {"psi", "size_min", "size_max", "intensity_min", "intensity_max", "alpha"}
    assert r["trials"] == 8 and r["volumes"] == 4 and r["boundary_dice"] >= r["hand_set_boundary_dice"] - 1e-9
    assert 0.0 <= r["manual_boundary_dice"] <= 1.0
    assert set(r["oracle_dice"]) == {"organ", "lesion"}
    assert {a.name for a in fitted.artifacts} == {"minor_params.json", "trials.json"}


def test_segment_job_writes_label_volumes_with_the_input_geometry(client, trained, dataset_dir, tmp_path):
    assert set(trained.result["structures"].values()) == {"organ", "lesion"}
    assert announced_models(client, trained) == ["segmenter.safetensors"]
    job = finished(
        client,
        client.submit(
            "segmenter", "segment", model_job_id=trained.id, dataset={"path": str(dataset_dir), "limit": 2}
        ),
    )
    assert job.result["volumes"] == 2 and set(job.result["dice_mean"]) == {"organ", "lesion"}
    paths = {p.name: p for p in client.pull_artifacts(job.id, tmp_path)}
    assert set(paths) == {"case_000_seg.nii.gz", "case_001_seg.nii.gz", "statistics.json"}
    img = nib.load(paths["case_000_seg.nii.gz"])
    assert img.shape == (24, 24, 24) and np.allclose(img.header.get_zooms(), SPACING)
    stats = json.loads(paths["statistics.json"].read_text())
    assert {s["name"] for s in stats[0]["structures"]} == {"organ", "lesion"}
    assert stats[0]["structures"][0]["volume_mm3"] == pytest.approx(
        stats[0]["structures"][0]["voxels"] * 0.64
    )


def test_inline_segment_from_nifti_and_from_a_tensor(client, trained):
    image, _ = data.phantom(CFG, 50)
    stub = client.stub("segmenter")
    a = stub.Segment(
        segmenter_pb2.SegmentRequest(
            model_job_id=trained.id, image_nifti=data.write_nifti(image, SPACING)
        ),
        metadata=client.metadata,
        timeout=60,
    )
    b = stub.Segment(
        segmenter_pb2.SegmentRequest(model_job_id=trained.id, image=from_numpy(image), spacing=list(SPACING)),
        metadata=client.metadata,
        timeout=60,
    )
    assert np.array_equal(to_numpy(a.labels), to_numpy(b.labels)) and a.supernodes == b.supernodes > 0
    lifted = data.read_nifti(a.labels_nifti, "x")
    assert lifted.data.shape == image.shape and np.allclose(lifted.spacing, SPACING)
    assert [s.name for s in a.structures] == ["organ", "lesion"]
    two_d = stub.Segment(
        segmenter_pb2.SegmentRequest(model_job_id=trained.id, image=from_numpy(image[12])),
        metadata=client.metadata,
        timeout=60,
    )
    assert to_numpy(two_d.labels).shape == (24, 24)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_client_in_another_folder_uploads_volumes_and_pulls_the_outputs(
    client, trained, denoiser, tmp_path, monkeypatch
):
    """Nothing is shared with the server but the uploads: a NIfTI file for segment, a folder of
    volumes (as an archive) for denoise, a file for the inline Segment; the outputs come back whole."""
    monkeypatch.chdir(tmp_path)
    image, _ = data.phantom(CFG, 60)
    Path("ct.nii.gz").write_bytes(data.write_nifti(image, SPACING))
    Path("scans").mkdir()
    for k in (61, 62):
        Path(f"scans/scan{k}.nii.gz").write_bytes(data.write_nifti(data.phantom(CFG, k)[0], SPACING))
    with tarfile.open("scans.tar.gz", "w:gz") as tar:  # wrapped in its folder, as `tar czf` makes it
        tar.add("scans")
    ct = client.upload(Path("ct.nii.gz"), "segmenter").artifact.sha256
    job = finished(
        client, client.submit("segmenter", "segment", model_job_id=trained.id, image={"upload": ct})
    )
    assert job.result["cases"] == ["ct"]
    pulled = {p.name: p for p in client.pull_artifacts(job.id, Path("out"))}
    assert {a.name: a.sha256 for a in job.artifacts} == {n: _sha256(p) for n, p in pulled.items()}
    labels = data.read_nifti(pulled["ct_seg.nii.gz"].read_bytes(), "x")
    assert labels.data.shape == image.shape and np.allclose(labels.spacing, SPACING)

    scans = client.upload(Path("scans.tar.gz"), "segmenter").artifact.sha256
    den = finished(
        client, client.submit("segmenter", "denoise", model_job_id=denoiser.id, image={"upload": scans})
    )
    assert den.result["cases"] == ["scan61", "scan62"]
    pulled = {p.name: p for p in client.pull_artifacts(den.id, Path("denoised"))}
    assert {a.name: a.sha256 for a in den.artifacts} == {n: _sha256(p) for n, p in pulled.items()}

    stub = client.stub("segmenter")
    inline = stub.Segment(
        segmenter_pb2.SegmentRequest(model_job_id=trained.id, source={"upload": ct}),
        metadata=client.metadata, timeout=60,
    )
    assert np.array_equal(to_numpy(inline.labels), labels.data)
    assert data.read_nifti(inline.labels_nifti, "x").data.shape == image.shape
    from_artifact = stub.Segment(  # a job's output volume, segmented inline
        segmenter_pb2.SegmentRequest(
            model_job_id=trained.id,
            source={"artifact": {"job_id": den.id, "name": "scan61_denoised.nii.gz"}},
        ),
        metadata=client.metadata, timeout=60,
    )
    assert to_numpy(from_artifact.labels).shape == image.shape


def test_job_references_are_checked_at_submit(stack, client, fitted, trained, denoiser):
    """Wrong kind: INVALID_ARGUMENT; another tenant's job: NOT_FOUND; both name the field and
    queue nothing (the worker is never reached)."""
    before = len(client.list("segmenter", page_size=500)[0])
    synthetic = {"synthetic": {"seed": 1, "count": 2, "size": 16}}
    wrong_kind = [
        ("segment", dict(model_job_id=fitted.id, dataset=synthetic), "model_job_id"),
        ("segment", dict(model_job_id=trained.id, source_job_id=trained.id), "source_job_id"),
        ("train_segmenter", dict(minor_job_id=trained.id, dataset=synthetic), "minor_job_id"),
        ("denoise", dict(model_job_id=trained.id, dataset=synthetic), "model_job_id"),
        (
            "denoise",
            dict(model_job_id=denoiser.id, dataset=synthetic, then_segment={"model_job_id": denoiser.id}),
            "then_segment.model_job_id",
        ),
    ]
    for kind, params, field in wrong_kind:
        with pytest.raises(grpc.RpcError) as exc:
            client.submit("segmenter", kind, **params)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (kind, field)
        assert [f for f, _ in field_violations(exc.value)] == [field]
        assert "job" in exc.value.details()
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        with pytest.raises(grpc.RpcError) as exc:
            bob.submit("segmenter", "segment", model_job_id=trained.id, dataset=synthetic)
        assert exc.value.code() == grpc.StatusCode.NOT_FOUND and "model_job_id" in exc.value.details()
        assert bob.list("segmenter")[0] == []
    assert len(client.list("segmenter", page_size=500)[0]) == before


def test_denoise_chains_a_segment_job_without_the_client(client, denoiser, trained):
    assert denoiser.result["ne_defect"] < 1e-4
    assert announced_models(client, denoiser) == ["denoiser.safetensors"]
    job = finished(
        client,
        client.submit(
            "segmenter",
            "denoise",
            model_job_id=denoiser.id,
            dataset={"synthetic": {"seed": 8, "count": 2, "size": 24}},
            then_segment={"model_job_id": trained.id},
        ),
    )
    seg = finished(client, client.get(job.result["segment_job_id"]))
    assert seg.result["cases"] == ["case_000", "case_001"]
    assert {a.name for a in seg.artifacts} == {
        "case_000_seg.nii.gz",
        "case_001_seg.nii.gz",
        "statistics.json",
    }
    image, _ = data.phantom(CFG, 51)
    reply = client.stub("segmenter").Denoise(
        segmenter_pb2.DenoiseRequest(model_job_id=denoiser.id, image=from_numpy(image)),
        metadata=client.metadata,
        timeout=60,
    )
    assert to_numpy(reply.image).shape == image.shape


def _nifti(array, zooms=None):
    img = nib.Nifti1Image(array, np.eye(4))
    if zooms is not None:
        img.header["pixdim"][1:4] = zooms
    return gzip.compress(img.to_bytes())


def test_bad_volumes_are_invalid_argument_saying_which(client, fitted, trained, dataset_dir, tmp_path):
    stub = client.stub("segmenter")
    good = np.zeros((8, 8, 8), np.float32)
    cases = [
        (dict(image_nifti=b"not a nifti file" * 40), "image_nifti", "header"),
        (dict(image_nifti=_nifti(np.zeros((4, 4, 4, 3), np.float32))), "image_nifti", "shape"),
        (dict(image_nifti=_nifti(good, (1.0, 0.0, 1.0))), "image_nifti", "spacing"),
        (dict(image=from_numpy(good), spacing=[1.0, 1.0]), "spacing", "3-D"),
        (dict(image=from_numpy(np.zeros(5, np.float32))), "image.shape", "2-D or 3-D"),
        (dict(), "image_nifti", "exactly one"),
        (dict(image=from_numpy(good), threshold=0.0), "threshold", "(0, 1)"),
    ]
    for kwargs, field, why in cases:
        with pytest.raises(grpc.RpcError) as exc:
            stub.Segment(
                segmenter_pb2.SegmentRequest(model_job_id=trained.id, **kwargs),
                metadata=client.metadata,
                timeout=30,
            )
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        ((got, message),) = field_violations(exc.value)
        assert got == field and why in message, (got, message)
    # a label volume whose spacing disagrees with its image fails the job, naming the file
    (tmp_path / "imagesTr").mkdir()
    (tmp_path / "labelsTr").mkdir()
    (tmp_path / "dataset.json").write_text((dataset_dir / "dataset.json").read_text())
    (tmp_path / "imagesTr" / "x_0000.nii.gz").write_bytes(data.write_nifti(good, (1.0, 1.0, 1.0)))
    (tmp_path / "labelsTr" / "x.nii.gz").write_bytes(
        data.write_nifti(good.astype(np.uint8), (1.0, 2.0, 1.0))
    )
    job = client.wait(
        client.submit("segmenter", "fit_minor_params", dataset={"path": str(tmp_path)}, trials=2).id,
        timeout=120,
    )
    assert PROTO_TO_STATE[job.state] == "FAILED" and job.error.code == code_pb2.INVALID_ARGUMENT
    (violation,) = job.error.field_violations
    assert "labelsTr/x.nii.gz" in violation.field and "spacing" in violation.description
    # a structure name the dataset does not have fails the job, naming the field and the labels
    named = dict(minor_job_id=fitted.id, dataset={"path": str(dataset_dir)}, structure_names=["liver"])
    job = client.wait(client.submit("segmenter", "train_segmenter", steps=1, **named).id, timeout=120)
    assert PROTO_TO_STATE[job.state] == "FAILED" and job.error.code == code_pb2.INVALID_ARGUMENT
    (violation,) = job.error.field_violations
    assert violation.field == "structure_names[0]" and "lesion, organ" in violation.description
    before = len(client.list("segmenter", page_size=500)[0])
    # an explicit 0 is a value, not "unset" (the default applies only when the field is left out)
    refused = (({"trials": 1}, "trials"), ({"trials": 0}, "trials"), ({"optimizer": "grid"}, "optimizer"))
    for params, field in refused:
        with pytest.raises(grpc.RpcError) as exc:
            client.submit("segmenter", "fit_minor_params", dataset={"synthetic": {"seed": 1}}, **params)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [f for f, _ in field_violations(exc.value)] == [field]
    assert len(client.list("segmenter", page_size=500)[0]) == before


def test_another_tenant_cannot_use_the_model(stack, trained):
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        with pytest.raises(grpc.RpcError) as exc:
            bob.stub("segmenter").Segment(
                segmenter_pb2.SegmentRequest(
                    model_job_id=trained.id, image=from_numpy(np.zeros((8, 8), np.float32))
                ),
                metadata=bob.metadata,
                timeout=30,
            )
        assert exc.value.code() == grpc.StatusCode.NOT_FOUND
