"""Kernel benchmarks, each against its baseline measured in the same run.

- low-bit linear (RaBiT residual binary with 2 paths, 2-bit with group 128, LC-QAT lattice
  VQ through the folded 2-bit path, VQ with a general codebook) at batch 1, 4 and 16 on
  4096x4096 and 4096x11008 weights (out x in), against torch's fp32 and bf16 ``F.linear``;
  effective weight bandwidth beside the machine's measured read and copy bandwidth. Each
  variant cycles through enough weight copies (> 3x the L3) that every call streams its
  weights from DRAM, and variants are timed round-robin so background load hits all alike.
- batched Sinkhorn (CPU backend, float32 and float64) against POT's ``sinkhorn_log`` on
  the same problems and iteration count, and the torch reference.
- grid contraction of 256^3 volumes in voxels per second (the torch reference at 64^3).
- the Beta CDF/PDF op (DPSL's router loss) on a DPSL-sized batch, float64 and float32, forward
  and forward + backward, against scipy's ``betainc`` and PDF on the host (Batch-Shaping's
  way), with the largest CDF difference to scipy.

Writes tests/benchmarks/results/kernels.json; prints a markdown table for the README.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from paperworks.kernels import ops, packing, reference

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "kernels.json"
SHAPES = [(4096, 4096), (4096, 11008)]
BATCHES = [1, 4, 16]
GROUP = 128
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "25"))
MiB = 2**20


def _l3_bytes() -> int | None:
    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index3/size").read_text().strip()
    except OSError:
        return None
    return int(text[:-1]) * (1024 if text.endswith("K") else MiB)


# Three L3s of weight copies per variant, so every call streams its weights from DRAM (the
# machine's CPU changes between sessions: 32 MiB of L3 on one, 480 MiB on another).
FLUSH_BYTES = 3 * (_l3_bytes() or 32 * MiB)


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "l3_bytes": _l3_bytes(),
        "python": platform.python_version(),
        "backend": ops.backend_for("int2_linear", "cpu"),
        # the machine may be shared: other processes' load skews every figure alike
        "load_average_at_start": os.getloadavg(),
    }


def timed_round_robin(fns: dict, rounds: int = ROUNDS, warmup: int = 2) -> dict:
    """Median and best seconds per call of each function, timed in interleaved rounds."""
    samples = {name: [] for name in fns}
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: {"median_s": statistics.median(s), "best_s": min(s)}
            for name, s in samples.items()}


def bandwidth() -> dict:
    src = torch.randn(256 * MiB // 4)
    dst = torch.empty_like(src)
    times = timed_round_robin({"read": src.sum, "copy": lambda: dst.copy_(src)}, rounds=10)
    nbytes = src.numel() * 4
    return {"read_GBps": nbytes / times["read"]["median_s"] / 1e9,
            "copy_GBps": 2 * nbytes / times["copy"]["median_s"] / 1e9}


def _rotating(make, nbytes: int):
    """A callable returning the next of enough copies to exceed the flush size."""
    copies = [make() for _ in range(max(1, -(-FLUSH_BYTES // nbytes)))]
    state = {"i": 0}

    def next_copy():
        state["i"] = (state["i"] + 1) % len(copies)
        return copies[state["i"]]

    return next_copy


def linear_variants(n: int, m: int, x: torch.Tensor) -> tuple[dict, dict]:
    """Callables and weight bytes of every linear variant for one shape."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(n, m, generator=g) / m**0.5
    signs, alpha = packing.binarize_residual(w, 2)
    codes, scale, offset = packing.quantize_int2(w, GROUP)
    a, b = torch.eye(4) + 0.1 * torch.randn(4, 4, generator=g), torch.randn(4, generator=g)
    codebook = torch.randn(256, 4, generator=g)
    sizes = {
        "fp32": w.numel() * 4,
        "bf16": w.numel() * 2,
        "binary2": signs.numel() + alpha.numel() * 4,
        "int2": codes.numel() + (scale.numel() + offset.numel()) * 4,
        "lattice": codes.numel() + scale.numel() * 4,
        "vq": codes.numel(),
    }
    w32 = _rotating(lambda: w.clone(), sizes["fp32"])
    w16 = _rotating(lambda: w.bfloat16(), sizes["bf16"])
    sg = _rotating(lambda: signs.clone(), sizes["binary2"])
    cd = _rotating(lambda: codes.clone(), sizes["int2"])
    x16 = x.bfloat16()
    fns = {
        "fp32": lambda: F.linear(x, w32()),
        "bf16": lambda: F.linear(x16, w16()),
        "binary2": lambda: ops.binary_linear(x, sg(), alpha),
        "int2": lambda: ops.int2_linear(x, cd(), scale, offset, group_size=GROUP),
        "lattice": lambda: ops.lattice_linear(x, cd(), a, b, scale, group_size=GROUP),
        "vq": lambda: ops.vq_linear(x, cd(), codebook),
    }
    return fns, sizes


