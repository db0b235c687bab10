"""Synthetic scenes, the JSON dataset format, the Visual Genome converter, the checkpoint, the sync
Predict path and its field-naming errors."""
from __future__ import annotations

import io
import json

import h5py
import numpy as np
import pytest
from paperworks.scenegraph.v1 import scenegraph_pb2
from paperworks.services.scenegraph import checkpoint
from paperworks.services.scenegraph.data.scenes import (
    INTERACTIONS,
    generate_scenes,
    geometric_predicate,
)
from paperworks.services.scenegraph.data.scenes_json import load_json, write_json
from paperworks.services.scenegraph.data.visual_genome import convert_visual_genome
from paperworks.services.scenegraph.dsnet import DSNetConfig
from paperworks.services.scenegraph.generator import SceneGraphGenerator, TrainConfig
from paperworks.services.scenegraph.relation_model import RelationConfig
from paperworks.services.scenegraph.servicer import predict_one
from paperworks.shared.checkpoints import safetensors_metadata
from paperworks.shared.errors import InvalidArgument
from PIL import Image
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors


def test_box_rules():
    a = np.array([10.0, 0, 20, 10])
    assert geometric_predicate(a, np.array([5.0, 10, 25, 20]), True) == "on"  # touching from above
    assert geometric_predicate(a, np.array([5.0, 20, 25, 30]), True) == "above"
    assert geometric_predicate(np.array([5.0, 20, 25, 30]), a, True) == "under"
    assert geometric_predicate(np.array([12.0, 2, 15, 5]), np.array([0.0, 0, 30, 30]), True) == "in"
    assert geometric_predicate(np.array([0.0, 0, 10, 10]), np.array([5.0, 5, 15, 15]), True) == "in front of"
    assert geometric_predicate(np.array([0.0, 0, 10, 10]), np.array([5.0, 5, 15, 15]), False) == "behind"
    assert geometric_predicate(np.array([0.0, 0, 10, 10]), np.array([13.0, 0, 20, 10]), True) == "near"
    assert geometric_predicate(np.array([0.0, 0, 10, 10]), np.array([40.0, 0, 50, 10]), True) is None


def test_synthetic_scenes_have_long_tailed_sparse_labels_and_cue_free_decoys(vocab):
    scenes = generate_scenes(300, seed=0)
    assert scenes[0].image.shape == (64, 64, 3) and scenes[0].image.dtype == np.uint8
    labelled = np.concatenate([s.relations[:, 2] for s in scenes])
    true = np.concatenate([s.true_relations[:, 2] for s in scenes])
    assert len(labelled) < 0.8 * len(true)  # sparse: many relations that hold are unlabelled
    ng = set(vocab.non_geometric_ids)
    assert 0.02 < np.isin(labelled, list(ng)).mean() < 0.3  # the non-geometric predicates are the tail
    # every planted interaction also satisfies its geometric predicate (layout alone cannot decide)
    for s in scenes[:100]:
        pairs = {}
        for a, b, p in s.true_relations.tolist():
            pairs.setdefault((a, b), set()).add(vocab.predicate_name(p))
        for names in pairs.values():
            for name in names & set(INTERACTIONS):
                assert INTERACTIONS[name][2] in names
    # same seed, same scenes
    again = generate_scenes(3, seed=0)
    assert all((a.image == b.image).all() for a, b in zip(scenes[:3], again, strict=True))


def test_json_dataset_round_trip_and_resize(tmp_path, scenes, vocab):
    path = write_json(scenes[:4], vocab, tmp_path)
    loaded_vocab, loaded = load_json(path, image_size=64)
    assert loaded_vocab == vocab and len(loaded) == 4
    assert (loaded[1].image == scenes[1].image).all()
    assert np.allclose(loaded[1].boxes, scenes[1].boxes, atol=0.01)
    assert (loaded[1].relations == scenes[1].relations).all()
    _, small = load_json(path, image_size=48)
    assert small[1].image.shape == (48, 48, 3)
    assert np.allclose(small[1].boxes, scenes[1].boxes * 0.75, atol=0.01)


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["images"][1]["objects"][0].update(label="zebra"), "images[1].objects[0].label"),
    (lambda d: d["images"][0]["objects"][1].update(box=[0, 0, 99, 10]), "images[0].objects[1].box"),
    (lambda d: d["images"][0]["relations"].append({"subject": 0, "object": 0, "predicate": "on"}),
     "images[0].relations["),
    (lambda d: d["images"][0]["relations"].append({"subject": 0, "object": 1, "predicate": "eats"}),
     ".predicate"),
    (lambda d: d["images"][0].update(file="nope.png"), "images[0].file"),
])
def test_bad_dataset_entries_name_the_field(tmp_path, scenes, vocab, edit, field):
    path = write_json(scenes[:2], vocab, tmp_path)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidArgument) as exc:
        load_json(path, 64)
    assert exc.value.field.startswith("dataset.path") and field in exc.value.field


