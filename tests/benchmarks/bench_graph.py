"""GaRA serving cost (issue 34): the adapter is generated once per graph (one GNN + generator
forward), after which a query costs what a static LoRA query costs. Per-query latency of GaRA with a
cached graph conditioning, and of the exported adapter merged into the base weights (as a PEFT
server would serve it), as ratios against static LoRA measured in the same process; the generation
cost as a ratio against one query. With --claims it also runs the reproduction protocol
(tests/reproduction/graph/experiments.py) on seeds 0 and 1 (about 10 minutes on 2 idle cores).

    PYTHONSAFEPATH=1 .venv/bin/python tests/benchmarks/bench_graph.py [--claims]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from paperworks.services.graph import runs, world
from paperworks.services.graph.gara import batch_graphs
from paperworks.services.graph.gara.train import option_probabilities

OUT = Path(__file__).parent / "results" / "graph.json"


def _median_time(fn, repeats: int = 50) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


@torch.no_grad()
def latency() -> dict:
    torch.manual_seed(0)
    from transformers import LlamaForCausalLM

    lm = LlamaForCausalLM(world.tiny_lm_config()).eval()
    tok = world.WordTokenizer()
    g = world.bundled("les_miserables")
    gb = batch_graphs([(world.node_features(lm, tok, g.texts), g.edge_index())])
    prompts = [tok.encode(p) for p, _ in g.queries(np.random.default_rng(0), 16)]
    index = torch.zeros(len(prompts), dtype=torch.long)
    opts = runs.options(tok)
    static = runs.build(lm, "static_lora", 4, 64, ("q_proj", "v_proj"), 0)
    gara = runs.build(lm, "gara", 4, 64, ("q_proj", "v_proj"), 0)
    for model in (static, gara):
        for m in model.adapted.values():
            m.left.normal_(std=0.1)
    cond = gara.condition(gb)
    merged = runs.build(lm, "frozen", 4, 64, (), 0)
    for name, m in gara.adapted.items():  # W0 + (L + Ĝ) Rᵀ folded into the weight, as a merged PEFT adapter
        target = merged.lm.get_submodule(name)
        target.weight.copy_(m.base.weight + (m.left + cond[name][0]) @ m.right.T)
    t_static = _median_time(lambda: option_probabilities(static, None, prompts, opts, index, 0, "cpu"))
    t_gara = _median_time(lambda: option_probabilities(gara, cond, prompts, opts, index, 0, "cpu"))
    t_merged = _median_time(lambda: option_probabilities(merged, None, prompts, opts, index, 0, "cpu"))
    t_generate = _median_time(lambda: gara.condition(gb))
    return {
        "graph": "les_miserables (77 nodes)",
        "queries_per_batch": len(prompts),
        "static_lora_ms_per_batch": 1e3 * t_static,
        "gara_cached_over_static": t_gara / t_static,
        "gara_merged_over_static": t_merged / t_static,
        "generation_over_one_query_batch": t_generate / t_static,
    }


def main() -> None:
    result = {"latency": latency(), "device": "cpu", "threads": torch.get_num_threads()}
    if "--claims" in sys.argv:
        sys.path.insert(0, str(Path(__file__).parents[1] / "reproduction" / "graph"))
        import experiments

        result["claims"] = {str(seed): experiments.protocol(seed) for seed in (0, 1)}
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["latency"], indent=1))


if __name__ == "__main__":
    main()
