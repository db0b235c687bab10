"""Where a job's images come from: a `scenes.json` dataset from wherever the job names it, or the
synthetic scenes.

- `scenes`: the synthetic worlds rendered in code (the first world and claim 3's occlusion world,
  `SceneConfig.overlap_pair_rate`) and their vocabulary;
- `scenes_json`: the `scenes.json` format on disk (read, written, image decoding and box checks);
- `visual_genome`: the converter from Scene-Graph-Benchmark.pytorch's Visual Genome layout.

`load_dataset` is a job's entry point: `dataset.source` names a scenes.json or the folder holding it
(an uploaded archive of the folder, unpacked; a job's artifact; an s3:// archive; a server path
under the data root: `paperworks.shared.inputs`). The images it names must lie inside that folder
(for a server path: under the data root). A train job's checkpoint is read with
`JobContext.job_artifact` / `shared.job_refs.job_artifact` (`checkpoint.MODEL_FILE`).
`python -m paperworks.services.scenegraph.data` writes small example inputs (`__main__.py`).
"""
from __future__ import annotations

from pathlib import Path

from paperworks.services.scenegraph.data.scenes import SceneConfig, generate_scenes, synthetic_vocabulary
from paperworks.services.scenegraph.data.scenes_json import SCENES_FILE, load_json
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from paperworks.services.scenegraph.spec import DatasetParams
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import InputScope, archive_root, data_root, resolve_input

SERVICE = "scenegraph"


def load_dataset(params: DatasetParams, image_size: int, scope: InputScope
                 ) -> tuple[Vocabulary, list[Sample]]:
    """The job's vocabulary and images; `scope` (the JobContext) is whose inputs the source names.
    Errors name `dataset.path` where the user gave a server path, else `dataset.source`."""
    if params.synthetic is not None:
        cfg = SceneConfig(image_size=image_size, overlap_pair_rate=params.synthetic.overlap_pair_rate)
        return synthetic_vocabulary(), generate_scenes(params.synthetic.images, params.synthetic.seed, cfg)
    field = "dataset.path" if params.path else "dataset.source"
    found = resolve_input(params.source, scope, SERVICE, "dataset.source", unpack=True)
    if params.path:  # a dataset on the server may keep its images beside it (Visual Genome's VG_100K/)
        return load_json(scenes_file(found, field), image_size, field, (data_root(SERVICE), "the data root"))
    if not found.is_dir():
        raise InvalidArgument(field, "is one file, and a dataset's images are files beside it: give the "
                                     "folder holding scenes.json and its images (uploaded, it travels as a "
                                     ".tar.gz archive)")
    return load_json(scenes_file(found, field), image_size, field, (found.resolve(), "the dataset's folder"))


def scenes_file(found: Path, field: str) -> Path:
    """The scenes.json a source names: the file itself, or the one in the folder (at its top, or in
    its one subfolder where the archive was made with the folder on top: `tar czf d.tar.gz d/`)."""
    if not found.is_dir():
        return found
    root = archive_root(found, lambda f: (f / SCENES_FILE).is_file())
    if (root / SCENES_FILE).is_file():
        return root / SCENES_FILE
    raise InvalidArgument(field, f"the dataset folder holds no {SCENES_FILE} (at its top or in its one "
                                 "subfolder)")


def check_vocabulary(model: Vocabulary, data: Vocabulary) -> None:
    """A dataset evaluated or predicted with a model must use the model's classes and predicates."""
    if data.classes != model.classes or data.predicates != model.predicates:
        raise InvalidArgument("dataset", "its classes and predicates differ from the trained model's")
