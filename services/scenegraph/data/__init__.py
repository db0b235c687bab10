"""Where a job's images come from: a `scenes.json` dataset on the server or the synthetic scenes.

- `scenes`: the synthetic worlds rendered in code (the first world and claim 3's occlusion world,
  `SceneConfig.overlap_pair_rate`) and their vocabulary;
- `scenes_json`: the `scenes.json` format on disk (read, written, image decoding and box checks);
- `visual_genome`: the converter from Scene-Graph-Benchmark.pytorch's Visual Genome layout.

A dataset path goes through the platform's data-root guard (`PAPERWORKS_SCENEGRAPH_DATA_ROOT`,
when set, is the only folder it may point into). A train job's checkpoint is read with
`JobContext.job_artifact` / `shared.job_refs.job_artifact` (`checkpoint.MODEL_FILE`).
"""
from __future__ import annotations

from paperworks.services.scenegraph.data.scenes import SceneConfig, generate_scenes, synthetic_vocabulary
from paperworks.services.scenegraph.data.scenes_json import load_json
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from paperworks.services.scenegraph.spec import DatasetParams
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import server_path


def load_dataset(params: DatasetParams, image_size: int) -> tuple[Vocabulary, list[Sample]]:
    if params.synthetic is not None:
        cfg = SceneConfig(image_size=image_size, overlap_pair_rate=params.synthetic.overlap_pair_rate)
        return synthetic_vocabulary(), generate_scenes(params.synthetic.images, params.synthetic.seed, cfg)
    return load_json(server_path(params.path, "scenegraph", "dataset.path"), image_size)


def check_vocabulary(model: Vocabulary, data: Vocabulary) -> None:
    """A dataset evaluated or predicted with a model must use the model's classes and predicates."""
    if data.classes != model.classes or data.predicates != model.predicates:
        raise InvalidArgument("dataset", "its classes and predicates differ from the trained model's")
