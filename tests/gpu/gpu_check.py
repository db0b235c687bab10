"""`make gpu-check`: what the platform does on one NVIDIA GPU, in one command of under 5 minutes.

1. the CUDA and Triton kernel parity tests (tests/unit/kernels/test_cuda.py, test_triton.py);
2. the low-bit linear kernels (1-bit residual binary with 2 paths, 2-bit with group 128, the
   lattice path) against bf16 `F.linear` at batch 1, 4 and 16 on 4096x4096 and 4096x11008
   weights, beside the time to stream each variant's weight bytes once at the GPU's measured
   read bandwidth;
3. each service's smallest real job (tests/gpu/jobs.py) through the embedded stack, once with
   workers on cuda:0 and once on cpu in the same run: the device actually used is read from the
   worker's allocator (the job's last progress names the GPU and its peak memory, which only
   tensors on the GPU produce), wall time on each, peak GPU memory.

Writes tests/benchmarks/results/gpu_check.json and gpu_check.md. Without a GPU it says so and
exits 3; `--cpu` runs part 3 on cpu only (what tests/e2e/test_gpu_check.py does, so the jobs
here never go stale on machines without a GPU). Installs nothing.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

import jobs  # noqa: E402


def kernel_parity() -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(ROOT / "tests/unit/kernels/test_cuda.py"), str(ROOT / "tests/unit/kernels/test_triton.py")],
        capture_output=True, text=True, timeout=150, cwd=ROOT)
    summary = (proc.stdout.strip().splitlines() or ["no output"])[-1]
    return {"passed": proc.returncode == 0, "summary": summary,
            "output_tail": (proc.stdout + proc.stderr)[-3000:] if proc.returncode else ""}


def _cuda_time(fn, rounds: int = 30, warmup: int = 3) -> float:
    import torch

    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(rounds):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / rounds


# the op each variant dispatches (the lattice path folds into the 2-bit kernel)
BACKEND_OP = {"bf16": None, "binary2": "binary_linear", "int2": "int2_linear", "lattice": "int2_linear"}


def read_bandwidth_gbps() -> float:
    import torch

    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB: far past any L2
    return src.numel() / _cuda_time(lambda: src.sum(dtype=torch.int64), rounds=10) / 1e9


def _linear_fns(x, copies: dict, alpha, scale, offset, a, b) -> dict:
    """One call per variant, each taking the next weight copy in turn."""
    import torch.nn.functional as F
    from paperworks.kernels import ops

    turn = dict.fromkeys(copies, 0)
    x16 = x.bfloat16()

    def nxt(k):
        turn[k] = (turn[k] + 1) % len(copies[k])
        return copies[k][turn[k]]

    return {
        "bf16": lambda: F.linear(x16, nxt("bf16")),
        "binary2": lambda: ops.binary_linear(x, nxt("binary2"), alpha),
        "int2": lambda: ops.int2_linear(x, nxt("int2"), scale, offset, group_size=128),
        "lattice": lambda: ops.lattice_linear(x, nxt("lattice"), a, b, scale, group_size=128),
    }


def kernel_speed() -> dict:
    """Each variant cycles through weight copies that together exceed the L2 cache, so every
    call streams its weights from HBM, as a decode step does."""
    import torch
    from paperworks.kernels import ops, packing

    gbps = read_bandwidth_gbps()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for n, m in ((4096, 4096), (4096, 11008)):
        g = torch.Generator().manual_seed(0)
        w = torch.randn(n, m, generator=g) / m**0.5
        signs, alpha = packing.binarize_residual(w, 2)
        codes, scale, offset = packing.quantize_int2(w, 128)
        a, b = torch.eye(4) + 0.1 * torch.randn(4, 4, generator=g), torch.randn(4, generator=g)
        weights = {"bf16": w.bfloat16(), "binary2": signs, "int2": codes, "lattice": codes}
        copies = {k: [v.cuda() for _ in range(max(1, -(-3 * l2 // (v.numel() * v.element_size()))))]
                  for k, v in weights.items()}
        alpha, scale, offset, a, b = (t.cuda() for t in (alpha, scale, offset, a, b))
        sizes = {"bf16": w.numel() * 2, "binary2": signs.numel() * signs.element_size() + alpha.numel() * 4,
                 "int2": codes.numel() * codes.element_size() + (scale.numel() + offset.numel()) * 4,
                 "lattice": codes.numel() * codes.element_size() + scale.numel() * 4}
        for batch in (1, 4, 16):
            fns = _linear_fns(torch.randn(batch, m, device="cuda"), copies, alpha, scale, offset, a, b)
            times = {k: _cuda_time(f) for k, f in fns.items()}
            rows.append({"out": n, "in": m, "batch": batch, "variants": {
                k: {"seconds": t, "speedup_vs_bf16": times["bf16"] / t, "weight_bytes": sizes[k],
                    "bytes_limit_s": sizes[k] / (gbps * 1e9), "of_bytes_limit": sizes[k] / (gbps * 1e9) / t,
                    "backend": BACKEND_OP[k] and ops.backend_for(BACKEND_OP[k], "cuda") or "torch"}
                for k, t in times.items()}})
            print(f"kernels {n}x{m} batch {batch}: " + ", ".join(
                f"{k} {v['seconds'] * 1e6:.0f} us ({v['speedup_vs_bf16']:.2f}x bf16)"
                for k, v in rows[-1]["variants"].items()), flush=True)
    return {"read_GBps": gbps, "l2_bytes": l2, "rows": rows}


def service_jobs(devices: list[str], names: list[str]) -> dict:
    """The named services' smallest jobs (jobs.JOBS) on a stack whose workers run on each device."""
    from paperworks.shared.sdk.client import Client
    from support import TOKENS, start_stack

    out = {}
    for device in devices:
        with tempfile.TemporaryDirectory(prefix=f"gpu-check-{device.replace(':', '')}-") as tmp:
            stack = start_stack(Path(tmp), services=tuple(names), PAPERWORKS_DEVICE=device)
            try:
                with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as client:
                    for service in names:
                        kind, prepare = jobs.JOBS[service]
                        params = prepare(client, Path(tmp) / f"inputs-{service}")
                        start = time.perf_counter()
                        job = client.wait(client.submit(service, kind, **params).id, timeout=240)
                        wall = time.perf_counter() - start
                        state = jobs.state(job)
                        row = out.setdefault(service, {"kind": kind})
                        row[device] = {"state": state, "wall_s": wall,
                                       "device_seen": job.progress.message if job.progress.stage == "device"
                                       else "cpu (no CUDA memory allocated)",
                                       "error": job.error.message if state != "SUCCEEDED" else ""}
                        print(f"{service} {kind} on {device}: {state} in {wall:.1f}s "
                              f"{row[device]['device_seen']}", flush=True)
            finally:
                stack.down()
    return out


