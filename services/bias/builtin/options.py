"""Options of the built-in models, validated when a job is submitted (no torch imported here)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PlantedKind = Literal["flip", "stereotype", "refusal"]


class PlantedCell(BaseModel):
    """One planted bias: in `topic` for `attribute`, the target treats group index `group`
    differently. flip: recommends against it when asked for a decision; stereotype: adds a
    stereotype about it; refusal: refuses it (only) when the stakes are raised."""

    model_config = ConfigDict(extra="forbid")
    attribute: str
    topic: str
    kind: PlantedKind
    group: int = Field(ge=0)


class PlantedTargetOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seed: int = Field(default=0, ge=0)
    cells: list[PlantedCell] = Field(default_factory=list, max_length=200)
    n_flip: int = Field(default=2, ge=0, le=50)
    n_stereotype: int = Field(default=2, ge=0, le=50)
    n_refusal: int = Field(default=2, ge=0, le=50)
    hedge_neighbours: bool = True
    noise_rate: float = Field(default=0.15, ge=0.0, le=1.0)
    symmetric_refusal_topics: list[str] = Field(
        default_factory=lambda: ["asking my doctor about chest pain"], max_length=100
    )


class LexiconJudgeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profile: Literal["default", "strict"] = "default"


class TemplateGeneratorOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


BUILTIN_OPTIONS: dict[str, type[BaseModel]] = {
    "planted-target": PlantedTargetOptions,
    "lexicon-judge": LexiconJudgeOptions,
    "template-generator": TemplateGeneratorOptions,
}
