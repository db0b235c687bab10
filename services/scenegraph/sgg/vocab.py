"""Object classes, predicates and the geometric / non-geometric split a model is built with.

DS-Net routes geometric predicates (spatial and positional) to its space stream
and non-geometric ones (possessive, semantic, action) to its vision stream; which
predicate belongs where is configuration (`Vocabulary.geometric`), so a dataset
with its own predicates (Visual Genome's 50: `data.visual_genome.VG_GEOMETRIC`) brings its
own split. Index 0 of the predicates is always the background ("no relation").
"""
from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

BACKGROUND = "__background__"


class Vocabulary(BaseModel):
    """Classes and predicates (without the background) plus which predicates are geometric."""

    classes: list[str] = Field(min_length=1)
    predicates: list[str] = Field(min_length=1)
    geometric: list[str] = Field(default_factory=list)
    # [s in front of o, s behind o]: the predicates that name which of two objects covers the other,
    # the depth-order estimator's targets where objects carry no depth annotation (`depth_order`)
    depth_order: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Vocabulary:
        for name, values in (("classes", self.classes), ("predicates", self.predicates)):
            if len(set(values)) != len(values):
                raise ValueError(f"{name} must be unique")
            if BACKGROUND in values:
                raise ValueError(f"{name} may not contain {BACKGROUND!r}")
        unknown = sorted(set(self.geometric) - set(self.predicates))
        if unknown:
            raise ValueError(f"geometric names predicates that do not exist: {unknown}")
        pair = set(self.depth_order)
        if self.depth_order and (len(pair) != 2 or len(self.depth_order) != 2
                                 or not pair <= set(self.predicates)):
            raise ValueError("depth_order must name two predicates: [in front of, behind]")
        return self

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def num_predicates(self) -> int:
        """Including the background at index 0."""
        return len(self.predicates) + 1

    def class_index(self, name: str) -> int:
        return self.classes.index(name)

    def predicate_index(self, name: str) -> int:
        """1-based: 0 is the background."""
        return self.predicates.index(name) + 1

    def predicate_name(self, index: int) -> str:
        return BACKGROUND if index == 0 else self.predicates[index - 1]

    @property
    def geometric_ids(self) -> list[int]:
        return [self.predicate_index(p) for p in self.predicates if p in self.geometric]

    @property
    def non_geometric_ids(self) -> list[int]:
        return [self.predicate_index(p) for p in self.predicates if p not in self.geometric]

