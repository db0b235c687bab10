"""One rank of a launched run (`launch.launch`): `python -m ...cornstarch.worker <folder> [<out>]`
reads `<folder>/task.json`, writes its results (`rank<r>.pt`, step records) to `<out>` (default:
the same folder; a multi-node run mounts the task read-only and shares `<out>`), joins the process
group (`placement`: gloo on CPU tensors, or NCCL with the rank's GPU
`cuda:<LOCAL_RANK or rank>` when the task's device is CUDA) and runs the task:

- `pipeline`: build the model, apply the freezing pattern, train `steps` iterations of the plan's
  1F1B schedule (AdamW on the stage's trainable parameters); records the loss per step (last stage),
  the measured iteration times (barrier to barrier), one iteration's op timeline and, when asked, the
  first step's gradients;
- `cp_attention`: the rank's share (token offsets of the split) of a seeded q, k, v through ring
  attention; records its outputs and offsets;
- `sequence`: several of these in one process group; `interleave`: several pipeline tasks stepped
  round-robin (for fair timing comparisons).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from . import context
from .model import MLLM, Freeze, MLLMConfig, microbatches, synthetic_batch
from .pipeline import StageRunner
from .placement import placement, synchronize


class PipelineTask:
    """One `pipeline` task on this rank: the stage, its optimizer and what is recorded per step.
    With a `report` folder, each step's record (step, iteration time, the stage's busy time, the
    loss on the last stage) replaces `step-rank<r>.json` there, for the launcher's progress."""

    def __init__(self, task: dict, rank: int, device: str = "cpu", report: Path | None = None):
        self.task, cfg = task, MLLMConfig.from_dict(task["model"])
        self.device, self.rank, self.report = device, rank, report
        self.cfg = cfg
        model = MLLM(cfg).apply_freeze(Freeze.pattern(task["pattern"], cfg.encoders))
        self.m, self.size = task["microbatches"], task["batch_size"]
        self.runner = StageRunner(
            model, task["plan"], rank, microbatches(synthetic_batch(cfg, self.size, 0), self.m)[0], device
        )
        params = [p for p in self.runner.params.values() if p.requires_grad]
        self.opt = torch.optim.AdamW(params, lr=task.get("lr", 3e-3)) if params else None
        self.out = {"losses": [], "iteration_times": [], "timeline": None, "stage": rank}

    def step(self, step: int) -> None:
        batch = synthetic_batch(self.cfg, self.size, self.task.get("seed", 0) * 100_003 + step)
        self.runner.timeline = []
        dist.barrier()
        synchronize(self.device)
        t0 = time.perf_counter()
        loss = self.runner.run(batch, self.m)
        synchronize(self.device)
        dist.barrier()
        elapsed = time.perf_counter() - t0
        self.out["iteration_times"].append(elapsed)
        self.out["timeline"] = self.runner.timeline
        if loss is not None:
            self.out["losses"].append(float(loss))
        if self.report is not None:
            busy = sum(end - start for _, _, start, end in self.runner.timeline)
            record = {"step": step + 1, "time": elapsed, "busy": busy,
                      "loss": None if loss is None else float(loss)}
            tmp = self.report / f".step-rank{self.rank}.json"
            tmp.write_text(json.dumps(record))
            tmp.replace(self.report / f"step-rank{self.rank}.json")
        if step == 0 and self.task.get("record_grads"):  # on the CPU: the launcher reads them there
            self.out["grads"] = {
                n: p.grad.detach().cpu().clone() for n, p in self.runner.params.items() if p.grad is not None
            }
        if self.opt is not None:
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)


def run_pipeline(task: dict, rank: int, device: str = "cpu", report: Path | None = None) -> dict:
    """Trains the stage; with `task["save"]`, the result also holds the stage's trained weights
    (parameters and buffers of its layers, on the CPU): the stages' union is the whole model."""
    job = PipelineTask(task, rank, device, report)
    for step in range(task["steps"]):
        job.step(step)
    if task.get("save"):
        job.out["state"] = job.runner.state()
    return job.out


def run_interleaved(tasks: list[dict], rank: int, device: str = "cpu") -> list[dict]:
    """Several pipeline tasks stepped round-robin (step i of every task before step i + 1), so that
    load drift on a shared machine hits every plan alike when their iteration times are compared."""
    jobs = [PipelineTask(t, rank, device) for t in tasks]
    for step in range(max(t["steps"] for t in tasks)):
        for job in jobs:
            if step < job.task["steps"]:
                job.step(step)
    return [j.out for j in jobs]


def run_cp_attention(task: dict, rank: int, world: int, device: str = "cpu") -> dict:
    modality = np.asarray(task["modality"])
    split = context.plan_split(modality, world, task["mode"])
    g = torch.Generator().manual_seed(task.get("seed", 0))
    t, d = len(modality), task.get("dim", 16)
    q, k, v = (torch.randn(t, d, generator=g, dtype=torch.float64) for _ in range(3))
    pos = torch.as_tensor(split["offsets"][rank])
    span = context.spans(modality)
    q, k, v = (x[pos].to(device) for x in (q, k, v))
    out = context.ring_attention(q, k, v, pos.to(device), modality, span)
    return {"offsets": pos, "out": out.cpu(), "imbalance": split["imbalance"]}


def _run(task: dict, rank: int, world: int, device: str = "cpu", report: Path | None = None):
    if task["kind"] == "pipeline":
        return run_pipeline(task, rank, device, report)
    if task["kind"] == "cp_attention":
        return run_cp_attention(task, rank, world, device)
    if task["kind"] == "interleave":
        return run_interleaved(task["tasks"], rank, device)
    if task["kind"] == "sequence":  # several tasks in one process group (saves process starts)
        return [_run(t, rank, world, device) for t in task["tasks"]]
    raise ValueError(f"unknown task kind {task['kind']!r}")


def main(folder: str, out: str | None = None) -> None:
    task = json.loads((Path(folder) / "task.json").read_text())
    results = Path(out or folder)
    results.mkdir(parents=True, exist_ok=True)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    local = os.environ.get("LOCAL_RANK")
    device = task.get("device", "cpu")
    gpus = torch.cuda.device_count() if device.startswith("cuda") else 0
    where = placement(device, rank, gpus, None if local is None else int(local))
    if where.device != "cpu":
        torch.cuda.set_device(where.device)
    dist.init_process_group(where.backend, rank=rank, world_size=world)
    try:
        result = _run(task, rank, world, where.device, results)
        if task.get("hang_rank") == rank:  # tests: a rank that never finishes (reaping on cancel)
            time.sleep(3600)
        torch.save(result, results / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:3])
