"""SDR's decision rule, lambda calibration, curves, AUROC and the checkable task suite."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paperworks.services.router.data import TaskSuite
from paperworks.services.router.sdr.curves import normalized_area, upper_hull
from paperworks.services.router.sdr.decider import (
    DeciderConfig,
    OperatingPoint,
    decide,
    fit_decider,
    fit_projection,
    lambda_for_budget,
    lambda_grid,
    sweep,
)
from paperworks.services.router.sdr.evaluation import auroc


def test_decision_maximises_quality_minus_lambda_cost_with_at_most_one_option():
    predicted = np.array([[0.5, 0.9, 0.99]])
    costs = np.array([0.0, 1.0, 10.0])
    assert decide(predicted, costs, 0.0)[0] == 2
    assert decide(predicted, costs, 0.02)[0] == 1  # 0.88 vs 0.79
    assert decide(predicted, costs, 1.0)[0] == 0


def test_sweeping_lambda_trades_cost_for_quality_monotonically():
    rng = np.random.default_rng(0)
    predicted = rng.random((500, 3))
    qualities = (rng.random((500, 3)) < predicted).astype(float)
    costs = np.array([0.0, 1.0, 10.0])
    points = sweep(predicted, qualities, costs, lambda_grid(costs))
    spent = [p.cost for p in points]
    assert spent == sorted(spent, reverse=True)
    assert points[-1].cost == 0.0 and points[-1].accept_rate == 1.0


def test_budget_picks_the_best_lambda_that_fits():
    points = [
        OperatingPoint(0.0, 9.0, 0.97, 0.0),
        OperatingPoint(0.1, 2.0, 0.9, 0.5),
        OperatingPoint(1.0, 0.0, 0.6, 1.0),
    ]
    assert lambda_for_budget(points, 2.5) == 0.1
    assert lambda_for_budget(points, 100) == 0.0
    assert lambda_for_budget(points, -1) == 1.0  # nothing fits: the cheapest


def test_hull_and_area_of_the_reference_policies():
    assert upper_hull([(0, 0.5), (1, 0.4), (2, 0.9), (1, 0.8), (1, 0.6)]) == [(0, 0.5), (1, 0.8), (2, 0.9)]
    assert normalized_area([], 0.4, 10.0) == pytest.approx(0.4)
    assert normalized_area([(10.0, 0.9)], 0.4, 10.0) == pytest.approx(0.65)
    assert normalized_area([(2.0, 0.9)], 0.4, 10.0) == pytest.approx(0.2 * 0.65 + 0.8 * 0.9)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), min_size=2, max_size=40))
def test_auroc_matches_the_pairwise_definition(pairs):
    labels = np.array([p[0] for p in pairs])
    scores = np.array([p[1] for p in pairs], dtype=float)
    pos, neg = scores[labels], scores[~labels]
    if len(pos) == 0 or len(neg) == 0:
        assert auroc(labels, scores) is None
        return
    expected = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert auroc(labels, scores) == pytest.approx(expected)


def test_projection_whitens_blocks_and_passes_scalars():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=(300, 6)) @ rng.normal(size=(6, 6)), rng.normal(size=(300, 2))], 1)
    mean, std, w = fit_projection(x, [(0, 6)], components=3)
    z = ((x - mean) / std) @ w
    assert z.shape == (300, 5)
    np.testing.assert_allclose(z[:, :3].std(axis=0), 1.0, atol=1e-6)
    np.testing.assert_allclose(z[:, 3:], (x[:, 6:] - mean[6:]) / std[6:])


def test_quality_heads_learn_which_option_is_right():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 4)).astype(np.float32)
    qualities = np.stack([(x[:, 0] > 0), (x[:, 0] <= 0)], axis=1).astype(float)
    module = fit_decider(x, qualities, DeciderConfig(steps=200, weight_decay=0.0))
    predicted = module.predict(x)
    assert ((predicted[:, 0] > predicted[:, 1]) == (x[:, 0] > 0)).mean() > 0.95


def test_task_suite_is_checkable_deterministic_and_splits_lookup_keys():
    suite = TaskSuite()
    tasks = suite.generate(300, seed=4)
    assert tasks == suite.generate(300, seed=4)
    assert {t.kind for t in tasks} == {"add", "upper", "lookup"}
    for t in tasks:
        assert t.check(t.answer) and not t.check(t.answer + "x")
    parts = [{t.prompt for t in suite.generate(400, seed=1, part=k) if t.kind == "lookup"} for k in range(3)]
    assert parts[0] and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
    known = {f"get:{k}=" for k in suite.known_keys}
    assert {t.prompt for t in suite.generate(300, 2, known_only=True) if t.kind == "lookup"} <= known
    assert len(suite.known_keys) == round(suite.known_fraction * suite.lookup_keys)


def test_zipf_keys_skew_only_the_local_models_training_lookups():
    from collections import Counter

    suite = TaskSuite(families=("lookup",), lookup_keys=50, known_fraction=1.0, key_zipf=1.3)
    counts = Counter(t.prompt for t in suite.generate(5000, seed=0, known_only=True))
    weights = dict(zip((f"get:{k}=" for k in suite.known_keys), suite.known_key_weights, strict=True))
    top = max(weights, key=weights.get)
    bottom = min(weights, key=weights.get)
    # the most frequent key by weight is drawn ~ (50)^1.3 = 161x as often as the rarest
    assert counts[top] > 20 * max(counts[bottom], 1)
    assert counts.most_common(1)[0][0] == top
    # requests in a router split stay uniform over that split's keys
    uniform = Counter(t.prompt for t in suite.generate(3000, seed=0, part=0))
    assert max(uniform.values()) < 3 * min(uniform.values())
    # exponent 0 (the default) draws the local model's keys uniformly
    flat = Counter(t.prompt for t in TaskSuite(families=("lookup",), lookup_keys=50, known_fraction=1.0)
                   .generate(5000, seed=0, known_only=True))
    assert max(flat.values()) < 3 * min(flat.values())


def test_key_zipf_travels_from_the_grpc_request_to_the_job_params():
    import pytest
    from paperworks.router.v1 import router_pb2
    from paperworks.services.router.spec import TrainDeciderParams
    from paperworks.shared.rpc.convert import request_params
    from pydantic import ValidationError

    request = router_pb2.SubmitTrainDeciderRequest(
        local=router_pb2.LocalModel(train_tiny=router_pb2.TrainTiny()),
        tasks=router_pb2.TaskSuite(key_zipf=1.3),
        remotes=[router_pb2.RemoteModel(name="big", price=1.0, accuracy=[0.9, 0.9, 0.9])],
    )
    assert TrainDeciderParams.model_validate(request_params(request)).tasks.key_zipf == 1.3
    request.tasks.key_zipf = -1
    with pytest.raises(ValidationError, match="key_zipf"):
        TrainDeciderParams.model_validate(request_params(request))
