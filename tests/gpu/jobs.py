"""Each service's smallest real job for `make gpu-check`: (kind, parameters) on inputs the check
makes itself (synthetic worlds, the project's tiny models written by the services' example-input
writers and uploaded), so it needs no data and no network. `prepare(client, folder)` returns the
parameters. Services whose methods use no torch (ops) are left out: they own no device."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from paperworks.shared.sdk.states import PROTO_TO_STATE

BUILTIN = {"target": {"kind": "builtin", "builtin": "planted-target"},
           "judge": {"kind": "builtin", "builtin": "lexicon-judge"},  # the MiniLM embedder: torch
           "generator": {"kind": "builtin", "builtin": "template-generator"}}


def _quantize(client, folder: Path) -> dict:
    from paperworks.services.quantizer.data import write_examples

    write_examples(folder, steps=20)
    model = client.upload(folder / "tiny-model").artifact.sha256
    corpus = client.upload(folder / "corpus.txt").artifact.sha256
    return {"model": {"kind": "tiny", "source": {"upload": model}}, "data": {"source": {"upload": corpus}},
            "method": "rabit", "seq_len": 32, "token_budget": 2560, "init_sweeps": 5}


def _fixed(params: dict) -> Callable:
    return lambda client, folder: params


JOBS: dict[str, tuple[str, Callable]] = {
    "bias": ("generate_benchmark", _fixed({**BUILTIN, "budget_target_calls": 40, "benchmark_size": 6})),
    "quantizer": ("quantize", _quantize),
    "segmenter": ("train_denoiser", _fixed({"dataset": {"synthetic": {"seed": 1, "count": 3, "size": 24}},
                                            "steps": 20})),
    "urban": ("pretrain", _fixed({"dataset": {"synthetic": {"seed": 7, "cities": 2,
                                                            "locations_per_city": 60}},
                                  "embed_dim": 16, "heads": 2, "layers": 1, "steps": 30, "batch_size": 64})),
    "router": ("train_rejector", _fixed({"synthetic": {"imbalance": 10}, "loss": "LOSS_MILD", "n_train": 400,
                                         "n_validation": 200, "n_test": 200, "steps": 200})),
    "scenegraph": ("train", _fixed({"dataset": {"synthetic": {"seed": 0, "images": 24}}, "base": "penet",
                                    "detector_epochs": 2, "relation_epochs": 2, "max_objects": 6})),
    "clip": ("train_clip", _fixed({"steps": 20, "batch_size": 32, "width": 16, "vision_layers": 1})),
    "graph": ("train_generator", _fixed({"steps": 20, "train_graphs": 16, "validation_graphs": 4,
                                         "lm_steps": 10, "hidden": 16})),
    "moe": ("upcycle", _fixed({"dense_steps": 30, "d_model": 16, "heads": 2, "d_ff": 32, "batch_size": 32})),
    "vlm": ("pretrain", _fixed({"steps": 40, "d_model": 16, "heads": 2, "lm_layers": 2, "batch_size": 32})),
    # the plan profiles the layers on the job's device (cuda:0 here); Train's NCCL path needs world_size GPUs
    # on one worker, which a one-GPU check cannot give
    "training": ("plan_parallelism", _fixed({
        "model": {"encoders": [{"name": "vision", "tokens": 8, "input_dim": 12, "d_model": 16, "layers": 2}],
                  "d_model": 16, "llm_layers": 2, "heads": 2, "vocab": 16, "text_tokens": 8},
        "world_size": 2, "cp_size": 2, "sequence": {"seq_len": 1024, "samples": 1}, "profile_repeats": 1})),
}


def state(job) -> str:
    return PROTO_TO_STATE.get(job.state, "?")
