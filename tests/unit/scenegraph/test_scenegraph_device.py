"""Scenegraph runs where its context says: the job handlers on `ctx.device` (PAPERWORKS_DEVICE, else
cuda:0 on a GPU worker), the Predict cache on the server's `device()`; models AND batches go there.
On the meta device nothing can be computed, so a spy records the devices of the modules and tensors
handed to the method and stops the run: placement that follows the context, not a hard-coded cpu.
Where a stage computes nothing data-dependent (the detector's first step, the box classifier, RoIAlign,
the rect masks, the prototype regularizer) it runs on meta whole, so a tensor it built on the CPU would
meet the meta ones and raise. The data-dependent rest (NMS, matching, packing pairs) cannot run on meta:
there a torch-function mode records every tensor the method code builds without naming a device, over a
whole train (depth order on) + evaluate + predict run on the CPU, and the test wants none (issue 29);
the relation heads that run does not reach are checked one training step and scoring pass each. The same
mode records where the method code reads tensors back to the host (`.cpu()`, `.numpy()`): only the few
intended places (`HOST_READS`), so no CPU copy can meet device tensors again.
Mixed precision: the detector's inference pass tolerates bf16 autocast (checked on the CPU's bf16)."""
from __future__ import annotations

import copy
import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from paperworks.scenegraph.v1 import scenegraph_pb2
from paperworks.services.scenegraph import checkpoint, generator, tasks
from paperworks.services.scenegraph import servicer as servicer_module
from paperworks.services.scenegraph.data.__main__ import write_image
from paperworks.services.scenegraph.data.scenes import SceneConfig, generate_scenes
from paperworks.services.scenegraph.dsnet import DSNetConfig
from paperworks.services.scenegraph.generator import SceneGraphGenerator, TrainConfig, features_on
from paperworks.services.scenegraph.relation_model import RelationConfig, RelationModel
from paperworks.services.scenegraph.sgg import detector as detector_module
from paperworks.services.scenegraph.sgg.components import PrototypeClassifier, rect_masks
from paperworks.services.scenegraph.sgg.detector import image_tensor, train_box_classifier
from paperworks.services.scenegraph.sgg.roi_align import roi_align
from paperworks.services.scenegraph.spec import EvaluateParams, PredictParams, TrainParams
from paperworks.shared.config import get_settings
from paperworks.shared.devices import autocast
from paperworks.shared.tasks.context import JobContext
from torch import nn
from torch.overrides import TorchFunctionMode

SYNTHETIC = {"synthetic": {"seed": 4, "images": 8}}
SMALL = {"detector_epochs": 1, "relation_epochs": 1, "max_objects": 6}
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")


class _Context(JobContext):
    """A JobContext whose device is the real property unless set; progress and artifacts in memory;
    the train job it builds on is `model_bytes`."""

    def __init__(self, device: str | None = None, model_bytes: bytes = b""):
        super().__init__("scenegraph-test", "token", 1, None, None)
        if device is not None:
            self.device = device
        self.model_bytes = model_bytes
        self.stored: dict[str, object] = {}

    def progress(self, *args, **kwargs):
        pass

    def put_artifact(self, name, data, content_type):
        self.stored[name] = data
        return name

    def put_json(self, name, obj):
        self.stored[name] = obj

    def announce_model(self, *args, **kwargs):
        pass

    def job_artifact(self, service, job_id, name, field, kind=None):
        return self.model_bytes, "sha"


class Placed(Exception):
    """Raised by a spy once it has seen what the method was handed."""


