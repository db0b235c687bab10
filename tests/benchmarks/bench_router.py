"""Router benchmark: the reproductions at larger scale, and Route latency under load.

- MILD vs two-stage CE on synthetic mixtures (10:1, 30:1, 100:1; 5 seeds; 3x the test's data)
  and on the MiniLM text-routing analogue (30:1, 100:1; 5 seeds): expert-balanced deferral loss
  and minority-expert recall, as MILD / CE ratios measured in the same run.
- SDR (3 seeds, 2x the test's traces): normalised cost-quality areas of SDR and its baselines,
  accept-decision AUROCs; the curves of seed 0 are plotted to tests/benchmarks/results/router_curves.png.
- Route latency p50/p99 with 1 and 8 concurrent clients, for a rejector policy (features in)
  and an SDR policy (text in; includes the local LM's answer), next to a bare grpc.aio unary
  call on an in-process server measured in the same run; plus the server-reported decision time
  (the decision given features, which the issue bounds at 5 ms p50).

Writes tests/benchmarks/results/router.json and prints a markdown table.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "router.json"
PLOT = ROOT / "results" / "router_curves.png"
sys.path.insert(0, str(ROOT.parent))

from paperworks.router.v1 import router_pb2, router_pb2_grpc  # noqa: E402
from paperworks.services.router.data import PromptPool, SyntheticMixture, TextFamilies  # noqa: E402
from paperworks.services.router.embed import minilm  # noqa: E402
from paperworks.services.router.figures import decider_png  # noqa: E402
from paperworks.services.router.mild.rejector import RejectorConfig  # noqa: E402
from paperworks.services.router.tasks import train_decider  # noqa: E402
from paperworks.shared.rpc.tensors import from_numpy  # noqa: E402
from paperworks.shared.sdk.client import Client  # noqa: E402
from reproduction.router.experiments import compare_ce_and_mild, sdr_params  # noqa: E402
from support import TOKENS, start_stack  # noqa: E402

SEEDS = tuple(range(int(os.environ.get("BENCH_SEEDS", "5"))))
CALLS = int(os.environ.get("BENCH_CALLS", "400"))


def compare_losses(train, validation, test, seed: int) -> dict:
    compared = compare_ce_and_mild(train, validation, test, RejectorConfig(seed=seed))
    return {name: {"balanced_deferral_loss": r["balanced_deferral_loss"], "deferral_loss": r["deferral_loss"],
                   "minority_recall": r["recall"][-1], "system_accuracy": r["system_accuracy"],
                   "margin_scale": r["scale"]}
            for name, r in compared.items()}


def summarize_runs(runs: list[dict]) -> dict:
    def mean(loss: str, key: str) -> float:
        return float(np.mean([r[loss][key] for r in runs]))

    return {
        "seeds": len(runs),
        "ce": {k: mean("ce", k) for k in ("balanced_deferral_loss", "deferral_loss", "minority_recall")},
        "mild": {k: mean("mild", k) for k in ("balanced_deferral_loss", "deferral_loss", "minority_recall")},
        "balanced_loss_ratio": mean("mild", "balanced_deferral_loss") / mean("ce", "balanced_deferral_loss"),
        "minority_recall_gain": mean("mild", "minority_recall") - mean("ce", "minority_recall"),
        "mild_better_seeds": sum(
            r["mild"]["balanced_deferral_loss"] < r["ce"]["balanced_deferral_loss"] for r in runs
        ),
    }


def mild_synthetic() -> dict:
    out = {}
    for imbalance in (10, 30, 100):
        runs = []
        for seed in SEEDS:
            m = SyntheticMixture(imbalance=imbalance, seed=seed)
            runs.append(compare_losses(m.sample(4500, 0), m.sample(3000, 1), m.sample(9000, 2), seed))
        out[f"{imbalance}:1"] = summarize_runs(runs)
    return out


def mild_text() -> dict:
    pool = PromptPool.generate(500, seed=0)
    pool = pool.with_features(minilm().embed(pool.texts))
    out = {}
    for imbalance in (30, 100):
        runs = []
        for seed in SEEDS:
            families = TextFamilies(pool, imbalance=imbalance, seed=seed)
            runs.append(
                compare_losses(
                    families.sample(4000, 0), families.sample(3000, 1), families.sample(6000, 2), seed
                )
            )
        out[f"{imbalance}:1"] = summarize_runs(runs)
    return out


def sdr() -> dict:
    runs = []
    for seed in SEEDS[:3]:
        # the reproduction's suite (tests/reproduction/router), 2x its traces
        trained = train_decider(sdr_params(seed, 3000, 1000, 3000, local_steps=500), lambda *_: None)
        runs.append(trained.summary)
        if seed == 0:
            PLOT.write_bytes(decider_png(trained.report))
    names = list(runs[0]["areas"])
    areas = {n: float(np.mean([r["areas"][n] for r in runs])) for n in names}
    aurocs = {n: float(np.mean([r["accept_auroc"][n] for r in runs])) for n in runs[0]["accept_auroc"]}
    return {
        "seeds": len(runs),
        "areas": areas,
        "area_ratio_vs": {n: areas["sdr"] / areas[n] for n in names if n != "sdr"},
        "sdr_best_in_every_seed": all(r["areas"]["sdr"] == max(r["areas"].values()) for r in runs),
        "accept_auroc": aurocs,
        "runs": runs,
    }


def latency(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "calls": len(ordered),
        "p50_ms": 1000 * ordered[len(ordered) // 2],
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
    }


async def drive(call, clients: int, calls: int) -> tuple[dict, list]:
    latencies, replies = [], []

    async def one(n):
        for _ in range(n):
            t = time.perf_counter()
            replies.append(await call())
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(one(calls // clients) for _ in range(clients)))
    summary = latency(latencies)
    summary["per_s"] = len(latencies) / (time.perf_counter() - start)
    return summary, replies


async def bare_grpc(clients: int) -> dict:
    async def noop(request, context):
        return request

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "bench.Bare", {"Echo": grpc.unary_unary_rpc_method_handler(noop)}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        echo = ch.unary_unary("/bench.Bare/Echo")
        await echo(b"x")
        result, _ = await drive(lambda: echo(b"x"), clients, CALLS)
    await server.stop(None)
    return result


async def route_load(addr: str, request, clients: int) -> dict:
    metadata = (("authorization", f"Bearer {TOKENS['alice']}"),)
    async with grpc.aio.insecure_channel(addr) as ch:
        stub = router_pb2_grpc.RouterServiceStub(ch)
        await stub.Route(request, metadata=metadata)  # loads and caches the policy
        result, replies = await drive(lambda: stub.Route(request, metadata=metadata), clients, CALLS)
    result["decision_ms"] = {
        "p50": statistics.median(r.decision_ms for r in replies),
        "p99": sorted(r.decision_ms for r in replies)[int(0.99 * len(replies))],
    }
    return result


def route_latency() -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        stack = start_stack(Path(tmp), services=("router",), PAPERWORKS_LOG_LEVEL="WARNING")
        try:
            with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as client:
                rejector = client.wait(
                    client.submit(
                        "router",
                        "train_rejector",
                        synthetic={"imbalance": 30},
                        loss="LOSS_MILD",
                        n_train=1000,
                        n_validation=500,
                        n_test=500,
                    ).id,
                    timeout=600,
                )
                decider = client.wait(
                    client.submit(
                        "router",
                        "train_decider",
                        local={"train_tiny": {"steps": 200}},
                        remotes=[
                            {"name": "small", "price": 1.0, "accuracy": [0.9, 0.5, 0.5]},
                            {"name": "large", "price": 10.0, "accuracy": [0.97, 0.97, 0.97]},
                        ],
                        n_train=300,
                        n_validation=150,
                        n_test=150,
                        query_router_baseline=False,
                    ).id,
                    timeout=600,
                )
            requests = {
                "rejector_features": router_pb2.RouteRequest(
                    policy_job_id=rejector.id, features=from_numpy(np.zeros(8, np.float32))
                ),
                "sdr_text": router_pb2.RouteRequest(policy_job_id=decider.id, text="7+5=", budget=1.0),
            }
            addr = stack.endpoints["router"]
            for clients in (1, 8):
                bare = asyncio.run(bare_grpc(clients))
                row = {"bare_grpc": bare}
                for name, request in requests.items():
                    row[name] = asyncio.run(route_load(addr, request, clients))
                    row[name]["p50_ratio_vs_bare"] = row[name]["p50_ms"] / bare["p50_ms"]
                out[f"{clients}_clients"] = row
        finally:
            stack.down()
    return out


def main() -> dict:
    torch.set_num_threads(1)
    started = time.perf_counter()
    results = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "mild_synthetic": mild_synthetic(),
        "mild_text": mild_text(),
        "sdr": sdr(),
        "route_latency": route_latency(),
    }
    results["wall_s"] = time.perf_counter() - started
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1))
    return results


def table(results: dict) -> str:
    rows = ["| measure | baseline (same run) | method | ratio / gain |", "|---|---|---|---|"]
    for setting in ("mild_synthetic", "mild_text"):
        for imbalance, r in results[setting].items():
            ce, mild = r["ce"]["balanced_deferral_loss"], r["mild"]["balanced_deferral_loss"]
            rows.append(
                f"| {setting} {imbalance}: balanced deferral loss | CE {ce:.3f} "
                f"| MILD {mild:.3f} | {r['balanced_loss_ratio']:.2f}x "
                f"({r['mild_better_seeds']}/{r['seeds']} seeds better) |"
            )
            rows.append(
                f"| {setting} {imbalance}: minority recall | CE {r['ce']['minority_recall']:.2f} | "
                f"MILD {r['mild']['minority_recall']:.2f} | +{r['minority_recall_gain']:.2f} |"
            )
    s = results["sdr"]
    for name, ratio in s["area_ratio_vs"].items():
        rows.append(
            f"| SDR normalised area vs {name} | {s['areas'][name]:.3f} | {s['areas']['sdr']:.3f} | "
            f"{ratio:.3f}x |"
        )
    a = s["accept_auroc"]
    rows.append(
        f"| accept AUROC: local features vs MiniLM query | {a['query_embedding']:.3f} | {a['sdr']:.3f} "
        f"| +{a['sdr'] - a['query_embedding']:.3f} |"
    )
    rows.append(
        f"| accept AUROC: hidden states only vs MiniLM query | {a['query_embedding']:.3f} | "
        f"{a['hidden_states_only']:.3f} | {a['hidden_states_only'] - a['query_embedding']:+.3f} |"
    )
    for clients in (1, 8):
        r = results["route_latency"][f"{clients}_clients"]
        bare = r["bare_grpc"]
        for name in ("rejector_features", "sdr_text"):
            ours = r[name]
            rows.append(
                f"| Route {name}, {clients} client(s): p50 / p99 ms | bare gRPC {bare['p50_ms']:.2f} / "
                f"{bare['p99_ms']:.2f} | {ours['p50_ms']:.2f} / {ours['p99_ms']:.2f} "
                f"(decision {ours['decision_ms']['p50']:.3f} ms p50) | {ours['p50_ratio_vs_bare']:.1f}x |"
            )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(main()))
