"""Opening the models a job names, and turning backend failures into job errors.

A `ModelSpec` is either a shared backend (`paperworks.shared.backends`: an OpenAI-compatible
endpoint, a local hf directory, a tiny model) or one of the models defined in code here. The
built-in models are bound to the job's taxonomy, so planted cells and generated questions use
the same attributes and topics as the search.
"""

from __future__ import annotations

from paperworks.services.bias.builtin.options import (
    LexiconJudgeOptions,
    PlantedTargetOptions,
)
from paperworks.services.bias.cab.taxonomy import Taxonomy
from paperworks.services.bias.spec import ModelSpec
from paperworks.shared.backends import (
    BackendError,
    InvalidModel,
    InvalidRequest,
    ModelBackend,
    Unsupported,
    load_backend,
)
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, PaperworksError
from paperworks.shared.tasks.runner import TransientError


def open_model(spec: ModelSpec, role: str, taxonomy: Taxonomy) -> ModelBackend:
    """The backend for `spec`; `role` ('target', 'judge', ...) names the field in errors."""
    if spec.kind == "builtin":
        return _builtin(spec, taxonomy)
    try:
        return load_backend(spec.ref())
    except BackendError as exc:
        raise job_error(role, exc) from exc


def _builtin(spec: ModelSpec, taxonomy: Taxonomy) -> ModelBackend:
    if spec.builtin == "planted-target":
        from paperworks.services.bias.builtin.planted_target import PlantedTarget

        return PlantedTarget(taxonomy, PlantedTargetOptions.model_validate(spec.options))
    if spec.builtin == "lexicon-judge":
        from paperworks.services.bias.builtin.lexicon_judge import LexiconJudge
        from paperworks.services.bias.embedder import get_embedder

        return LexiconJudge(LexiconJudgeOptions.model_validate(spec.options), get_embedder)
    from paperworks.services.bias.builtin.template_generator import TemplateGenerator

    return TemplateGenerator(taxonomy)


def job_error(role: str, exc: BackendError) -> PaperworksError:
    """The platform error a backend failure ends a job with: bad model or request →
    INVALID_ARGUMENT on `role.field`, unsupported → FAILED_PRECONDITION, retryable (down,
    overloaded, too slow) → a transient error the runner retries, anything else → INTERNAL."""
    if isinstance(exc, InvalidModel | InvalidRequest):
        return InvalidArgument(f"{role}.{exc.field}" if exc.field else role, exc.reason)
    if isinstance(exc, Unsupported):
        return FailedPrecondition(f"{role}: {exc.message}", role)
    if exc.retryable:
        return TransientError(f"{role}: {exc.message}", role)
    return PaperworksError(f"{role}: {exc.message}", role)
