"""RaBiT and LC-QAT at a larger budget than the reproduction tests, every baseline trained in the
same run, plus tokens/s of packed 2-bit generation against the fp32 model on this CPU.

- quality: a TinyDecoder (dim 128, 4 layers, context 128) trained on 200 stdlib files, then
  claims 1 and 2 of tests/reproduction/quantizer/experiments.py with BENCH_QUANTIZER_STEPS QAT
  steps (LC-QAT gets a tenth of them);
- speed: greedy generation of 64 tokens (batch 1, KV cache) through the shared backend's
  decoding loop, fp32 vs the same model with every block projection packed (RaBiT binary2 on
  `binary_linear`, LC-QAT lattice2 on `lattice_linear`), on a random-weight decoder of
  dim 1024 x 8 layers (kernel time does not depend on the values) and on the trained one.

Writes tests/benchmarks/results/quantizer.json; prints a markdown table. BENCH_QUANTIZER_STEPS
and BENCH_QUANTIZER_TEACHER_STEPS shrink it for a smoke run.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: the experiment drivers live in tests/reproduction

from paperworks.kernels import ops  # noqa: E402
from paperworks.services.quantizer import lcqat, quantize, rabit  # noqa: E402
from paperworks.services.quantizer.linears import find_linears, get_module, set_module  # noqa: E402
from paperworks.shared.backends.tiny import TinyBackend  # noqa: E402
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder  # noqa: E402
from reproduction.quantizer import experiments  # noqa: E402

RESULTS = HERE / "results"
STEPS = int(os.environ.get("BENCH_QUANTIZER_STEPS", "600"))
TEACHER_STEPS = int(os.environ.get("BENCH_QUANTIZER_TEACHER_STEPS", "1500"))
PROMPT = "def __init__(self"


def _scalars(d: dict) -> dict:
    return {k: v for k, v in d.items() if isinstance(v, int | float)}


def tokens_per_s(module, new_tokens: int = 64, repeats: int = 3) -> float:
    backend = TinyBackend(module)
    backend.eos_ids = frozenset()  # always decode the full budget
    backend.generate([PROMPT], max_new_tokens=2)  # warm up (first use builds the CPU kernels)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        gen = backend.generate([PROMPT], max_new_tokens=new_tokens)[0]
        times.append(time.perf_counter() - start)
    return len(gen.token_ids) / statistics.median(times)


def packed_random(module: TinyDecoder, method: str) -> torch.nn.Module:
    """`module` with every block projection in the packed 2-bit format of `method`, codes random."""
    packed = TinyDecoder(module.config)
    packed.load_state_dict(module.state_dict())
    gen = torch.Generator().manual_seed(0)
    for name in find_linears(module):
        w = get_module(module, name).weight.detach()
        if method == "rabit":
            layer = rabit.PackedBinaryLinear.from_layer(rabit.make_layer(w, None, None, init="greedy"))
        else:
            lc = lcqat.LCLinear(w, None, seed=0)
            lc.codes = torch.randint(0, 256, lc.codes.shape, generator=gen, dtype=torch.uint8)
            layer = lc.packed()
        set_module(packed, name, layer)
    return packed.eval()


def speed(teacher_module, students) -> dict:
    torch.manual_seed(0)
    big = TinyDecoder(TinyConfig(dim=1024, n_layers=8, n_heads=16, mlp_hidden=2816, max_seq_len=128)).eval()
    out = {"random_1024x8": {"fp32": tokens_per_s(big), "rabit": tokens_per_s(packed_random(big, "rabit")),
                             "lcqat": tokens_per_s(packed_random(big, "lcqat"))},
           "trained_128x4": {"fp32": tokens_per_s(teacher_module),
                             **{k: tokens_per_s(quantize.pack(s)) for k, s in students.items()}}}
    out["backend"] = ops.backend_for("binary_linear")
    return out


def main() -> None:
    load = os.getloadavg()[0]
    torch.manual_seed(0)
    setup = experiments.Setup(seed=0, files=200, max_chars=20_000, model=TinyConfig(),
                              teacher_steps=TEACHER_STEPS, qat_steps=STEPS, block_steps=200)
    start = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # training a tiny model: one thread is faster on a shared CPU
    teacher = experiments.train_teacher(setup)
    coupling = experiments.coupling(teacher, setup)
    lc = experiments.lcqat_vs_scalar(teacher, setup)
    torch.set_num_threads(threads)  # generation speed with every thread, fp32 and packed alike
    results = {
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                    "load_average_at_start": load},
        "setup": {"model": "TinyDecoder dim 128, 4 layers, context 128", "teacher_steps": TEACHER_STEPS,
                  "qat_steps": STEPS, "lcqat_steps": STEPS // 10},
        "claim1": {"full_precision_val_loss": coupling["full_precision"],
                   **{m: _scalars(coupling[m]) for m in ("step0", "rabit", "independent")}},
        "claim2": _scalars(lc),
        "tokens_per_s": speed(teacher.module, {"rabit": coupling["rabit"]["student"],
                                               "lcqat": lc["students"]["lcqat"]}),
        "seconds": time.perf_counter() - start,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "quantizer.json").write_text(json.dumps(results, indent=1))
    print(table(results))


def table(results: dict) -> str:
    """The README table (`make bench` -> run_all.py), rebuilt from the committed results."""
    c1, c2, s = results["claim1"], results["claim2"], results["tokens_per_s"]
    r, i = c1["rabit"], c1["independent"]
    steps = results["setup"]["qat_steps"]
    s0 = c1.get("step0")  # runs before the step-0 diagnostics have no step0 / val_distill
    step0 = f" (step 0: {s0['corr_y1_y2']:.3f} / {s0['corr_r1_y2']:.3f})" if s0 else ""
    rows = ["| measure | baseline (same run) | method | ratio / gain |", "|---|---|---|---|",
            f"| val loss after {steps} QAT steps, 2 bits (fp32 {c1['full_precision_val_loss']:.3f}) | "
            f"independent latents {i['val_loss']:.3f} | RaBiT {r['val_loss']:.3f} | "
            f"{r['val_loss'] - i['val_loss']:+.3f} |",
            f"| Corr(y1, y2) / Corr(R1, y2), mean over layers{step0} | "
            f"{i['corr_y1_y2']:.3f} / {i['corr_r1_y2']:.3f} | "
            f"{r['corr_y1_y2']:.3f} / {r['corr_r1_y2']:.3f} | |",
            *([f"| held-out QAT objective (KL to the teacher + hidden MSE) | "
               f"independent latents {i['val_distill']:.4f} | RaBiT {r['val_distill']:.4f} | "
               f"{r['val_distill'] / i['val_distill']:.2f}x |"] if "val_distill" in r else []),
            f"| val loss: PTQ init vs round-to-nearest 2-bit | RTN {c2['rtn_val_loss']:.3f} | "
            f"LC-QAT PTQ {c2['ptq_val_loss']:.3f} | {c2['ptq_val_loss'] - c2['rtn_val_loss']:+.3f} |",
            f"| val loss: LC-QAT on 1/10 of the tokens vs scalar QAT on all | "
            f"scalar QAT {c2['scalar_qat_val_loss']:.3f} ({c2['scalar_qat_tokens']} tokens) | "
            f"LC-QAT {c2['lcqat_val_loss']:.3f} ({c2['lcqat_tokens']} tokens) | "
            f"{c2['lcqat_val_loss'] - c2['scalar_qat_val_loss']:+.3f} |",
            f"| LC-QAT step 0 vs PTQ: max abs logit difference | | {c2['step0_max_abs_logit_diff']:.1e} | |"]
    for model, label in (("random_1024x8", "dim 1024 x 8 layers"), ("trained_128x4", "dim 128 x 4 layers")):
        t = s[model]
        for method, name in (("rabit", "RaBiT binary2"), ("lcqat", "LC-QAT lattice2")):
            rows.append(f"| generation tokens/s, {label}, batch 1 | fp32 {t['fp32']:.1f} | "
                        f"{name} {t[method]:.1f} | {t[method] / t['fp32']:.2f}x |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
