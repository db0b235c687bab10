"""The saved format of a trained scene-graph generator: one safetensors file.

Tensors: the frequency counts (`counts`), the training predicate frequencies
(`train_frequencies`), and every trained part's state dict under its prefix
(`detector.`, `classifier.`, `relation.`, and `depth.` where the depth-order
estimator was fitted). The header's `__metadata__` holds the vocabulary and the
training configuration as JSON, so `load` rebuilds the same modules before it
fills them. A train job stores it as `MODEL_FILE` (announced with MODEL_READY). `load` places
the generator on the device it will run on (the job's, or the server's for Predict).
"""
from __future__ import annotations

import json

import torch
from paperworks.services.scenegraph.generator import Autocast, SceneGraphGenerator, TrainConfig
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from paperworks.shared.checkpoints import safetensors_metadata
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

MODEL_FILE = "model.safetensors"


def save(gen: SceneGraphGenerator) -> bytes:
    tensors = {"counts": gen.counts, "train_frequencies": torch.from_numpy(gen.train_frequencies)}
    for prefix, module in gen.modules():
        for k, v in module.state_dict().items():
            tensors[f"{prefix}.{k}"] = v.detach().cpu().clone().contiguous()
    header = {"vocab": gen.vocab.model_dump_json(), "config": gen.cfg.model_dump_json()}
    return save_tensors(tensors, metadata=header)


def load(data: bytes, device: torch.device | str = "cpu", autocast: Autocast | None = None
         ) -> SceneGraphGenerator:
    """The saved generator, on `device` (inference forward passes under `autocast(device)`)."""
    tensors = load_tensors(data)
    header = safetensors_metadata(data)
    vocab = Vocabulary.model_validate_json(header["vocab"])
    cfg = TrainConfig.model_validate_json(header["config"])
    if "frequency_prior" not in json.loads(header["config"])["relation"] and cfg.relation.head == "dsnet":
        # saved before `RelationConfig.frequency_prior`, when the DS-Net head always had the prior
        cfg.relation = cfg.relation.model_copy(update={"frequency_prior": True})
    gen = SceneGraphGenerator(vocab, cfg, tensors["counts"], tensors["train_frequencies"].numpy())
    for prefix, module in gen.modules():
        module.load_state_dict({k[len(prefix) + 1:]: v for k, v in tensors.items()
                                if k.startswith(prefix + ".")})
        module.eval()
    return gen.to(device, autocast)