def markdown(report: dict) -> str:
    lines = [f"# GPU check: {report['gpu']}", "", f"{report['when']}, torch {report['torch']}", ""]
    parity = report.get("kernel_parity")
    if parity:
        verdict = "passed" if parity["passed"] else "FAILED"
        lines += [f"Kernel parity tests: {verdict} ({parity['summary']})", ""]
    speed = report.get("kernel_speed")
    if speed:
        lines += [f"Low-bit linear vs bf16 `F.linear` (measured read bandwidth {speed['read_GBps']:.0f} "
                  "GB/s; \"of limit\": the time to stream the weight bytes once over the measured time)", "",
                  "| weight | batch | bf16 | 1-bit x2 | 2-bit g128 | lattice |", "|---|---|---|---|---|---|"]
        for r in speed["rows"]:
            v = r["variants"]
            cells = [f"{v['bf16']['seconds'] * 1e6:.0f} us"] + [
                f"{v[k]['speedup_vs_bf16']:.2f}x ({v[k]['of_bytes_limit']:.0%} of limit, {v[k]['backend']})"
                for k in ("binary2", "int2", "lattice")]
            lines.append(f"| {r['out']}x{r['in']} | {r['batch']} | " + " | ".join(cells) + " |")
        lines.append("")
    svc = report.get("services")
    if svc:
        devices = report["devices"]
        walls = " | ".join(f"{d}: wall" for d in devices)
        lines += [f"| service | job | {walls} | device seen on cuda |",
                  "|---|---|" + "---|" * len(devices) + "---|"]
        for name, row in svc.items():
            walls = [f"{row[d]['wall_s']:.1f}s {row[d]['state']}" for d in devices]
            seen = row.get(devices[0], {}).get("device_seen", "")
            lines.append(f"| {name} | {row['kind']} | " + " | ".join(walls) + f" | {seen} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="run the service jobs on cpu only (no GPU)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where gpu_check.json/.md go")
    parser.add_argument("--services", default="", help="only these services' jobs (comma-separated; "
                        "default: every one in tests/gpu/jobs.py)")
    args = parser.parse_args()
    only = [name for name in args.services.split(",") if name]
    unknown = sorted(set(only) - set(jobs.JOBS))
    if unknown:
        parser.error(f"--services: no gpu-check job for {', '.join(unknown)} (known: {', '.join(jobs.JOBS)})")
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("gpu-check: no NVIDIA GPU is visible to torch (torch.cuda.is_available() is False); "
              "nothing was measured. Run it on a machine with a GPU, or --cpu to try the jobs on cpu.")
        return 3
    report = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "torch": torch.__version__,
              "host": platform.node(), "gpu": "none (--cpu)" if args.cpu else torch.cuda.get_device_name(0)}
    if not args.cpu:
        report["kernel_parity"] = kernel_parity()
        report["kernel_speed"] = kernel_speed()
    report["devices"] = ["cpu"] if args.cpu else ["cuda:0", "cpu"]
    report["services"] = service_jobs(report["devices"], only or list(jobs.JOBS))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "gpu_check.md").write_text(markdown(report))
    print(markdown(report))
    failed = [s for s, row in report["services"].items() if any(row[d]["state"] != "SUCCEEDED"
                                                                for d in report["devices"])]
    on_gpu = args.cpu or all(row["cuda:0"]["device_seen"].startswith("ran on cuda")
                             for row in report["services"].values())
    parity = report.get("kernel_parity", {"passed": True})["passed"]
    return 0 if not failed and on_gpu and parity else 1


if __name__ == "__main__":
    sys.exit(main())
