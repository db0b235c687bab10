"""The urban service's inputs: where a job's locations come from, and what a sync call sends.

- `dataset`: locations x modalities in memory (`Dataset`, `Modality`) and its folder form on disk
  (`load_folder`, `write_folder`);
- `world`: the synthetic multi-city world whose information structure is known;
- `locations`: the Embed/Predict requests' locations -> the encoder's inputs (`feature_set`).

`load_dataset` is a job's entry point: a dataset folder from wherever the job's `dataset.source`
names it (an uploaded archive, unpacked; a job's artifact; an s3:// archive; a server path under the
data root: `paperworks.shared.inputs`) or the synthetic world. Other jobs' artifacts (a pretrained
encoder, a fitted probe) are read through `paperworks.shared.job_refs`. `python -m
paperworks.services.urban.data` writes small example inputs (`__main__.py`).
"""
from __future__ import annotations

from paperworks.services.urban.data import world
from paperworks.services.urban.data.dataset import COORDINATES, Dataset, Modality, load_folder, write_folder
from paperworks.services.urban.data.locations import MAX_LOCATIONS, feature_set, used_modalities
from paperworks.services.urban.spec import DatasetParams
from paperworks.shared.inputs import InputScope, resolve_input

__all__ = ["COORDINATES", "MAX_LOCATIONS", "Dataset", "Modality", "feature_set", "load_dataset",
           "load_folder", "used_modalities", "world", "write_folder"]


def load_dataset(params: DatasetParams, scope: InputScope) -> Dataset:
    """The job's locations x modalities; `scope` (the JobContext) is whose inputs the source names."""
    if params.synthetic is not None:
        s = params.synthetic
        return world.generate(world.WorldConfig(seed=s.seed, cities=s.cities,
                                                locations_per_city=s.locations_per_city,
                                                missing_rate=s.missing_rate))
    return load_folder(resolve_input(params.source, scope, "urban", "dataset.source", unpack=True))
