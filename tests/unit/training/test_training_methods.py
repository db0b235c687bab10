"""Cornstarch method code without the stack: the multimodal mask, the CP splits (permutation,
balance, attention over reordered tokens equal to unsplit), freezing that really skips work, the
1F1B schedule and its simulator on fixed cost tables, and the partitioners."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.services.training.cornstarch import context, partition, schedule
from paperworks.services.training.cornstarch.costs import _saved_bytes, backward_cost
from paperworks.services.training.cornstarch.model import (
    MLLM,
    EncoderConfig,
    Freeze,
    MLLMConfig,
    synthetic_batch,
)

TINY = MLLMConfig(
    encoders=(EncoderConfig(tokens=8, input_dim=12, d_model=16, layers=2),),
    d_model=16,
    llm_layers=2,
    heads=2,
    vocab=16,
    text_tokens=8,
)


def test_mask_semantics():
    modality = np.array([0, 0, 1, 1, 1, 0, 2, 2, 0])
    mask = context.attention_mask(modality)
    assert mask[1, 0] and not mask[0, 1]  # text causal
    assert mask[2, 4] and mask[4, 2]  # image span bidirectional within itself
    assert mask[5, 3] and not mask[1, 2]  # text sees earlier image tokens, not later ones
    assert not mask[4, 5] and not mask[6, 8] and mask[7, 6] and mask[6, 7]
    assert torch.equal(context.attention_mask(np.zeros(9, int)), torch.ones(9, 9).tril().bool())


@pytest.mark.parametrize("cp", [2, 4])
def test_splits_are_permutations_and_lpt_balances(cp):
    rng = np.random.default_rng(5)
    modality = context.synthetic_sequence(rng, 4096)
    results = {mode: context.plan_split(modality, cp, mode) for mode in context.MODES}
    for r in results.values():
        assert np.array_equal(np.sort(np.concatenate(r["offsets"])), np.arange(4096))
    assert results["lpt"]["imbalance"] <= min(results["zigzag"]["imbalance"], results["uniform"]["imbalance"])
    causal = np.zeros(4096, int)
    assert context.plan_split(causal, cp, "zigzag")["imbalance"] < 1.02
    assert context.plan_split(causal, cp, "uniform")["imbalance"] > 1.3


def test_tile_workload_matches_the_materialized_mask():
    rng = np.random.default_rng(2)
    modality = context.synthetic_sequence(rng, 3000)
    assert np.array_equal(
        context.tile_workload(modality), context.block_workload(context.attention_mask(modality))
    )


def test_lpt_is_the_greedy_on_a_hand_example():
    blocks = context.split_blocks(np.array([5.0, 4.0, 3.0, 3.0, 3.0]), 2, "lpt")
    assert blocks == [[0, 3], [1, 2, 4]]  # loads 8 and 10: greedy LPT's makespan


def test_reordered_masked_attention_equals_unsplit():
    rng = np.random.default_rng(1)
    modality = context.synthetic_sequence(rng, 1024)
    span = context.spans(modality)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1024, 8, generator=g, dtype=torch.float64) for _ in range(3))
    full = context.masked_attention(q, k, v, context.attention_mask(modality))
    perm = torch.as_tensor(np.concatenate(context.plan_split(modality, 4, "lpt")["offsets"]))
    mask = context.pair_mask(perm, perm, modality, span)
    out = context.masked_attention(q[perm], k[perm], v[perm], mask)
    assert torch.allclose(out, full[perm], atol=1e-10)
    # online-softmax partials over two key halves merge to the same rows
    half = len(perm) // 2
    parts = [
        context._partial(q[perm], k[perm[s]], v[perm[s]], context.pair_mask(perm, perm[s], modality, span))
        for s in (slice(0, half), slice(half, None))
    ]
    m = torch.maximum(parts[0][1], parts[1][1])
    num = sum(p * torch.exp(mx - m).nan_to_num(0) for p, mx, _ in parts)
    den = sum(s * torch.exp(mx - m).nan_to_num(0) for _, mx, s in parts)
    assert torch.allclose(num / den, full[perm], atol=1e-10)


def test_freezing_skips_weight_gradients_and_saved_activations():
    batch = synthetic_batch(TINY, 4, 0)
    saved = {}
    for pattern in ("all_trainable", "frozen_encoder", "projector_only", "frozen_llm_lora"):
        model = MLLM(TINY).apply_freeze(Freeze.pattern(pattern, TINY.encoders))
        enc = [model.layer(("vision", i)) for i in range(len(model.branches["vision"]) - 1)]
        loss, saved[pattern] = _saved_bytes(lambda model=model: model(batch))
        loss.backward()
        enc_grads = [p.grad for layer in enc for p in layer.parameters()]
        assert all(g is not None for g in enc_grads) == (pattern == "all_trainable")
        assert all(g is None for g in enc_grads) == (pattern != "all_trainable")
        if pattern == "frozen_llm_lora":
            named = dict(model.named_parameters())
            with_grad = {n for n, p in named.items() if p.grad is not None}
            assert with_grad and all(".a" in n or ".b" in n or "branches" in n for n in with_grad)
    # nothing upstream trains in the frozen encoder: it keeps no activations
    assert saved["frozen_encoder"] < saved["all_trainable"]
    assert saved["projector_only"] < saved["frozen_encoder"]
    needs = MLLM(TINY).apply_freeze(Freeze.pattern("frozen_encoder", TINY.encoders)).needs_grad()
    assert not any(needs[("vision", i)] for i in range(3)) and needs[("vision", 3)] and needs[("llm", 0)]


def test_backward_cost_rule():
    e = {"f": 1.0, "bw": 2.0, "bi": 1.0, "trainable": 10, "needs_grad": True}
    assert backward_cost(e) == 2.0
    assert backward_cost({**e, "trainable": 0}) == 1.0
    assert backward_cost({**e, "trainable": 0, "needs_grad": False}) == 0.0


def _chain(n):
    return [{"layers": [["llm", s]], "next": s + 1 if s + 1 < n else None} for s in range(n)]


def test_schedule_ops_and_warmups():
    plan = _chain(3)
    for s in range(3):
        seq = schedule.ops(plan, s, 5, True)
        assert sorted(seq) == sorted([("F", i) for i in range(5)] + [("B", i) for i in range(5)])
        assert seq.index(("B", 0)) == 2 - s + 1  # warm-up S - s - 1 forwards, then F, then B
    # two encoder branches (2 stages and 1 stage) into a 2-stage LLM: warm-up counts the LLM's stages
    dag = [
        {"layers": [], "next": 1},
        {"layers": [], "next": 3},
        {"layers": [], "next": 3},
        {"layers": [], "next": 4},
        {"layers": [], "next": None},
    ]
    assert [schedule.depth(dag, s) - 1 for s in range(5)] == [3, 2, 2, 1, 0]
    assert schedule.ops(dag, 0, 8, False) == [("F", i) for i in range(8)]


def test_simulator_on_fixed_cost_tables():
    # uniform chain: (M + S - 1)(F + B)
    assert schedule.simulate(_chain(2), [1, 1], [2, 2], 4)["iteration_time"] == pytest.approx(15)
    assert schedule.simulate(_chain(4), [1] * 4, [2] * 4, 6)["iteration_time"] == pytest.approx(27)
    # a frozen first stage has no backward slots: its forwards run back to back
    sim = schedule.simulate(_chain(2), [1, 1], [0, 2], 4, has_backward=[False, True])
    assert sim["iteration_time"] == pytest.approx(1 + 4 * 3)
    # message latency adds once per crossing on the critical path
    assert schedule.simulate(_chain(2), [1, 1], [2, 2], 1, comm=0.5)["iteration_time"] == pytest.approx(7)


def _table(enc_f, llm_f, enc_frozen):
    prof = {}
    for i, f in enumerate(enc_f):
        prof[f"vision:{i}"] = {
            "f": f,
            "bw": 2 * f,
            "bi": f,
            "params": 100,
            "trainable": 0 if enc_frozen else 100,
            "saved": 0 if enc_frozen else 10,
            "needs_grad": not enc_frozen,
        }
    for i, f in enumerate(llm_f):
        prof[f"llm:{i}"] = {
            "f": f,
            "bw": 2 * f,
            "bi": f,
            "params": 100,
            "trainable": 100,
            "saved": 10,
            "needs_grad": True,
        }
    return prof


def test_frozen_aware_partition_beats_unaware_on_a_frozen_encoder():
    prof = _table([1.0] * 6, [1.0] * 6, enc_frozen=True)
    mods = {"vision": 6, "llm": 6}
    plans = {m: partition.partition(prof, mods, 2, 8, m) for m in partition.METHODS}
    aware = plans["frozen_aware"]["predicted_iteration_time"]
    for m in ("parameters", "layers", "forward3x"):
        assert aware < plans[m]["predicted_iteration_time"]
    assert len(plans["frozen_aware"]["stages"][0]["layers"]) > 6  # the frozen encoder plus LLM layers
    # all trainable and uniform: 3x forward is the true cost, so the plans agree
    even = _table([1.0] * 6, [1.0] * 6, enc_frozen=False)
    assert partition.partition(even, mods, 2, 8, "frozen_aware")["predicted_iteration_time"] == pytest.approx(
        partition.partition(even, mods, 2, 8, "forward3x")["predicted_iteration_time"]
    )


def test_branch_candidates_and_memory_limit():
    mods = {"vision": 3, "audio": 2, "llm": 3}
    plans = list(partition.candidates(mods, 4))
    assert plans and all(len(p) == 4 for p in plans)
    for p in plans:
        assert sum(len(s["layers"]) for s in p) == 8 and p[-1]["next"] is None
    prof = _table([1.0] * 3, [1.0] * 3, enc_frozen=True)
    prof |= {f"audio:{i}": dict(prof["vision:0"]) for i in range(2)}
    best = partition.partition(prof, mods, 4, 4, "frozen_aware")
    assert best["predicted_iteration_time"] > 0
    with pytest.raises(ValueError, match="memory"):
        partition.partition(prof, mods, 4, 4, "frozen_aware", memory_limit=10)
