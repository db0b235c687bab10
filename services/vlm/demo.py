"""`make demo` for vlm: a text-skewed TinyVLM audited for modality following (balance point, TFR/VFR,
oscillations), a shortcut-VQA model fine-tuned by a short CFPO job, and a short SpatioLM training
and evaluation (spatial / general QA against the branch-less base, depth AbsRel, depth.png)."""

from __future__ import annotations

from pathlib import Path

from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE


def _done(client, job, label: str):
    done = follow(client, job.id, label)
    if PROTO_TO_STATE[done.state] != "SUCCEEDED":
        raise SystemExit(f"{label} ended {PROTO_TO_STATE[done.state]}: {done.error.message}")
    return done


def run(client, out: Path) -> None:
    pre = _done(client, client.submit("vlm", "pretrain", steps=300), "vlm.pretrain")
    console.print(
        f"pretrained (80% text-only data): text-only accuracy {pre.result['text_only_accuracy']:.2f}, "
        f"image-only {pre.result['image_only_accuracy']:.2f}"
    )
    audit = _done(
        client,
        client.submit(
            "vlm", "audit_modality_following", model_job_id=pre.id, synthetic={"seed": 1, "per_cell": 40}
        ),
        "vlm.audit_modality_following",
    )
    r = audit.result
    console.print(
        f"balance point {r['balance_point']:+.3f} (95% CI {r['ci_low']:+.3f}..{r['ci_high']:+.3f}), "
        f"Spearman {r['spearman']:.2f}; TFR {r['tfr']:.2f} VFR {r['vfr']:.2f}; oscillations "
        f"{r['oscillations_ambiguous']:.2f} ambiguous vs {r['oscillations_clear']:.2f} clear"
    )
    paths = client.pull_artifacts(audit.id, out)
    console.print("artifacts: " + ", ".join(p.name for p in paths))
    base = _done(client, client.submit("vlm", "pretrain", task="shortcut_vqa", steps=150), "vlm.pretrain")
    cfpo = _done(
        client,
        client.submit("vlm", "train_rl", model_job_id=base.id, algorithm="cfpo", steps=60),
        "vlm.train_rl",
    )
    console.print(
        f"CFPO: anti-prior accuracy {base.result['anti_prior_accuracy']:.2f} -> "
        f"{cfpo.result['anti_prior_accuracy']:.2f}, visual dependency {cfpo.result['visual_dependency']:.2f}"
    )
    spatial = _done(
        client,
        client.submit("vlm", "train_spatial", arm="spatio", pretrain_steps=300, steps=150),
        "vlm.train_spatial",
    )
    ev = client.submit("vlm", "evaluate_spatial", model_job_id=spatial.id)
    ev = _done(client, ev, "vlm.evaluate_spatial")
    r = ev.result
    console.print(
        f"SpatioLM: spatial accuracy {r['base_spatial_accuracy']:.2f} (base) -> {r['spatial_accuracy']:.2f} "
        f"(branch), MRA {r['base_spatial_mra']:.2f} -> {r['spatial_mra']:.2f}; general "
        f"{r['base_general_accuracy']:.2f} -> {r['general_accuracy']:.2f}; "
        f"depth AbsRel {r['depth_abs_rel']:.3f}"
    )
    paths = client.pull_artifacts(ev.id, out)
    console.print("artifacts: " + ", ".join(p.name for p in paths))
