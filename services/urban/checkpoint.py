"""The saved forms of a pretrained encoder (`model.safetensors`) and a fitted probe
(`probe.safetensors`): safetensors, no pickles; configuration travels as JSON metadata.

- encoder: the fusion model's weights, each frozen extractor's state, the per-modality feature
  normalization, and a config naming the format, widths, location scales and modality specs;
- probe: its network, input standardization, target scaling and classes, plus the `extra` a fit-task
  job stores (the pretrain job, target, served variant, modalities).
"""
from __future__ import annotations

import json

import torch
from paperworks.services.urban.probes import Probe
from paperworks.services.urban.urbanfusion import extractors as ex
from paperworks.services.urban.urbanfusion.encoder import ModalitySpec, UrbanEncoder
from paperworks.services.urban.urbanfusion.model import FusionConfig, UrbanFusion
from paperworks.shared.checkpoints import safetensors_metadata
from paperworks.shared.errors import InvalidArgument
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

ENCODER_FORMAT = "paperworks.urban.encoder/1"


def encoder_to_bytes(encoder: UrbanEncoder) -> bytes:
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in encoder.model.state_dict().items()}
    for name, extractor in encoder.extractors.items():
        tensors |= {f"extractor.{name}.{k}": v.contiguous() for k, v in extractor.state().items()}
        tensors[f"norm.{name}.mean"] = torch.from_numpy(encoder.mean[name])
        tensors[f"norm.{name}.std"] = torch.from_numpy(encoder.std[name])
    c = encoder.model.config
    config = {"format": ENCODER_FORMAT, "dim": c.dim, "layers": c.layers, "heads": c.heads, "seed": c.seed,
              "location_scales": list(c.location_scales), "modalities": [list(m) for m in c.modalities],
              "specs": [{"name": s.name, "kind": s.kind, "shape": list(s.shape),
                         "extractor": s.extractor} for s in encoder.specs.values()]}
    return st_save(tensors, metadata={"config": json.dumps(config)})


def encoder_from_bytes(data: bytes) -> UrbanEncoder:
    tensors = st_load(data)
    config = json.loads(safetensors_metadata(data)["config"])
    if config.get("format") != ENCODER_FORMAT:
        raise InvalidArgument("pretrain_job_id", "artifact is not an urban encoder checkpoint")
    fusion = FusionConfig(tuple((n, int(w)) for n, w in config["modalities"]), dim=config["dim"],
                          layers=config["layers"], heads=config["heads"],
                          location_scales=tuple(config["location_scales"]), seed=config["seed"])
    model = UrbanFusion(fusion)
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    specs, extractors, mean, std = [], {}, {}, {}
    for s in config["specs"]:
        spec = ModalitySpec(s["name"], s["kind"], tuple(s["shape"]), s["extractor"])
        extractor = ex.build(spec.extractor, spec.kind, spec.shape, fusion.seed, f"extractors.{spec.name}")
        prefix = f"extractor.{spec.name}."
        extractor.load_state({k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)})
        specs.append(spec)
        extractors[spec.name] = extractor
        mean[spec.name] = tensors[f"norm.{spec.name}.mean"].numpy()
        std[spec.name] = tensors[f"norm.{spec.name}.std"].numpy()
    return UrbanEncoder(specs, extractors, mean, std, model)


def probe_to_bytes(probe: Probe, extra: dict | None = None) -> bytes:
    tensors = {f"net.{k}": v.detach().cpu().contiguous() for k, v in probe.net.state_dict().items()}
    tensors["x_mean"], tensors["x_std"] = torch.from_numpy(probe.x_mean), torch.from_numpy(probe.x_std)
    meta = {"task_type": probe.task_type, "kind": probe.kind, "in_dim": probe.in_dim,
            "classes": probe.classes, "y_mean": probe.y_mean, "y_std": probe.y_std, "extra": extra or {}}
    return st_save(tensors, metadata={"probe": json.dumps(meta)})


def probe_from_bytes(data: bytes, device: str | torch.device = "cpu") -> tuple[Probe, dict]:
    """The probe, on `device`, and the `extra` stored with it."""
    meta = json.loads(safetensors_metadata(data)["probe"])
    tensors = st_load(data)
    probe = Probe(meta["task_type"], meta["kind"], meta["in_dim"], meta["classes"])
    probe.net.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("net.")})
    probe.x_mean, probe.x_std = tensors["x_mean"].numpy(), tensors["x_std"].numpy()
    probe.y_mean, probe.y_std = meta["y_mean"], meta["y_std"]
    return probe.to(device), meta["extra"]
