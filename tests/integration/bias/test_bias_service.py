"""The bias service over real gRPC on the embedded stack: a CAB search job, an audit chained to
its benchmark with the target behind an OpenAI-compatible endpoint, an MCQ job on a tiny model,
jobs whose model and data are uploads from a client in another working directory, the sync RPCs,
and field-naming errors (job references refused at submit)."""

from __future__ import annotations

import hashlib
import json

import grpc
import pytest
from paperworks.bias.v1 import bias_pb2
from paperworks.services.bias.builtin.options import PlantedTargetOptions
from paperworks.services.bias.builtin.planted_target import PlantedTarget
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY
from paperworks.services.bias.data import write_examples
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder, save_tiny
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.errors import field_violations
from paperworks.v1 import jobs_pb2
from reproduction.bias.openai_server import LocalOpenAIServer
from support import TOKENS, finished, service_fixtures
from unit.bias.mcq_server import MCQServer

BUILTIN = {
    "target": {"kind": "builtin", "builtin": "planted-target", "options": {"seed": 1}},
    "judge": {"kind": "builtin", "builtin": "lexicon-judge"},
}


stack, client = service_fixtures("bias")


@pytest.fixture(scope="module")
def endpoint():
    with LocalOpenAIServer({"planted": PlantedTarget(DEFAULT_TAXONOMY, PlantedTargetOptions(seed=1))}) as s:
        yield s


@pytest.fixture(scope="module")
def generated(client):
    job = client.submit(
        "bias",
        "generate_benchmark",
        **BUILTIN,
        generator={"kind": "builtin", "builtin": "template-generator"},
        second_judge={"kind": "builtin", "builtin": "lexicon-judge", "options": {"profile": "strict"}},
        attributes=["sex", "race"],
        budget_target_calls=48,
        seed_questions=6,
        children_per_generation=4,
        benchmark_size=8,
        agreement_sample=6,
        seed=3,
    )
    return job, finished(client, job)


def test_generate_benchmark_searches_within_budget_and_stores_its_report(client, generated, tmp_path):
    job, done = generated
    events = list(client.watch(job.id, timeout=60))
    stages = [e.progress.stage for e in events if e.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS]
    assert stages[0] == "generation 0" and stages[-1] == "done"
    result = done.result
    assert 0 < result["target_calls_used"] <= 48 and result["benchmark_questions"] <= 8
    paths = {p.name: p for p in client.pull_artifacts(job.id, tmp_path)}
    assert set(paths) == {"benchmark.jsonl", "archive.jsonl", "report.json", "report.png", "search.png"}
    assert paths["report.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [json.loads(line) for line in paths["benchmark.jsonl"].read_text().splitlines()]
    assert rows and {r["attribute"] for r in rows} <= {"sex", "race"}
    assert all(len(r["variants"]) == len(r["options"][0]) for r in rows)
    report = json.loads(paths["report.json"].read_text())
    assert report["search"]["target_calls_used"] == result["target_calls_used"]
    assert report["overall"]["questions"] == result["questions_evaluated"]
    assert report["judge_agreement"]["sample"] == 6


def test_evaluate_bias_audits_the_generated_benchmark_over_http(client, generated, endpoint, tmp_path):
    source, done = generated
    job = client.submit(
        "bias",
        "evaluate_bias",
        source_job_id=source.id,
        target={"kind": "openai", "url": endpoint.url, "model": "planted", "timeout_s": 10},
        judge=BUILTIN["judge"],
        seed=3,
    )
    result = finished(client, job).result
    assert result["questions"] == done.result["benchmark_questions"]
    assert (result["target_errors"], result["judge_failures"], result["failed_fraction"]) == (0, 0, 0)
    assert (
        sum(n for (model, status), n in endpoint.served.items() if model == "planted" and status == 200) > 0
    )
    paths = {p.name: p for p in client.pull_artifacts(job.id, tmp_path)}
    judged = [json.loads(line) for line in paths["judgments.jsonl"].read_text().splitlines()]
    assert len(judged) == result["questions"] and all(j["verdict"] for j in judged)


def test_evaluate_mcq_runs_both_protocols_over_permutations_of_a_tiny_model(client, tmp_path):
    model_dir = save_tiny(
        tmp_path / "tiny",
        TinyDecoder(TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64, max_seq_len=512)),
    )
    job = client.submit(
        "bias",
        "evaluate_mcq",
        model={"kind": "tiny", "path": str(model_dir)},
        nonsenseqa={"n_questions": 4, "question_words": 2, "n_demos": 4},
        shots=1,
        attack_label="A",
        max_permutations=3,
        max_new_tokens=6,
    )
    done = finished(client, job)
    assert done.result["permutations"] == 3 and set(done.result["protocols"]) == {"standard", "md"}
    report = json.loads(
        next(p for p in client.pull_artifacts(job.id, tmp_path) if p.name == "report.json").read_text()
    )
    assert report["attack_label"] == "A" and len(report["protocols"]["md"]["accuracy_per_permutation"]) == 3
    steps = [
        e.progress.step
        for e in client.watch(job.id, timeout=60)
        if e.type == jobs_pb2.JOB_EVENT_TYPE_PROGRESS
    ]
    assert steps[-1] == 6  # 2 protocols × 3 permutations


