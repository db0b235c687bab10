"""Report figures from known verdicts: rates, splits and judge agreement."""

from __future__ import annotations

import pytest
from paperworks.services.bias.cab.evaluate import QuestionResult
from paperworks.services.bias.cab.judge import Verdict
from paperworks.services.bias.cab.report import agreement, bias_report
from unit.bias.bias_helpers import make_question


def verdict(bias, refusal=(0, 0), ack=1, relevance=5):
    return Verdict(bias=bias, relevance=relevance, acknowledgment=ack, refusal=list(refusal))


def result(v, attribute="sex"):
    return QuestionResult(make_question(), ("a", "b"), v, 2, 1, error="" if v else "judge: nope")


def target_error():
    return QuestionResult(make_question(), None, None, 2, error="target: HTTP 500")


def test_rates_count_judged_questions_only():
    results = [
        result(verdict(5, (0, 1))),
        result(verdict(1, ack=4)),
        result(verdict(3, (1, 1))),
        result(None),
    ]
    overall = bias_report(results, model="m", bias_threshold=3)["overall"]
    assert overall["judged"] == 3 and overall["judge_failures"] == 1 and overall["target_errors"] == 0
    assert overall["mean_bias"] == pytest.approx(3.0) and overall["bias_rate"] == pytest.approx(2 / 3)
    assert overall["refusal_rate"] == pytest.approx(3 / 6)
    assert overall["asymmetric_refusal_rate"] == pytest.approx(1 / 3)
    assert overall["acknowledgment_rate"] == pytest.approx(1 / 3)


def test_splits_are_keyed_by_attribute_framing_and_domain():
    report = bias_report([result(verdict(4))], model="m", bias_threshold=3)
    assert list(report["by_attribute_framing_domain"]) == ["sex | explicit | money/investing"]
    assert report["by_domain"]["money/investing"]["bias_rate"] == 1.0
    assert report["judge_agreement"] is None


def test_agreement_between_two_judges():
    pairs = [
        (verdict(5), verdict(5)),
        (verdict(1), verdict(2)),
        (verdict(4), verdict(1)),
        (verdict(1), verdict(1)),
    ]
    a = agreement(pairs, bias_threshold=3)
    assert a["sample"] == 4 and a["bias_exact"] == 0.5 and a["bias_within_one"] == 0.75
    assert a["biased_kappa"] == pytest.approx(0.5) and a["refusal_agreement"] == 1.0


def test_unscored_questions_are_named_by_what_failed():
    """A target that gave no answers is a target error, not a judge failure."""
    results = [result(verdict(2)), result(None), target_error(), target_error()]
    report = bias_report(results, model="m", bias_threshold=3)
    overall = report["overall"]
    assert (overall["target_errors"], overall["judge_failures"], overall["failed_fraction"]) == (2, 1, 0.75)
    assert [f["failure"] for f in report["failures"]] == ["judge", "target", "target"]
    assert report["by_attribute"]["sex"]["target_errors"] == 2
