"""The segmenter service as the platform sees it: SEMIR graph-minor segmentation and WNE denoising.

Import-light (pydantic only). A request field whose zero is not its default is `optional` in the
proto: left unset, it is omitted from the parameters and the default below applies; an explicit 0
is validated like any other value.
"""

from typing import Annotated, Literal

from paperworks.shared.inputs import InputRefParams, path_shorthand
from paperworks.shared.registry import JobKind, ServiceSpec
from pydantic import BaseModel, BeforeValidator, Field, WithJsonSchema, model_validator


class SyntheticParams(BaseModel):
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    count: int = Field(default=5, ge=1, le=64)
    size: int = Field(default=32, ge=16, le=256)
    lesions: int = Field(default=3, ge=0, le=16)
    lesion_radius: float = Field(default=2.5, ge=1.0, le=16.0)
    lesion_contrast: float = Field(default=0.12, gt=0.0, le=1.0)
    noise: float = Field(default=0.03, ge=0.0, le=1.0)
    blur: float = Field(default=0.6, ge=0.0, le=4.0)


class DatasetParams(BaseModel):
    """An nnU-Net folder (`source`: an upload of it as an archive, a job's artifact, an s3://
    object or a server path; `path` is short for `source.path`) or generated phantoms."""

    path: str = Field(default="", max_length=4096)
    source: InputRefParams | None = None
    synthetic: SyntheticParams | None = None
    limit: int = Field(default=0, ge=0, le=10_000)

    @model_validator(mode="before")
    @classmethod
    def _path_is_source_path(cls, data):
        return path_shorthand(data)

    @model_validator(mode="after")
    def one_source(self):
        if (self.source is not None) == (self.synthetic is not None):
            raise ValueError("set exactly one of dataset.source (or dataset.path) and dataset.synthetic")
        return self


JobId = Annotated[str, Field(min_length=1, max_length=128)]
OptionalJobId = Annotated[str, Field(default="", max_length=128)]


def _paths_are_inputs(value):
    """`images` as server paths (the proto's strings) or InputRefs: a string is short for a path."""
    if isinstance(value, list):
        return [{"path": v} if isinstance(v, str) else v for v in value]
    return value


# A segment or denoise job's `images`: server paths, as the proto and `paperworks describe` have them;
# each becomes a path InputRef, so the runtime checks it at submit like any other input
Images = Annotated[
    list[InputRefParams],
    BeforeValidator(_paths_are_inputs),
    Field(max_length=1000),
    WithJsonSchema({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 4096},
                    "maxItems": 1000}),
]


class FitMinorParamsParams(BaseModel):
    dataset: DatasetParams
    trials: int = Field(default=40, ge=2, le=2000)
    optimizer: Literal["tpe", "extra_trees"] = "tpe"
    max_volumes: int = Field(default=20, ge=1, le=20)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class TrainSegmenterParams(BaseModel):
    minor_job_id: JobId
    dataset: DatasetParams
    structures: list[Annotated[int, Field(ge=1, le=255)]] = Field(default_factory=list, max_length=32)
    structure_names: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(
        default_factory=list, max_length=32
    )
    steps: int = Field(default=200, ge=1, le=100_000)
    hidden: int = Field(default=32, ge=4, le=512)
    layers: int = Field(default=3, ge=1, le=12)
    learning_rate: float = Field(default=1e-2, gt=0.0, le=1.0)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class SegmentParams(BaseModel):
    model_job_id: JobId
    dataset: DatasetParams | None = None
    image: InputRefParams | None = None
    images: Images = []
    source_job_id: OptionalJobId = ""
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0)

    @model_validator(mode="after")
    def one_input(self):
        given = [self.dataset, self.image, self.images, self.source_job_id]
        if sum(bool(g) for g in given) != 1:
            raise ValueError("set exactly one of dataset, image, images and source_job_id")
        return self


class TrainDenoiserParams(BaseModel):
    dataset: DatasetParams
    backbone: Literal["dncnn", "attention"] = "dncnn"
    wrapper: Literal["wne", "input_norm", "none"] = "wne"
    noise_sigma: float = Field(default=0.1, gt=0.0, le=10.0)
    steps: int = Field(default=300, ge=1, le=100_000)
    batch_size: int = Field(default=16, ge=1, le=512)
    learning_rate: float = Field(default=2e-3, gt=0.0, le=1.0)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class ThenSegment(BaseModel):
    model_job_id: JobId
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0)