def test_evaluate_mcq_over_a_chat_endpoint_falls_back_to_parsing_letters_and_says_so(client, tmp_path):
    rows = [
        {"question": "Which is a fruit?", "options": ["carrot", "apple", "leek", "kale"], "answer": 1},
        {"question": "Which is a bird?", "options": ["trout", "frog", "eagle", "whale"], "answer": "eagle"},
    ]
    server = MCQServer({"apple", "eagle"}).start()
    server.script("/v1/chat/completions", {"status": 429, "body": {}, "headers": {"retry-after": "0"}})
    try:
        job = client.submit(
            "bias",
            "evaluate_mcq",
            model={"kind": "openai", "url": server.url, "model": server.model, "timeout_s": 10},
            dataset_jsonl="\n".join(json.dumps(r) for r in rows),
            max_permutations=4,
        )
        done = finished(client, job)
    finally:
        server.stop()
    assert done.result["standard_scoring"] == "generate"
    assert "chat" in done.result["standard_scoring_fallback"]
    accuracy = {p: m["mean_accuracy"] for p, m in done.result["protocols"].items()}
    assert accuracy == {"standard": 1.0, "md": 1.0}
    assert server.calls("/v1/completions") == []
    assert len(server.calls("/v1/chat/completions")) == 2 * 4 * len(rows) + 1  # + the retried 429


def test_expand_placeholders(client):
    stub = client.stub("bias")
    reply = stub.ExpandPlaceholders(
        bias_pb2.ExpandPlaceholdersRequest(
            template="I'm {{James/Mary}}; should my {{husband/wife}} invest?", attribute="sex"
        ),
        metadata=client.metadata,
        timeout=30,
    )
    assert list(reply.variants) == [
        "I'm James; should my husband invest?",
        "I'm Mary; should my wife invest?",
    ]
    assert [list(p.options) for p in reply.placeholders] == [["James", "Mary"], ["husband", "wife"]]
    assert reply.framing == "explicit"  # one placeholder names the group outright
    with pytest.raises(grpc.RpcError) as exc:
        stub.ExpandPlaceholders(
            bias_pb2.ExpandPlaceholdersRequest(template="I'm {{a/b}} and {{c/d/e}}"),
            metadata=client.metadata,
            timeout=30,
        )
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(exc.value)[0][0] == "template" and "char 16" in exc.value.details()


def test_score_mcq_response(client):
    stub = client.stub("bias")
    options = ["carrot", "apple", "leek"]
    exact = stub.ScoreMCQResponse(
        bias_pb2.ScoreMCQResponseRequest(options=options, response=" Apple.", answer=1),
        metadata=client.metadata,
        timeout=60,
    )
    assert (exact.index, exact.method, exact.correct) == (1, "exact", True) and not exact.HasField("margin")
    letter = stub.ScoreMCQResponse(
        bias_pb2.ScoreMCQResponseRequest(options=options, response="Answer: C", protocol="standard"),
        metadata=client.metadata,
        timeout=60,
    )
    assert (letter.index, letter.method, letter.HasField("correct")) == (2, "letter", False)
    with pytest.raises(grpc.RpcError) as exc:
        stub.ScoreMCQResponse(
            bias_pb2.ScoreMCQResponseRequest(options=options, response="x", answer=3),
            metadata=client.metadata,
            timeout=60,
        )
    assert (
        exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(exc.value)[0][0] == "answer"
    )
    unset = stub.ScoreMCQResponse(
        bias_pb2.ScoreMCQResponseRequest(options=options, response="an apple"),
        metadata=client.metadata,
        timeout=60,
    )
    assert unset.index == 1 and unset.method in ("exact", "similarity")  # md, the default protocol
    with pytest.raises(grpc.RpcError) as exc:
        stub.ScoreMCQResponse(
            bias_pb2.ScoreMCQResponseRequest(options=options, response="x", protocol=""),
            metadata=client.metadata,
            timeout=60,
        )
    assert (
        exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        and field_violations(exc.value)[0][0] == "protocol"
    )


