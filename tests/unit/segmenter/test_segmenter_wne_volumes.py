"""WNE wrapper properties and the NIfTI / nnU-Net folder checks."""

from __future__ import annotations

import gzip
import json

import nibabel as nib
import numpy as np
import pytest
import torch
from paperworks.services.segmenter import data, wne
from paperworks.services.segmenter.checkpoint import Denoiser
from paperworks.shared.errors import InvalidArgument


@pytest.mark.parametrize("backbone", ["dncnn", "attention"])
def test_wne_is_equivariant_for_any_backbone_and_the_ablations_are_not(backbone):
    torch.manual_seed(0)
    g = wne.BACKBONES[backbone]().eval()
    y = torch.rand(3, 1, 20, 20)
    f = wne.Wrapped(g, "wne").eval()
    assert wne.ne_defect(f, y, 3.0, -1.5) <= 1e-5
    assert wne.ne_defect(wne.Wrapped(g, "none").eval(), y, 3.0, -1.5) > 1e-3
    assert wne.ne_defect(wne.Wrapped(g, "input_norm").eval(), y, 3.0, -1.5) > 1e-3
    flat = torch.full((1, 1, 8, 8), 0.7)
    assert torch.equal(f(flat), flat)  # the constant-input guard


def test_volume_denoising_pools_statistics_over_the_volume():
    torch.manual_seed(0)
    f = wne.Wrapped(wne.DnCNN(), "wne").eval()
    v = np.random.default_rng(0).random((5, 12, 12)).astype(np.float32)
    out = wne.denoise_volume(f, v)
    np.testing.assert_allclose(wne.denoise_volume(f, 2 * v + 1), 2 * out + 1, rtol=1e-5, atol=1e-5)
    assert wne.denoise_volume(f, v[0]).shape == (12, 12)
    blob = Denoiser(f, "dncnn", 0.1).to_bytes()
    np.testing.assert_allclose(Denoiser.from_bytes(blob).denoise(v), out, atol=1e-6)


def test_nifti_round_trip_keeps_shape_spacing_and_affine():
    image = np.random.default_rng(1).random((6, 7, 8)).astype(np.float32)
    v = data.read_nifti(data.write_nifti(image, (0.5, 1.0, 2.0)), "f")
    assert v.data.shape == (6, 7, 8) and v.spacing == (0.5, 1.0, 2.0)
    np.testing.assert_array_equal(v.data, image)
    two_d = data.read_nifti(data.write_nifti(image[0], (0.5, 1.0)), "f")
    assert two_d.data.shape == (7, 8) and two_d.spacing == (0.5, 1.0)


def _raw(array, zooms=None, compress=True):
    img = nib.Nifti1Image(array, np.eye(4))
    if zooms is not None:
        img.header["pixdim"][1:4] = zooms
    raw = img.to_bytes()
    return gzip.compress(raw, mtime=0) if compress else raw  # the same bytes in every process


@pytest.mark.parametrize(
    "raw, why",
    [
        (b"\x1f\x8bnot gzip", "header: gzip"),
        (b"x" * 100, "shorter than a NIfTI header"),
        (b"x" * 400, "header: not a readable"),
        (_raw(np.zeros((3, 3, 3, 2), np.float32)), "shape: 4-D"),
        (_raw(np.zeros((3, 3, 3), np.float32), (1.0, -1.0, 1.0)), "spacing"),
        (_raw(np.zeros((3, 3, 3), np.float32), (1.0, np.nan, 1.0), compress=False), "spacing"),
    ],
    ids=["not-gzip", "short", "unreadable", "4-D", "negative-spacing", "nan-spacing"],
)
def test_bad_nifti_is_invalid_argument_saying_which(raw, why):
    with pytest.raises(InvalidArgument) as exc:
        data.read_nifti(raw, "image_nifti")
    assert exc.value.field == "image_nifti" and why in exc.value.message