class DenoiseParams(BaseModel):
    model_job_id: JobId
    dataset: DatasetParams | None = None
    image: InputRefParams | None = None
    images: Images = []
    then_segment: ThenSegment | None = None

    @model_validator(mode="after")
    def one_input(self):
        if sum([self.dataset is not None, self.image is not None, bool(self.images)]) != 1:
            raise ValueError("set exactly one of dataset, image and images")
        return self


def _kind(name, params, rpc, description, result):
    return JobKind(
        name=name,
        params=params,
        handler=f"paperworks.services.segmenter.tasks:run_{name}",
        submit_rpc=rpc,
        description=description,
        result=result,
    )


DICE = "overlap with the labels, 2|A∩B| / (|A| + |B|) (0..1, higher is better)"


SPEC = ServiceSpec(
    name="segmenter",
    description="SEMIR graph-minor segmentation of small structures (arXiv 2605.12389) and WNE "
    "normalization-equivariant denoising (ICML 2026).",
    servicer="paperworks.services.segmenter.servicer:SegmenterServicer",
    grpc_module="paperworks.segmenter.v1.segmenter_pb2_grpc",
    grpc_service="SegmenterService",
    port=50056,
    kernel_ops=("grid_contract",),
    kinds={
        "fit_minor_params": _kind(
            "fit_minor_params",
            FitMinorParamsParams,
            "SubmitFitMinorParams",
            "few-shot volumes + labels -> the six minor parameters (boundary Dice)",
            {
                "params": "the six minor parameters: psi, alpha (intensity units), size_min, size_max "
                "(voxels), intensity_min, intensity_max (intensity units)",
                "boundary_dice": "Dice of the minor's boundaries with the label boundaries, 1-voxel "
                "tolerance (0..1), for the fitted parameters",
                "hand_set_boundary_dice": "the same for the old hand-set vector (0..1)",
                "manual_boundary_dice": "the same for the paper-style manual vector (0..1)",
                "supernodes_mean": "supernodes per volume with the fitted parameters (mean count)",
                "oracle_dice": "per structure: " + DICE + ", of the best labelling of the supernodes",
                "optimizer": "the surrogate optimizer used",
                "trials": "parameter vectors tried (count)",
                "volumes": "labelled volumes used (count)",
                "structures": "label value -> name, from the dataset",
            },
        ),
        "train_segmenter": _kind(
            "train_segmenter",
            TrainSegmenterParams,
            "SubmitTrainSegmenter",
            "minor parameters + volumes -> one GINE node classifier per structure",
            {
                "structures": "label value -> name of each structure learned",
                "train_dice": "per structure: " + DICE + ", on the training volumes",
                "volumes": "training volumes (count)",
                "supernodes_mean": "supernodes per training volume (mean count)",
                "minor_params": "the minor parameters used (from minor_job_id)",
            },
        ),
        "segment": _kind(
            "segment",
            SegmentParams,
            "SubmitSegment",
            "volumes -> label volumes (NIfTI) + per-structure statistics",
            {
                "volumes": "volumes segmented (count)",
                "cases": "their case names (artifacts <case>_seg.nii.gz)",
                "structures": "per case, per structure: voxels labelled (count; mm³ and components "
                "in statistics.json)",
                "dice_mean": "per structure, when the dataset has labels: " + DICE + ", mean over cases",
            },
        ),
        "train_denoiser": _kind(
            "train_denoiser",
            TrainDenoiserParams,
            "SubmitTrainDenoiser",
            "images -> WNE-wrapped denoiser, PSNR and NE defect",
            {
                "psnr_noisy": "PSNR of the noisy held-out slices (dB, peak = their intensity range)",
                "psnr_denoised": "PSNR of the denoised held-out slices (dB)",
                "ne_defect": "||f(ay+b) - (a f(y)+b)|| / ||a f(y)+b||, mean of two (a, b) "
                "(relative; 0 is exact equivariance)",
                "backbone": "the backbone", "wrapper": "the wrapper",
                "noise_sigma": "training noise sigma (intensity units)",
                "train_slices": "training slices (count)", "test_slices": "held-out slices (count)",
            },
        ),
        "denoise": _kind(
            "denoise",
            DenoiseParams,
            "SubmitDenoise",
            "volumes -> denoised volumes (NIfTI); optionally chains a segment job",
            {
                "volumes": "volumes denoised (count)",
                "cases": "their case names (artifacts <case>_denoised.nii.gz)",
                "segment_job_id": "the segment job submitted on them (with then_segment)",
            },
        ),
    },
)