def test_visual_genome_converter(tmp_path):
    image_dir = tmp_path / "VG_100K"
    image_dir.mkdir()
    records = [{"image_id": 7, "width": 200, "height": 100}, {"image_id": 1592, "width": 10, "height": 10},
               {"image_id": 8, "width": 100, "height": 100}, {"image_id": 9, "width": 100, "height": 100}]
    for r in (records[0], records[2], records[3]):
        Image.new("RGB", (r["width"], r["height"])).save(image_dir / f"{r['image_id']}.jpg")
    (tmp_path / "image_data.json").write_text(json.dumps(records))
    dicts = {"idx_to_label": {"1": "man", "2": "horse"}, "idx_to_predicate": {"1": "on", "2": "riding"}}
    (tmp_path / "dicts.json").write_text(json.dumps(dicts))
    with h5py.File(tmp_path / "vg.h5", "w") as f:  # image 7: man riding horse; image 9: no boxes
        f["split"] = np.array([0, 0, 2])
        f["img_to_first_box"], f["img_to_last_box"] = np.array([0, 2, -1]), np.array([1, 2, -1])
        f["img_to_first_rel"], f["img_to_last_rel"] = np.array([0, -1, -1]), np.array([0, -1, -1])
        f["labels"] = np.array([[1], [2], [2]])
        # centre x, centre y, w, h at 1024 on the longer side (200 px: 1024 -> 200)
        f["boxes_1024"] = np.array([[512, 256, 512, 256], [256, 256, 512, 512], [512, 512, 1024, 1024]])
        f["relationships"], f["predicates"] = np.array([[0, 1]]), np.array([[2]])
    out = tmp_path / "converted"
    path = convert_visual_genome(tmp_path / "vg.h5", tmp_path / "dicts.json", tmp_path / "image_data.json",
                                 image_dir, out, split="train")
    doc = json.loads(path.read_text())
    assert doc["predicates"] == ["on", "riding"] and doc["geometric"] == ["on"]
    first = doc["images"][0]
    assert [d["id"] for d in doc["images"]] == ["7", "8"]
    assert first["objects"][0] == {"box": [50.0, 25.0, 150.0, 75.0], "label": "man"}
    assert first["relations"] == [{"subject": 0, "predicate": "riding", "object": 1}]
    vocab, samples = load_json(path, 64)
    assert samples[0].relations.tolist() == [[0, 1, vocab.predicate_index("riding")]]


def test_checkpoint_round_trip_predicts_the_same(tiny_generator, scenes):
    loaded = checkpoint.load(checkpoint.save(tiny_generator))
    for mode in ("predcls", "sgcls", "sgdet"):
        a = tiny_generator.predict(scenes[:3], mode, top_k=5)
        b = loaded.predict(scenes[:3], mode, top_k=5)
        assert [t.predicate for g in a for t in g.triplets] == [t.predicate for g in b for t in g.triplets]
        assert np.allclose([t.score for g in a for t in g.triplets], [t.score for g in b for t in g.triplets])
    metrics = loaded.evaluate(scenes[:6], ("predcls",))["predcls"]
    assert 0 <= metrics["mR@100"] <= 1 and metrics["R@100"] >= metrics["R@20"]