def bench_linear(read_gbps: float, batches: list[int] = BATCHES) -> list[dict]:
    rows = []
    threads = torch.get_num_threads()
    for n, m in SHAPES:
        for batch in batches:
            x = torch.randn(batch, m, generator=torch.Generator().manual_seed(1))
            fns, sizes = linear_variants(n, m, x)
            times = timed_round_robin(fns)
            fp32 = times["fp32"]["median_s"]
            row = {"out": n, "in": m, "batch": batch, "threads": threads, "variants": {}}
            for name, t in times.items():
                row["variants"][name] = {
                    **t,
                    "weight_bytes": sizes[name],
                    "weight_GBps": sizes[name] / t["median_s"] / 1e9,
                    "speedup_vs_fp32": fp32 / t["median_s"],
                    "bytes_ratio_vs_fp32": sizes["fp32"] / sizes[name],
                    # time to stream the weights once at the measured read bandwidth
                    "bytes_limit_s": sizes[name] / (read_gbps * 1e9),
                }
            rows.append(row)
            print(f"linear {n}x{m} batch {batch}, {threads} threads: " + ", ".join(
                f"{k} {v['median_s'] * 1e3:.2f} ms ({v['speedup_vs_fp32']:.1f}x)"
                for k, v in row["variants"].items()), flush=True)
    return rows


def bench_sinkhorn(batch: int = 16, size: int = 256, eps: float = 0.05,
                   iters: int = 100) -> dict:
    import ot

    rng = np.random.default_rng(0)
    cost = torch.tensor(rng.random((batch, size, size)))
    a = torch.full((batch, size), 1.0 / size, dtype=torch.float64)
    cn, an = cost.numpy(), a[0].numpy()

    def pot():
        with warnings.catch_warnings():  # "did not converge": a fixed iteration count is meant
            warnings.simplefilter("ignore")
            return [ot.bregman.sinkhorn_log(an, an, cn[k], eps, numItermax=iters, stopThr=0.0)
                    for k in range(batch)]

    def ours(c, aa):
        return lambda: ops.sinkhorn(c, aa, aa, epsilon=eps, max_iter=iters, tol=0.0,
                                    check_every=iters)

    c32, a32 = cost.float(), a.float()
    fns = {"pot_f64": pot, "cpu_f32": ours(c32, a32), "cpu_f64": ours(cost, a),
           "reference_f32": lambda: reference.sinkhorn(c32, a32, a32, eps, iters, 0.0, iters)}
    times = timed_round_robin(fns, rounds=5, warmup=1)
    plan_pot = np.stack(pot())
    plan_ours = ops.sinkhorn(cost, a, a, epsilon=eps, max_iter=iters, tol=0.0).plan.numpy()
    out = {"batch": batch, "n": size, "m": size, "epsilon": eps, "iterations": iters,
           "max_abs_plan_diff_vs_pot_f64": float(np.abs(plan_pot - plan_ours).max()),
           "variants": times}
    base = times["pot_f64"]["median_s"]
    for t in times.values():
        t["speedup_vs_pot"] = base / t["median_s"]
    print("sinkhorn: " + ", ".join(f"{k} {v['median_s'] * 1e3:.1f} ms"
                                   for k, v in times.items()), flush=True)
    return out


