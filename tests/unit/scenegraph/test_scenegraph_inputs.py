"""A job's dataset from a server path (a scenes.json, or a folder holding one at its top or in its
one subfolder), confined to the data root, image entries included; the example-input writer's
output is a dataset a job loads and boxes the Predict RPC takes (uploads: tests/integration)."""
from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from paperworks.scenegraph.v1 import scenegraph_pb2
from paperworks.services.scenegraph.data import load_dataset, scenes_file
from paperworks.services.scenegraph.data.__main__ import main
from paperworks.services.scenegraph.servicer import predict_one
from paperworks.services.scenegraph.spec import DatasetParams
from paperworks.shared.errors import InvalidArgument


@pytest.fixture
def root(tmp_path, monkeypatch):
    """The data root, holding `scenes/` (4 synthetic scenes) written by the example-input writer."""
    monkeypatch.setenv("PAPERWORKS_SCENEGRAPH_DATA_ROOT", str(tmp_path / "root"))
    main(["scenes", str(tmp_path / "root" / "scenes"), "--images", "4", "--seed", "1"])
    return tmp_path / "root"


def _load(**dataset):
    return load_dataset(DatasetParams.model_validate(dataset), 64, None)


@pytest.mark.parametrize("where", ["scenes/scenes.json", "scenes", "."])
def test_a_server_path_names_the_file_or_its_folder(root, where):
    vocab, samples = _load(path=str(root / where))
    assert len(samples) == 4 and samples[0].image.shape == (64, 64, 3) and "riding" in vocab.predicates
    assert len(_load(source={"path": str(root / where)})[1]) == 4


def test_a_folder_without_scenes_json_is_refused_naming_the_field(root):
    with pytest.raises(InvalidArgument) as exc:
        _load(path=str(root / "scenes" / "images"))
    assert exc.value.field == "dataset.path" and "no scenes.json" in str(exc.value)
    assert scenes_file(root / "scenes", "f") == root / "scenes" / "scenes.json"


def test_paths_outside_the_data_root_are_refused_alike_whether_they_exist_or_not(root, tmp_path):
    (tmp_path / "outside.png").write_bytes((root / "scenes" / "images" / "synthetic-1-0.png").read_bytes())
    messages = []
    for target in ("../../outside.png", "../../missing.png"):
        path = root / "scenes" / "scenes.json"
        doc = json.loads(path.read_text())
        doc["images"][1]["file"] = target
        path.write_text(json.dumps(doc))
        with pytest.raises(InvalidArgument) as exc:
            _load(path=str(path))
        assert exc.value.field == "dataset.path: images[1].file"
        messages.append(str(exc.value))
    assert messages[0] == messages[1] and "inside the data root" in messages[0]
    with pytest.raises(InvalidArgument) as exc:
        _load(path=str(tmp_path))
    assert exc.value.field == "dataset.source.path"


def test_the_written_image_and_boxes_make_a_predcls_request(tiny_generator, tmp_path):
    main(["image", str(tmp_path / "scene.png"), "--seed", "3", "--boxes", str(tmp_path / "boxes.json")])
    request = json_format.ParseDict({"boxes": json.loads((tmp_path / "boxes.json").read_text()), "top_k": 2},
                                    scenegraph_pb2.PredictRequest())
    request.image = (tmp_path / "scene.png").read_bytes()
    reply = predict_one(tiny_generator, request)
    assert reply.mode == "predcls" and len(request.boxes) >= 2
    assert [o.box.label for o in reply.objects] == [b.label for b in request.boxes]
