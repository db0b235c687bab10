"""The MCQ audit against a local transformers directory (`hf`), opened the way a job opens it:
both protocols over every permutation, the standard one by label log-probabilities."""

from __future__ import annotations

import pytest
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY
from paperworks.services.bias.data import open_model
from paperworks.services.bias.mcq.audit import evaluate_mcq
from paperworks.services.bias.mcq.evaluate import MCQSettings
from paperworks.services.bias.mcq.nonsenseqa import nonsense_qa
from paperworks.services.bias.spec import ModelSpec
from paperworks.shared.errors import InvalidArgument
from unit.backends.hf_models import save_llama


def test_mcq_protocols_run_against_a_local_hf_directory(tmp_path, embedder):
    directory = save_llama(tmp_path / "llama", positions=512)
    model = open_model(ModelSpec(kind="hf", path=str(directory)), "model", DEFAULT_TAXONOMY)
    assert model.kind == "hf"
    items = nonsense_qa(2, seed=0, question_words=2)
    report, rows = evaluate_mcq(
        model,
        items,
        nonsense_qa(4, seed=1, question_words=2),
        ["standard", "md"],
        MCQSettings(shots=1, max_new_tokens=4),
        max_permutations=24,
        embedder=lambda: embedder,
    )
    assert len(report["permutations"]) == 24 and len(rows) == 2 * 24 * len(items)
    standard, md = report["protocols"]["standard"], report["protocols"]["md"]
    assert standard["unmatched"] == 0 and sum(standard["by_position"]) == 24 * len(items)
    assert standard["match_methods"] == {"letter": 24 * len(items)}
    assert md["selections"] == 24 * len(items)
    assert all(r["protocol"] in ("standard", "md") and isinstance(r["response"], str) for r in rows)


def test_a_local_model_outside_the_data_root_is_refused_naming_the_field(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERWORKS_BIAS_DATA_ROOT", str(tmp_path / "root"))
    with pytest.raises(InvalidArgument) as exc:
        open_model(ModelSpec(kind="tiny", path=str(tmp_path / "elsewhere")), "target", DEFAULT_TAXONOMY)
    assert exc.value.field == "target.source.path" and "PAPERWORKS_BIAS_DATA_ROOT" in exc.value.message