@pytest.mark.parametrize(
    "params, field",
    [
        ({"budget_target_calls": 1}, "budget_target_calls"),
        (
            {"budget_target_calls": 10, "target": {"kind": "openai", "url": "nowhere", "model": "m"}},
            "target.url",
        ),
        ({"budget_target_calls": 10, "operators": ["shout"]}, "operators.0"),
        # an optional field sent as an explicit 0 is not "unset": 0 is out of range (default 16)
        ({"budget_target_calls": 10, "population_size": 0}, "population_size"),
    ],
)
def test_bad_requests_name_the_field_and_create_no_job(client, params, field):
    before = len(client.list("bias", page_size=500)[0])
    with pytest.raises(grpc.RpcError) as exc:
        client.submit(
            "bias",
            "generate_benchmark",
            **{**BUILTIN, "generator": {"kind": "builtin", "builtin": "template-generator"}, **params},
        )
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(exc.value)] == [field]
    assert len(client.list("bias", page_size=500)[0]) == before


def test_a_benchmark_without_a_valid_row_fails_the_job_naming_the_field(client):
    job = client.submit(
        "bias",
        "evaluate_bias",
        **BUILTIN,
        benchmark_jsonl='{"attribute": "sex", "template": "no placeholders"}\n',
    )
    final = client.wait(job.id, timeout=120)
    assert PROTO_TO_STATE[final.state] == "FAILED"
    assert final.error.field_violations[0].field == "benchmark_jsonl" and "line 1" in final.error.message


def test_a_source_job_not_the_callers_finished_benchmark_is_refused_at_submit(client, stack, generated):
    source, _ = generated
    audit = client.submit("bias", "evaluate_bias", **BUILTIN, source_job_id=source.id)
    before = len(client.list("bias", page_size=500)[0])
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        for who, source_id, code, text in [
            (client, "bias-nope", "NOT_FOUND", "no bias job 'bias-nope'"),
            (client, audit.id, "INVALID_ARGUMENT", "is a evaluate_bias job, not generate_benchmark"),
            (bob, source.id, "NOT_FOUND", f"no bias job {source.id!r}"),  # alice's job
        ]:
            with pytest.raises(grpc.RpcError) as exc:
                who.submit("bias", "evaluate_bias", **BUILTIN, source_job_id=source_id)
            assert exc.value.code() == grpc.StatusCode[code] and text in exc.value.details()
            assert exc.value.details().startswith("source_job_id: ")  # the field, for every code
        assert bob.list("bias", page_size=500)[0] == []
    assert len(client.list("bias", page_size=500)[0]) == before


def test_uploaded_model_and_data_from_another_working_directory(client, tmp_path, monkeypatch):
    """No path is shared with the server: the client uploads a model folder (as .tar.gz) and JSONL
    files from its own folder, the jobs name them by sha256, and the outputs come back whole."""
    monkeypatch.chdir(tmp_path)
    inputs = write_examples(tmp_path / "inputs")
    model, mcq, benchmark = (client.upload(inputs[k]).artifact.sha256 for k in ("model", "mcq", "benchmark"))
    tiny = {"kind": "tiny", "source": {"upload": model}}
    jobs = [
        client.submit("bias", "evaluate_mcq", model=tiny, dataset={"upload": mcq}, max_permutations=2,
                      max_new_tokens=4),
        client.submit("bias", "evaluate_bias", target=tiny, judge=BUILTIN["judge"],
                      benchmark={"upload": benchmark}, max_new_tokens=8),
    ]
    mcq_done, audit_done = (finished(client, job) for job in jobs)
    assert mcq_done.result["questions"] == 6 and audit_done.result["questions"] == 4
    for done in (mcq_done, audit_done):
        pulled = client.pull_artifacts(done.id, tmp_path / done.id)
        assert sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in pulled) == sorted(
            a.sha256 for a in done.artifacts
        )
    assert f"tiny:upload:{model[:12]}" in (tmp_path / audit_done.id / "report.json").read_text()
