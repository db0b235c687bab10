"""Requests -> job parameters: an unset optional field takes its documented default, an explicit 0
is validated like any other value (INVALID_ARGUMENT naming the field when it is out of range)."""

from __future__ import annotations

import pytest
from paperworks.segmenter.v1 import segmenter_pb2 as pb
from paperworks.services.segmenter.spec import SPEC
from paperworks.shared.errors import InvalidArgument, violations_from_pydantic
from paperworks.shared.rpc.convert import request_params
from pydantic import ValidationError

SYNTHETIC = pb.DatasetSource(synthetic=pb.SyntheticVolumes(seed=1))


def params(kind: str, request):
    """What the runtime's submit validates (`ServiceRuntime.submit`)."""
    try:
        return SPEC.kind(kind).params.model_validate(request_params(request))
    except ValidationError as exc:
        raise violations_from_pydantic(exc) from None


def test_unset_fields_take_the_documented_defaults():
    p = params("train_denoiser", pb.SubmitTrainDenoiserRequest(dataset=SYNTHETIC))
    assert (p.backbone, p.wrapper, p.noise_sigma, p.steps, p.batch_size, p.learning_rate) == (
        "dncnn", "wne", 0.1, 300, 16, 2e-3
    )
    s = p.dataset.synthetic
    assert (s.count, s.size, s.lesions, s.lesion_radius, s.lesion_contrast, s.noise, s.blur) == (
        5, 32, 3, 2.5, 0.12, 0.03, 0.6
    )
    fit = params("fit_minor_params", pb.SubmitFitMinorParamsRequest(dataset=SYNTHETIC))
    assert (fit.trials, fit.optimizer, fit.max_volumes) == (40, "tpe", 20)
    train = params("train_segmenter", pb.SubmitTrainSegmenterRequest(minor_job_id="j", dataset=SYNTHETIC))
    assert (train.steps, train.hidden, train.layers, train.learning_rate) == (200, 32, 3, 1e-2)
    chained = pb.ThenSegment(model_job_id="s")
    denoise = params("denoise", pb.SubmitDenoiseRequest(model_job_id="d", images=["a"], then_segment=chained))
    assert denoise.then_segment.threshold == 0.5
    assert params("segment", pb.SubmitSegmentRequest(model_job_id="m", images=["a"])).threshold == 0.5


@pytest.mark.parametrize(
    "kind, request_, field",
    [
        ("fit_minor_params", pb.SubmitFitMinorParamsRequest(dataset=SYNTHETIC, trials=0), "trials"),
        ("fit_minor_params", pb.SubmitFitMinorParamsRequest(dataset=SYNTHETIC, optimizer=""), "optimizer"),
        (
            "train_denoiser",
            pb.SubmitTrainDenoiserRequest(dataset=pb.DatasetSource(synthetic=pb.SyntheticVolumes(size=0))),
            "dataset.synthetic.size",
        ),
        ("train_denoiser", pb.SubmitTrainDenoiserRequest(dataset=SYNTHETIC, noise_sigma=0.0), "noise_sigma"),
        (
            "denoise",
            pb.SubmitDenoiseRequest(
                model_job_id="d", images=["a"], then_segment=pb.ThenSegment(model_job_id="s", threshold=0.0)
            ),
            "then_segment.threshold",
        ),
        ("segment", pb.SubmitSegmentRequest(model_job_id="m", images=["a"], threshold=0.0), "threshold"),
    ],
)
def test_an_explicit_zero_out_of_range_is_invalid_argument_naming_the_field(kind, request_, field):
    with pytest.raises(InvalidArgument) as exc:
        params(kind, request_)
    assert exc.value.field == field


def test_an_explicit_zero_in_range_is_kept():
    dataset = pb.DatasetSource(synthetic=pb.SyntheticVolumes(seed=1, lesions=0, noise=0.0, blur=0.0))
    p = params("fit_minor_params", pb.SubmitFitMinorParamsRequest(dataset=dataset))
    assert (p.dataset.synthetic.lesions, p.dataset.synthetic.noise, p.dataset.synthetic.blur) == (0, 0.0, 0.0)


def test_inputs_take_an_input_ref_and_a_path_is_short_for_one():
    upload = "ab" * 32
    by_path = params("fit_minor_params", pb.SubmitFitMinorParamsRequest(dataset=pb.DatasetSource(path="/d")))
    assert by_path.dataset.source.path == "/d" and by_path.dataset.path == "/d"
    ref = pb.DatasetSource(source={"upload": upload})
    fit = params("fit_minor_params", pb.SubmitFitMinorParamsRequest(dataset=ref))
    assert fit.dataset.source.upload == upload
    seg = params("segment", pb.SubmitSegmentRequest(model_job_id="m", image={"upload": upload}))
    assert seg.image.upload == upload and seg.images == []
    listed = params("denoise", pb.SubmitDenoiseRequest(model_job_id="d", images=["/a.nii.gz", "/b.nii.gz"]))
    assert [r.path for r in listed.images] == ["/a.nii.gz", "/b.nii.gz"]
    # the stored parameters (a dump) validate again to the same thing, as the worker reads them
    assert type(seg).model_validate(seg.model_dump(mode="json")) == seg
    assert type(by_path).model_validate(by_path.model_dump(mode="json")) == by_path


@pytest.mark.parametrize(
    "kind, request_",
    [
        ("segment", pb.SubmitSegmentRequest(model_job_id="m", image={"path": "/a"}, images=["/b"])),
        ("segment", pb.SubmitSegmentRequest(model_job_id="m")),
        ("denoise", pb.SubmitDenoiseRequest(model_job_id="d", image={"path": "/a"}, dataset=SYNTHETIC)),
        ("fit_minor_params", pb.SubmitFitMinorParamsRequest(dataset=pb.DatasetSource())),
    ],
)
def test_exactly_one_input_is_required(kind, request_):
    with pytest.raises(InvalidArgument, match="exactly one"):
        params(kind, request_)


def test_structures_are_named_by_value_or_by_label_name():
    from paperworks.services.segmenter.tasks import _structures

    names = {1: "organ", 2: "lesion"}
    p = params(
        "train_segmenter",
        pb.SubmitTrainSegmenterRequest(minor_job_id="j", dataset=SYNTHETIC, structure_names=["lesion"]),
    )
    assert _structures(p, names) == [2]
    both = p.model_copy(update={"structures": [1]})
    assert _structures(both, names) == [1, 2]
    assert _structures(p.model_copy(update={"structure_names": []}), names) == [1, 2]
    with pytest.raises(InvalidArgument) as exc:
        _structures(p.model_copy(update={"structure_names": ["lesion", "liver"]}), names)
    assert exc.value.field == "structure_names[1]" and "lesion, organ" in exc.value.message