def test_a_dsnet_checkpoint_from_before_the_prior_switch_loads_with_its_prior(scenes, vocab):
    """Before `RelationConfig.frequency_prior` the DS-Net head always had the frequency prior: a saved
    PE-Net + DS-Net config without the field rebuilds the head with it, so its weights fit and it
    predicts as it did."""
    cfg = TrainConfig(relation=RelationConfig(base="penet", frequency_prior=True,
                                              dsnet=DSNetConfig(dim=16, heads=2)),
                      detector_epochs=1, classifier_epochs=1, relation_epochs=1, max_objects=6)
    gen = SceneGraphGenerator.train(scenes[:8], vocab, cfg)
    data = checkpoint.save(gen)
    header = json.loads(safetensors_metadata(data)["config"])
    del header["relation"]["frequency_prior"]
    old = save_tensors(load_tensors(data), metadata={"vocab": safetensors_metadata(data)["vocab"],
                                                    "config": json.dumps(header)})
    loaded = checkpoint.load(old)
    assert loaded.cfg.relation.uses_frequency_prior
    a, b = gen.predict(scenes[:2], "predcls", top_k=5), loaded.predict(scenes[:2], "predcls", top_k=5)
    assert np.allclose([t.score for g in a for t in g.triplets], [t.score for g in b for t in g.triplets])


def _png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def test_predict_one_picks_the_mode_from_the_boxes_and_scales_back(tiny_generator, scenes):
    big = np.asarray(Image.fromarray(scenes[0].image).resize((128, 128)))
    request = scenegraph_pb2.PredictRequest(image=_png(big), top_k=3)
    reply = predict_one(tiny_generator, request)
    assert reply.mode == "sgdet" and len(reply.triplets) <= 3
    boxes = [scenegraph_pb2.Box(x1=b[0] * 2, y1=b[1] * 2, x2=b[2] * 2, y2=b[3] * 2,
                                label=tiny_generator.vocab.classes[c])
             for b, c in zip(scenes[0].boxes, scenes[0].labels, strict=True)]
    reply = predict_one(tiny_generator, scenegraph_pb2.PredictRequest(image=_png(big), boxes=boxes))
    assert reply.mode == "predcls" and len(reply.objects) == len(boxes)
    assert reply.objects[0].box.x2 == pytest.approx(boxes[0].x2, abs=0.01)
    assert reply.objects[0].box.label == boxes[0].label
    scores = [t.score for t in reply.triplets]
    assert scores == sorted(scores, reverse=True) and len(scores) == min(20, len(boxes) * (len(boxes) - 1))
    for b in boxes:
        b.label = ""
    unlabelled = scenegraph_pb2.PredictRequest(image=_png(big), boxes=boxes)
    assert predict_one(tiny_generator, unlabelled).mode == "sgcls"


@pytest.mark.parametrize(("boxes", "field"), [
    ([scenegraph_pb2.Box(x1=0, y1=0, x2=10, y2=10, label="person"),
      scenegraph_pb2.Box(x1=60, y1=0, x2=70, y2=10, label="horse")], "boxes[1]"),
    ([scenegraph_pb2.Box(x1=0, y1=0, x2=10, y2=10, label="unicorn")], "boxes[0].label"),
    ([scenegraph_pb2.Box(x1=5, y1=0, x2=5, y2=10, label="person")], "boxes[0]"),
    ([scenegraph_pb2.Box(x1=0, y1=0, x2=10, y2=10, label="person"),
      scenegraph_pb2.Box(x1=0, y1=0, x2=9, y2=9)], "boxes"),
])
def test_predict_one_rejects_bad_boxes_naming_them(tiny_generator, scenes, boxes, field):
    with pytest.raises(InvalidArgument) as exc:
        predict_one(tiny_generator, scenegraph_pb2.PredictRequest(image=_png(scenes[0].image), boxes=boxes))
    assert exc.value.field == field


@pytest.mark.parametrize("top_k", [0, 1001])
def test_predict_one_rejects_a_top_k_out_of_range_naming_it(tiny_generator, scenes, top_k):
    """Unset means 20; an explicit 0 is out of range like any other value."""
    with pytest.raises(InvalidArgument) as exc:
        predict_one(tiny_generator, scenegraph_pb2.PredictRequest(image=_png(scenes[0].image), top_k=top_k))
    assert exc.value.field == "top_k"


def test_predict_one_rejects_a_file_that_is_no_image(tiny_generator):
    with pytest.raises(InvalidArgument) as exc:
        predict_one(tiny_generator, scenegraph_pb2.PredictRequest(image=b"not a png"))
    assert exc.value.field == "image"