def test_image_label_pairs_are_checked():
    image = data.Volume("a", np.zeros((4, 4, 4), np.float32), (1.0, 1.0, 1.0), np.eye(4))
    for values, spacing, why in [
        (np.zeros((4, 4, 5)), (1.0, 1.0, 1.0), "shape"),
        (np.zeros((4, 4, 4)), (1.0, 1.0, 2.0), "spacing"),
        (np.full((4, 4, 4), 0.5), (1.0, 1.0, 1.0), "integers"),
    ]:
        with pytest.raises(InvalidArgument) as exc:
            data.as_labels(data.Volume("a", values, spacing, np.eye(4)), image, "labels")
        assert why in exc.value.message
    nan = data.Volume("a", np.full((2, 2), np.nan, np.float32), (1.0, 1.0), np.eye(4))
    with pytest.raises(InvalidArgument, match="NaN"):
        data.as_image(nan, "image")


def test_nnunet_folder_loads_and_names_missing_files(tmp_path):
    cases = data.cohort(data.PhantomConfig(size=16, lesions=1, lesion_radius=1.5), range(2))
    root = data.write_dataset(tmp_path / "d", cases, data.STRUCTURES, (1.0, 1.0, 2.0))
    loaded, names = data.load_dataset(root)
    assert names == {1: "organ", 2: "lesion"} and [i.name for i, _ in loaded] == ["case_000", "case_001"]
    assert loaded[0][0].spacing == (1.0, 1.0, 2.0) and np.array_equal(loaded[0][1].data, cases[0][1])
    assert json.loads((root / "dataset.json").read_text())["file_ending"] == ".nii.gz"
    (root / "labelsTr" / "case_001.nii.gz").unlink()
    with pytest.raises(InvalidArgument, match="labelsTr/case_001.nii.gz is missing"):
        data.load_dataset(root)
    with pytest.raises(InvalidArgument, match="dataset.json"):
        data.load_dataset(tmp_path)


def test_inputs_resolve_a_wrapped_dataset_folder_and_a_folder_of_volumes(tmp_path, monkeypatch):
    """An archive of `Dataset001/` unpacks to a folder wrapping the dataset: it is found inside. A
    file where a dataset folder is needed is refused naming the field; `image` may be a folder of
    volumes, one case per NIfTI file."""
    from paperworks.services.segmenter.spec import DatasetParams
    from paperworks.shared.config import get_settings
    from paperworks.shared.inputs import InputRefParams, InputScope

    monkeypatch.setenv("PAPERWORKS_DATA_ROOT", str(tmp_path))
    monkeypatch.setenv("PAPERWORKS_STATE_DIR", str(tmp_path / "state"))
    get_settings.cache_clear()
    try:
        cases = data.cohort(data.PhantomConfig(size=16, lesions=1, lesion_radius=1.5), range(2))
        root = data.write_dataset(tmp_path / "unpacked" / "Dataset001", cases, data.STRUCTURES)
        scope = InputScope(None, None, "alice")
        loaded, names = data.load_cases(DatasetParams(path=str(tmp_path / "unpacked")), scope)
        assert len(loaded) == 2 and names == data.STRUCTURES
        with pytest.raises(InvalidArgument) as exc:
            data.load_cases(DatasetParams(source={"path": str(root / "dataset.json")}), scope)
        assert exc.value.field == "dataset.source.path" and "folder is required" in exc.value.message
        volumes = data.load_volumes(InputRefParams(path=str(root / "imagesTr")), scope)
        assert [v.name for v in volumes] == ["case_000", "case_001"]
        np.testing.assert_array_equal(volumes[1].data, cases[1][0])
        (tmp_path / "empty").mkdir()
        with pytest.raises(InvalidArgument, match="no .nii"):
            data.load_volumes(InputRefParams(path=str(tmp_path / "empty")), scope)
    finally:
        get_settings.cache_clear()