def _cells_volume(size: int, seed: int) -> torch.Tensor:
    """Piecewise-constant 16^3 cells plus noise: a boundary-map-like segmentation input."""
    g = torch.Generator().manual_seed(seed)
    cells = torch.rand(size // 16, size // 16, size // 16, generator=g)
    for axis in range(3):
        cells = cells.repeat_interleave(16, dim=axis)
    return (cells + 0.01 * torch.rand(size, size, size, generator=g)).contiguous()


def _gradient_weights(image: torch.Tensor) -> torch.Tensor:
    weights = torch.zeros(3, *image.shape)
    for axis in range(3):
        diff = image.diff(dim=axis).abs()
        weights[axis].narrow(axis, 0, image.shape[axis] - 1).copy_(diff)
    return weights


def grid_cases(size: int) -> dict:
    g = torch.Generator().manual_seed(2)
    cells = _cells_volume(size, 3)
    noise = torch.rand(size, size, size, generator=g)
    random_w = torch.rand(3, size, size, size, generator=g)
    return {
        "16^3 cells + noise, abs-gradient weights, thr 0.05": (cells, _gradient_weights(cells), 0.05),
        "uniform random weights, thr 0.5 (percolating)": (noise, random_w, 0.5),
        "uniform random weights, thr 0.2 (tiny regions)": (noise, random_w, 0.2),
    }


def bench_grid(size: int = 256, reference_size: int = 64) -> list[dict]:
    rows = []
    for label, (image, weights, thr) in grid_cases(size).items():
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            out = ops.grid_contract(image, weights, thr)
            runs.append(time.perf_counter() - start)
        t = statistics.median(runs)
        rows.append({"case": label, "shape": [size] * 3, "threshold": thr, "median_s": t,
                     "best_s": min(runs), "voxels_per_s": image.numel() / t,
                     "regions": int(out.region_count.numel()), "edges": int(out.edges.shape[0])})
        print(f"grid {size}^3 {label}: {t:.2f} s, {image.numel() / t / 1e6:.1f} Mvoxel/s, "
              f"{rows[-1]['regions']} regions", flush=True)
    image, weights, thr = grid_cases(reference_size)["uniform random weights, thr 0.5 (percolating)"]
    start = time.perf_counter()
    reference.grid_contract(image, weights, thr)
    t_ref = time.perf_counter() - start
    start = time.perf_counter()
    ops.grid_contract(image, weights, thr)
    t_cpu = time.perf_counter() - start
    rows.append({"case": f"torch reference vs CPU backend at {reference_size}^3, thr 0.5",
                 "shape": [reference_size] * 3, "threshold": thr, "reference_s": t_ref,
                 "cpu_s": t_cpu, "speedup": t_ref / t_cpu})
    return rows


def bench_beta(tokens: int = 8192, experts: int = 8, rounds: int = 25) -> dict:
    from scipy import special

    alpha = np.full(experts, 0.25)  # DPSL's sparse symmetric prior: Beta(alpha, alpha_0 - alpha)
    a, b = alpha, alpha.sum() - alpha
    table = ops.beta_table(a, b)
    probs = torch.softmax(4 * torch.randn(tokens, experts, dtype=torch.float64), -1)
    p32 = probs.float()

    def scipy_host(x=probs):
        xn = x.numpy()
        with np.errstate(divide="ignore"):
            pdf = np.exp((a - 1) * np.log(xn) + (b - 1) * np.log1p(-xn) - special.betaln(a, b))
        return torch.from_numpy(special.betainc(a, b, xn)), torch.from_numpy(pdf)

    def backward(x):
        def run():
            x.grad = None
            ops.beta_cdf_pdf(x, table).cdf.sum().backward()
        return run

    fns = {"scipy_f64": scipy_host,
           "op_f64": lambda: ops.beta_cdf_pdf(probs, table),
           "op_f32": lambda: ops.beta_cdf_pdf(p32, table),
           "op_f64_fwd_bwd": backward(probs.clone().requires_grad_()),
           "op_f32_fwd_bwd": backward(p32.clone().requires_grad_())}
    times = timed_round_robin(fns, rounds=rounds, warmup=2)
    base = times["scipy_f64"]["median_s"]
    for t in times.values():
        t["speedup_vs_scipy"] = base / t["median_s"]
    diff = (ops.beta_cdf_pdf(probs, table).cdf - scipy_host()[0]).abs().max()
    out = {"tokens": tokens, "experts": experts, "alpha": float(alpha[0]),
           "backend": ops.backend_for("beta_cdf_pdf"), "max_abs_cdf_diff_vs_scipy": float(diff),
           "variants": times}
    print("beta: " + ", ".join(f"{k} {v['median_s'] * 1e3:.2f} ms" for k, v in times.items()),
          flush=True)
    return out


def main() -> dict:
    torch.manual_seed(0)
    started = time.perf_counter()
    results = {"machine": machine(), "bandwidth": bandwidth()}
    print(f"memory: read {results['bandwidth']['read_GBps']:.1f} GB/s, copy (read+write) "
          f"{results['bandwidth']['copy_GBps']:.1f} GB/s", flush=True)
    results["linear"] = bench_linear(results["bandwidth"]["read_GBps"])
    # on a shared 2-vCPU machine every parallel region can wait a scheduler tick for a
    # descheduled thread; one thread has no barriers, so its ratios survive background load
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results["linear_one_thread"] = bench_linear(results["bandwidth"]["read_GBps"], [1, 16])
    finally:
        torch.set_num_threads(threads)
    results["sinkhorn"] = bench_sinkhorn()
    results["grid"] = bench_grid()
    results["beta"] = bench_beta()
    results["seconds"] = time.perf_counter() - started
    results["machine"]["load_average_at_end"] = os.getloadavg()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    return results


LINEAR_COLUMNS = [("fp32", "fp32 `F.linear`"), ("bf16", "bf16 `F.linear`"),
                  ("binary2", "binary, 2 paths"), ("int2", "2-bit g128"),
                  ("lattice", "lattice VQ (folded)"), ("vq", "VQ codebook")]


def table(results: dict) -> str:
    bw = results["bandwidth"]
    rows = [
        f"Machine: {results['machine']['cpu']}, {results['machine']['torch_threads']} threads; "
        f"measured memory bandwidth: read {bw['read_GBps']:.1f} GB/s, copy (read+write) "
        f"{bw['copy_GBps']:.1f} GB/s. Cells: median time · speedup vs fp32 · effective "
        "weight GB/s.",
        "",
        "| weight (out x in) | batch | " + " | ".join(c for _, c in LINEAR_COLUMNS) + " |",
        "|---|---|" + "---|" * len(LINEAR_COLUMNS),
    ]
    for r in results["linear"] + results.get("linear_one_thread", []):
        cells = []
        for key, _ in LINEAR_COLUMNS:
            v = r["variants"][key]
            cells.append(f"{v['median_s'] * 1e3:.2f} ms · {v['speedup_vs_fp32']:.1f}x · "
                         f"{v['weight_GBps']:.0f} GB/s")
        batch = f"{r['batch']}" + (" (1 thread)" if r.get("threads") == 1 else "")
        rows.append(f"| {r['out']}x{r['in']} | {batch} | " + " | ".join(cells) + " |")
    rows += [
        "",
        "Batch 1 against the bytes-moved limit (time to stream the weights once at the measured "
        "read bandwidth):",
        "",
        "| weight | kernel | weight bytes vs fp32 | speedup vs fp32 | time / bytes-moved limit |",
        "|---|---|---|---|---|",
    ]
    for r in results["linear"]:
        if r["batch"] != 1:
            continue
        for key, label in LINEAR_COLUMNS:
            v = r["variants"][key]
            rows.append(f"| {r['out']}x{r['in']} | {label} | 1/{v['bytes_ratio_vs_fp32']:.1f} | "
                        f"{v['speedup_vs_fp32']:.1f}x | "
                        f"{v['median_s'] / v['bytes_limit_s']:.1f}x |")
    s = results["sinkhorn"]
    v = s["variants"]
    rows += [
        "",
        f"Sinkhorn, batch {s['batch']} of {s['n']}x{s['m']}, eps {s['epsilon']}, "
        f"{s['iterations']} iterations (max |plan difference| vs POT "
        f"{s['max_abs_plan_diff_vs_pot_f64']:.1e}):",
        "",
        "| POT `sinkhorn_log` (numpy f64) | CPU backend f32 | CPU backend f64 | torch reference f32 |",
        "|---|---|---|---|",
        "| " + " | ".join(f"{v[k]['median_s'] * 1e3:.0f} ms ({v[k]['speedup_vs_pot']:.1f}x)"
                         for k in ("pot_f64", "cpu_f32", "cpu_f64", "reference_f32")) + " |",
        "",
        "| grid contraction | regions | region edges | time | voxels/s |",
        "|---|---|---|---|---|",
    ]
    for g in results["grid"]:
        if "voxels_per_s" in g:
            rows.append(f"| {'x'.join(map(str, g['shape']))}, {g['case']} | {g['regions']} | "
                        f"{g['edges']} | {g['median_s']:.2f} s | "
                        f"{g['voxels_per_s'] / 1e6:.1f} M |")
        else:
            rows.append(f"| {g['case']} | | | {g['reference_s']:.2f} s vs {g['cpu_s']:.3f} s | "
                        f"{g['speedup']:.0f}x faster |")
    if "beta" in results:
        bt = results["beta"]
        v = bt["variants"]
        rows += [
            "",
            f"Beta CDF/PDF, {bt['tokens']} tokens x {bt['experts']} experts, alpha {bt['alpha']} "
            f"({bt['backend']} backend; max |CDF difference| vs scipy "
            f"{bt['max_abs_cdf_diff_vs_scipy']:.1e}):",
            "",
            "| scipy on the host (f64) | op f64 | op f32 | op f64 forward + backward | "
            "op f32 forward + backward |",
            "|---|---|---|---|---|",
            "| " + " | ".join(f"{v[k]['median_s'] * 1e3:.2f} ms ({v[k]['speedup_vs_scipy']:.1f}x)"
                             for k in ("scipy_f64", "op_f64", "op_f32", "op_f64_fwd_bwd",
                                       "op_f32_fwd_bwd")) + " |",
        ]
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(main()))