def _devices(value) -> list[str]:
    if isinstance(value, torch.Tensor):
        return [value.device.type]
    if isinstance(value, nn.Module):
        return [t.device.type for t in (*value.parameters(), *value.buffers())]
    if isinstance(value, SceneGraphGenerator):
        return [d for _, module in value.modules() for d in _devices(module)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [d for f in dataclasses.fields(value) for d in _devices(getattr(value, f.name))]
    if isinstance(value, dict):
        return [d for v in value.values() for d in _devices(v)]
    if isinstance(value, (list, tuple)):
        return [d for v in value for d in _devices(v)]
    return []


def spy_on(monkeypatch, owner, name: str, stop: bool = True) -> list[str]:
    """Replaces `owner.name` by a spy that records the device of every tensor, module and batch it is
    handed, then raises Placed (`stop`) or calls the real function. Returns the list it fills."""
    seen: list[str] = []
    real = getattr(owner, name)

    def spy(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            seen.extend(_devices(value))
        if stop:
            raise Placed
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return seen


@pytest.fixture(scope="module")
def model_bytes(tiny_generator):
    return checkpoint.save(tiny_generator)


def test_train_job_honours_paperworks_device_and_runs_on_cpu(monkeypatch):
    relation = spy_on(monkeypatch, generator, "train_relation_model", stop=False)
    monkeypatch.setenv("PAPERWORKS_DEVICE", "cpu")
    get_settings.cache_clear()
    try:
        ctx = _Context()
        result = tasks.run_train(TrainParams(dataset=SYNTHETIC, base="penet", **SMALL), ctx)
    finally:
        get_settings.cache_clear()
    assert ctx.device == "cpu" and len(relation) > 20 and set(relation) == {"cpu"}
    assert result["images"] == 8 and "model.safetensors" in ctx.stored
    assert set(_devices(checkpoint.load(ctx.stored["model.safetensors"], ctx.device))) == {"cpu"}


def test_train_job_puts_the_detector_and_its_batches_on_the_context_device(monkeypatch):
    # the detector trains on the job's device: its first step's maps and targets reach the loss on meta
    seen = spy_on(monkeypatch, detector_module, "detection_loss")  # (maps, targets)
    with pytest.raises(Placed):
        tasks.run_train(TrainParams(dataset=SYNTHETIC, **SMALL), _Context("meta"))
    assert len(seen) == 9 and set(seen) == {"meta"}


def test_train_job_hands_the_box_classifier_features_on_the_context_device(monkeypatch, tiny_generator):
    # a trained detector (the stage above is checked there), moved by the generator; its features for the
    # box classifier are computed on the job's device: meta in, meta out
    monkeypatch.setattr(generator, "train_detector",
                        lambda *args, **kwargs: copy.deepcopy(tiny_generator.detector))
    seen = spy_on(monkeypatch, generator, "train_box_classifier")
    with pytest.raises(Placed):
        tasks.run_train(TrainParams(dataset=SYNTHETIC, **SMALL), _Context("meta"))
    assert seen == ["meta"]


def test_the_box_classifier_trains_whole_on_its_features_device(scenes):
    """Boxes, labels and image indices from the annotation follow the features: on meta, CPU-built boxes
    would raise in RoIAlign and CPU-built labels in the loss (a CPU index passes index_select on meta;
    the factory-call check below covers it)."""
    coarse = torch.empty(6, 64, 16, 16, device="meta")
    clf = train_box_classifier(coarse, scenes[:6], 5, epochs=2, seed=0)
    assert {t.device.type for t in clf.parameters()} == {"meta"}


def test_the_device_free_pieces_follow_their_input_on_meta(scenes):
    images = image_tensor([s.image for s in scenes[:2]], "meta")
    assert images.device.type == "meta" and images.shape == (2, 3, 64, 64)
    feats, boxes = torch.empty(2, 8, 32, 32, device="meta"), torch.empty(5, 4, device="meta")
    index = torch.zeros(5, dtype=torch.long, device="meta")
    assert roi_align(feats, boxes, index, (6, 6), 0.5).device.type == "meta"
    assert rect_masks(boxes, boxes).device.type == "meta"
    assert PrototypeClassifier(16, 4).to("meta").regularizer().device.type == "meta"


# the method code: where every tensor must follow its input's device (the metrics, the data pipeline and
# the checkpoint read and write CPU arrays by design)
SCENEGRAPH = Path(generator.__file__).resolve().parent
METHOD_CODE = ("sgg/detector.py", "sgg/features.py", "sgg/depth_order.py", "sgg/roi_align.py",
               "sgg/components.py", "sgg/geometry.py", "relation_model.py", "generator.py", "dsnet/",
               "baselines/")
FACTORIES = {torch.tensor, torch.as_tensor, torch.zeros, torch.ones, torch.full, torch.empty, torch.arange,
             torch.eye, torch.rand, torch.randn, torch.randint, torch.randperm, torch.linspace}
# built on the CPU on purpose: modules' construction (seeded there, then moved), and the annotation's
# predicate counts that the frequency prior's construction reads
BUILT_ON_THE_CPU = {"__init__", "predicate_counts"}
# where the method code reads a tensor back to the host on purpose: the greedy NMS loop's few IoUs (its
# result goes back to the boxes' device), the LSTM packing's lengths (pack_padded_sequence wants them on
# the CPU), and the scores and boxes the metrics and the ranking read. Any other `.cpu()`/`.numpy()` in
# the method code is a tensor that may meet device tensors again.
HOST_READS = {"sgg/detector.py (_nms: cpu)", "baselines/motifs.py (_bilstm: cpu)",
              "generator.py (_scores: cpu)", "generator.py (predict: numpy)"}


class FactoryCalls(TorchFunctionMode):
    """Records the tensor factories the method code calls, and which of them name no device (so would
    build the tensor on the CPU whatever the device of the inputs it meets), and where it reads tensors
    back to the host. `torch.from_numpy` takes no device and no mode sees it: `watch_from_numpy` counts
    every call of it from the method code as one without a device."""

    def __init__(self):
        super().__init__()
        self.checked = 0
        self.without_device: set[str] = set()
        self.to_host: set[str] = set()

    @staticmethod
    def _method_code(frame) -> str:
        """The frame's file relative to the service when it is method code built off the CPU, else ""."""
        path = Path(frame.f_code.co_filename).resolve()
        where = path.relative_to(SCENEGRAPH).as_posix() if path.is_relative_to(SCENEGRAPH) else ""
        return where if where.startswith(METHOD_CODE) and frame.f_code.co_name not in BUILT_ON_THE_CPU else ""

    def _factory(self, frame, name: str, kwargs: dict) -> None:
        if where := self._method_code(frame):
            self.checked += 1
            if "device" not in kwargs:
                self.without_device.add(f"{where}:{frame.f_lineno} ({frame.f_code.co_name}: torch.{name})")

    def watch_from_numpy(self, monkeypatch) -> None:
        real = torch.from_numpy

        def from_numpy(array):
            self._factory(sys._getframe(1), "from_numpy", {})
            return real(array)

        monkeypatch.setattr(torch, "from_numpy", from_numpy)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        frame = sys._getframe(1)  # the caller: factories and tensor methods are builtins, no frame between
        if func in FACTORIES:
            self._factory(frame, func.__name__, kwargs)
        elif func in (torch.Tensor.cpu, torch.Tensor.numpy) and (where := self._method_code(frame)):
            self.to_host.add(f"{where} ({frame.f_code.co_name}: {func.__name__})")
        return func(*args, **kwargs)


def test_no_tensor_of_the_method_is_built_off_its_inputs_device(vocab, monkeypatch):
    """Train (depth order on, so the estimator's stage runs), evaluate in all three modes and predict,
    on the CPU: every tensor the method code creates names the device it follows, and it reads tensors
    back to the host only where it means to."""
    samples = generate_scenes(12, seed=5, cfg=SceneConfig(overlap_pair_rate=0.7))
    cfg = TrainConfig(relation=RelationConfig(base="motifs", dsnet=DSNetConfig(dim=16, heads=2)),
                      detector_epochs=1, classifier_epochs=1, relation_epochs=1, max_objects=6,
                      depth_order=True)
    calls = FactoryCalls()
    calls.watch_from_numpy(monkeypatch)
    with calls:
        gen = SceneGraphGenerator.train(samples, vocab, cfg)
        gen.evaluate(samples[:4])
        gen.predict(samples[:2], "sgdet", top_k=5)
    assert calls.checked > 100, calls.checked  # the check saw the method's tensors being built
    assert not calls.without_device, sorted(calls.without_device)
    assert calls.to_host == HOST_READS  # the check saw the intended reads, and no other


@pytest.mark.parametrize("relation", [
    {"base": "motifs", "head": "original"},
    {"base": "penet", "head": "original"},
    {"base": "penet", "frequency_prior": True, "dsnet": {"streams": "single", "layout_layers": 0}},
    {"base": "motifs", "dsnet": {"streams": "vision", "fusion": "none", "gated": False}},
    {"base": "penet", "dsnet": {"fusion": "space_to_vision"}},
], ids=lambda r: "-".join(str(v) for v in r.values()))
def test_every_relation_head_builds_its_tensors_on_its_inputs_device(monkeypatch, tiny_generator, scenes,
                                                                     relation):
    """The bases' own predictors and the DS-Net head's other streams and fusions, which the train run
    above does not reach: their training step and `predicate_scores` name a device for every tensor."""
    cfg = RelationConfig.model_validate({**relation, "dsnet": {"dim": 16, "heads": 2,
                                                                **relation.get("dsnet", {})}})
    backbone = tiny_generator.detector.backbone
    model = RelationModel(cfg, tiny_generator.vocab, tiny_generator.counts, backbone.coarse_channels,
                          backbone.fine_channels)
    feats = tiny_generator.features(scenes[:6], "predcls")
    calls = FactoryCalls()
    calls.watch_from_numpy(monkeypatch)
    with calls:
        model.loss(feats, model(feats)).backward()
        scores = model.predicate_scores(feats)
    assert scores.shape[-1] == tiny_generator.vocab.num_predicates and calls.checked > 0
    assert not calls.without_device, sorted(calls.without_device)
    assert calls.to_host <= HOST_READS, sorted(calls.to_host - HOST_READS)


def test_the_relation_model_and_its_batches_follow_the_device(monkeypatch, tiny_generator, scenes, vocab):
    real = tiny_generator.features(scenes[:6], "sgdet")
    handed = []

    def extract(detector, classifier, samples, mode, max_objects, attributes=None):
        handed.extend(_devices(detector) + _devices(classifier))
        return real  # nothing computes on meta: the CPU batch, which the generator moves

    monkeypatch.setattr(generator, "extract", extract)
    seen = spy_on(monkeypatch, generator, "train_relation_model")  # (model, feats, epochs, seed)
    with pytest.raises(Placed):  # copies: `to` moves a module in place
        SceneGraphGenerator.train(scenes[:6], vocab, tiny_generator.cfg,
                                  detector=copy.deepcopy(tiny_generator.detector),
                                  classifier=copy.deepcopy(tiny_generator.classifier), device="meta")
    assert len(handed) > 10 and set(handed) == {"meta"}
    assert len(seen) > 20 and set(seen) == {"meta"}


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("kind", ["evaluate", "predict"])
def test_evaluate_and_predict_jobs_run_on_the_context_device(monkeypatch, model_bytes, device, kind):
    seen = spy_on(monkeypatch, generator, "extract", stop=device == "meta")
    scores = spy_on(monkeypatch, generator.RelationModel, "predicate_scores", stop=False)
    ctx = _Context(device, model_bytes)
    common = {"train_job_id": "scenegraph-train", "dataset": SYNTHETIC}
    run = (lambda: tasks.run_evaluate(EvaluateParams(**common, modes=["predcls", "sgdet"]), ctx)) \
        if kind == "evaluate" else (lambda: tasks.run_predict(PredictParams(**common, max_drawings=1), ctx))
    if device == "meta":
        with pytest.raises(Placed):
            run()
        assert len(seen) > 10 and set(seen) == {"meta"}
        return
    result = run()
    assert result["images"] == 8 and set(seen) == {"cpu"} and set(scores) == {"cpu"} and len(scores) > 20


def _servicer(monkeypatch, device: str, model: bytes):
    monkeypatch.setattr(servicer_module, "device", lambda: device)
    monkeypatch.setattr(servicer_module, "job_artifact",
                        lambda store, blobs, tenant, service, job_id, name, field, kind=None: (model, "sha"))
    return servicer_module.ScenegraphServicer(SimpleNamespace(store=None, artifacts=None))


def test_predict_rpc_caches_and_runs_on_the_server_device(monkeypatch, model_bytes, tmp_path):
    write_image(tmp_path / "scene.png", seed=2)
    request = scenegraph_pb2.PredictRequest(train_job_id="scenegraph-train",
                                            image=(tmp_path / "scene.png").read_bytes(), top_k=3)
    scope = SimpleNamespace(tenant="alice")
    svc = _servicer(monkeypatch, "meta", model_bytes)
    seen = spy_on(monkeypatch, servicer_module, "predict_one")  # (generator, request, scope)
    with pytest.raises(Placed):
        svc._predict(scope, request)
    assert len(seen) > 20 and set(seen) == {"meta"}
    monkeypatch.undo()
    reply = _servicer(monkeypatch, "cpu", model_bytes)._predict(scope, request)
    assert reply.mode == "sgdet" and len(reply.triplets) <= 3


def test_the_detector_pass_tolerates_bf16_autocast(model_bytes, scenes):
    """Evaluate and Predict run the detector under bf16 autocast on a GPU: on the CPU's bf16 the
    objects' and pairs' RoI features stay within 5% of float32 (relative Frobenius error; measured
    0.4% and 2.2%) and the predicate scores within 0.01 (measured 4e-5); the scores stay float32."""
    reference = checkpoint.load(model_bytes)
    mixed = checkpoint.load(model_bytes, "cpu", lambda d: torch.autocast(d.type, dtype=torch.bfloat16))
    ref_feats, ref_scores = reference._scores(scenes[:8], "predcls")
    feats, scores = mixed._scores(scenes[:8], "predcls")
    for name in ("obj_feats", "union_feats"):
        a, b = getattr(ref_feats, name).float(), getattr(feats, name).float()
        assert 0 < (a - b).norm() <= 0.05 * a.norm(), name  # > 0: the pass did run in bf16
    assert scores.dtype == torch.float32 and (scores - ref_scores).abs().max() < 0.01
    assert torch.equal(features_on(feats, "cpu").boxes, ref_feats.boxes)


@needs_gpu
def test_train_evaluate_and_predict_jobs_run_whole_on_a_gpu(monkeypatch, scenes):
    """Where a GPU is, what the meta and factory checks stand in for: a train job (depth order on, so
    every stage runs), an evaluate job in all three modes and a predict job on cuda:0, the relation
    model trained on the GPU; the same checkpoint's predicate scores there (detector pass in bf16) within
    0.02 of the CPU's float32 ones (the CPU's bf16 measured 4e-5: test_the_detector_pass_tolerates_...)."""
    relation = spy_on(monkeypatch, generator, "train_relation_model", stop=False)
    ctx = _Context("cuda:0")
    result = tasks.run_train(TrainParams(dataset=SYNTHETIC, base="motifs", depth_order=True, **SMALL), ctx)
    assert result["images"] == 8 and len(relation) > 20 and set(relation) == {"cuda"}
    model = ctx.stored["model.safetensors"]
    gpu = _Context("cuda:0", model)
    common = {"train_job_id": "scenegraph-train", "dataset": SYNTHETIC}
    assert set(tasks.run_evaluate(EvaluateParams(**common), gpu)["modes"]) == {"predcls", "sgcls", "sgdet"}
    assert tasks.run_predict(PredictParams(**common, max_drawings=1), gpu)["images"] == 8
    _, reference = checkpoint.load(model)._scores(scenes[:8], "predcls")
    feats, scores = checkpoint.load(model, "cuda:0", autocast)._scores(scenes[:8], "predcls")
    assert set(_devices(feats)) == {"cpu"} and scores.device.type == "cpu"  # read back for the metrics
    assert (scores - reference).abs().max() < 0.02
