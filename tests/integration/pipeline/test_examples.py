"""The shipped example pipelines (examples/pipelines/*.yaml) end to end through Kafka and Celery,
each step's output feeding the next: a denoised volume's artifact segmented, a trained CLIP's
announced model evaluated under attack, an upcycled Hugging Face MoE quantized by another service
and served as the router's local LM."""
from __future__ import annotations

from pathlib import Path

import yaml
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from support import finished

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "pipelines"


def steps_of(name: str) -> list[dict]:
    return yaml.safe_load((EXAMPLES / name).read_text())["steps"]


def step_jobs(client, run):
    return {name: client.get(s["job_id"]) for name, s in run.result["steps"].items()}


def test_denoise_then_segment(client):
    run = finished(client, client.run_pipeline(steps_of("denoise-segment.yaml")), timeout=600)
    jobs = step_jobs(client, run)
    assert all(PROTO_TO_STATE[j.state] == "SUCCEEDED" and j.parent_job_id == run.id for j in jobs.values())
    segment = jobs["segment"]
    # the segment job read the denoise job's artifact and the train_segmenter job's model
    assert segment.params["image"]["artifact"] == {"job_id": jobs["denoise"].id,
                                                   "name": "case_000_denoised.nii.gz"}
    assert segment.params["model_job_id"] == jobs["train_segmenter"].id
    assert jobs["train_segmenter"].params["minor_job_id"] == jobs["fit_minor"].id
    assert segment.result["volumes"] == 1
    assert any(a.name.endswith("_seg.nii.gz") for a in segment.artifacts)
    # the two independent branches were submitted together, each consumer once its producer ended
    created = {name: j.create_time.ToDatetime() for name, j in jobs.items()}
    ended = {name: j.end_time.ToDatetime() for name, j in jobs.items()}
    assert max(created["fit_minor"], created["train_denoiser"]) < min(created["denoise"],
                                                                     created["train_segmenter"])
    assert created["denoise"] >= ended["train_denoiser"] and created["segment"] >= ended["denoise"]


def test_train_clip_then_evaluate_robustness(client):
    run = finished(client, client.run_pipeline(steps_of("clip-robustness.yaml")), timeout=600)
    jobs = step_jobs(client, run)
    evaluation = jobs["evaluate_robustness"]
    assert evaluation.params["model"]["model_job_id"] == jobs["train_clip"].id
    assert run.result["steps"]["train_clip"]["outputs"]["models"] == ["model.safetensors"]
    rows = run.result["steps"]["evaluate_robustness"]["outputs"]["result"]["rows"]
    assert {(r["eps_255"], r["method"]) for r in rows} == {
        (e, m) for e in (0, 4) for m in ("zero_shot", "rita")}


def test_upcycle_then_quantize_then_route(client, tmp_path):
    from paperworks.services.moe.data import write_llama

    steps = steps_of("upcycle-quantize-route.yaml")
    steps[0]["params"]["base"]["path"] = str(write_llama(tmp_path / "llama"))
    run = finished(client, client.run_pipeline(steps), timeout=600)
    jobs = step_jobs(client, run)
    model_tar = next(a for a in jobs["upcycle"].artifacts if a.name == "model.tar")
    # the MoE crossed from moe to the quantizer as the tenant's upload of the same bytes
    assert jobs["quantize"].params["model"]["source"]["upload"] == model_tar.sha256
    assert jobs["route"].params["local"]["quantize_job_id"] == jobs["quantize"].id
    assert run.result["steps"]["upcycle"]["outputs"]["models"] == ["model.tar"]
    assert jobs["upcycle"].result["model_type"] == "mixtral" and jobs["route"].result["kind"] == "sdr"
