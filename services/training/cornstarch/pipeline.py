"""The multimodal 1F1B schedule run for real: one process per stage, activations and gradients
exchanged with torch.distributed point-to-point (gloo on CPU, NCCL on GPUs: `placement`).

Each rank builds the full model from the same seed (identical weights), keeps its stage's layers,
and learns the shapes crossing each stage boundary from one no-grad forward. Per op of
`schedule.ops`: F(m) receives the microbatch's activations from every upstream stage (marked
requiring grad only when a gradient flows back: something upstream trains), runs its layers (under
no_grad when no gradient flows through them) and sends the outputs downstream with non-blocking
sends; B(m) receives the output gradients (the last stage starts from loss / M), backpropagates
through the stage, and sends the input gradients upstream. Sum over microbatches of loss_m / M is
the full batch's mean loss, so the gradients equal single-process gradient accumulation. The
timeline records each op from the moment its inputs have arrived (waits show as idle gaps).

Devices: the stage's layers, its microbatches and every receive buffer live on the runner's
`device` (nothing here allocates on the CPU implicitly); op times synchronize the device first.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from . import schedule
from .model import MLLM, microbatches
from .placement import synchronize


def boundary_shapes(model: MLLM, plan: list[dict], batch: dict) -> list[dict]:
    """The activation dict (key -> (shape, dtype)) leaving every stage, from one no-grad forward."""
    out, acts_by_stage = [], {}
    with torch.no_grad():
        for s, st in enumerate(plan):
            acts = {}
            for p in schedule.prevs(plan, s):
                acts.update(acts_by_stage[p])
            acts = model.run_layers(
                [tuple(x) for x in st["layers"]], acts, batch, dict.fromkeys(model.layer_ids(), False)
            )
            acts_by_stage[s] = acts
            out.append({k: (tuple(v.shape), v.dtype) for k, v in sorted(acts.items())})
    return out


def stage_prefixes(stage: dict) -> tuple[str, ...]:
    """The names under which the stage's layers keep their parameters and buffers."""
    return tuple(f"llm.{i}." if m == "llm" else f"branches.{m}.{i}." for m, i in stage["layers"])


def stage_parameters(model: MLLM, stage: dict) -> dict[str, torch.nn.Parameter]:
    prefixes = stage_prefixes(stage)
    return {n: p for n, p in model.named_parameters() if n.startswith(prefixes)}


class StageRunner:
    """One rank's stage of `plan`."""

    def __init__(self, model: MLLM, plan: list[dict], rank: int, mb_template: dict, device="cpu"):
        """`model` on the CPU, whole (the boundary shapes come from one CPU forward); the stage's
        layers then move to `device` and the other stages' layers are released (to meta)."""
        self.model, self.plan, self.rank = model, plan, rank
        self.device = torch.device(device)
        self.stage = plan[rank]
        self.lids = [tuple(x) for x in self.stage["layers"]]
        self.needs = model.needs_grad()
        self.shapes = boundary_shapes(model, plan, mb_template)
        self.prevs = schedule.prevs(plan, rank)
        self.next = self.stage["next"]
        self.flows = self.needs[self.lids[-1]]  # a gradient flows through this stage's output
        self.in_flows = {p: self.needs[tuple(plan[p]["layers"][-1])] for p in self.prevs}
        for lid in model.layer_ids():  # other stages' weights released (meta), this stage's placed
            model.layer(lid).to(self.device if lid in self.lids else "meta")
        self.params = stage_parameters(model, self.stage)
        self.timeline: list[tuple[str, int, float, float]] = []
        self._pending: list = []

    def _recv_acts(self) -> dict:
        acts = {}
        for p in self.prevs:
            for key, (shape, dtype) in self.shapes[p].items():
                t = torch.empty(shape, dtype=dtype, device=self.device)
                dist.recv(t, src=p)
                acts[key] = t.requires_grad_(self.in_flows[p] and t.is_floating_point())
        return acts

    def _send(self, tensors, dst):
        for t in tensors:
            t = t.detach().contiguous()
            self._pending.append((dist.isend(t, dst=dst), t))

    def state(self) -> dict[str, torch.Tensor]:
        """The stage's trained weights (its layers' parameters and buffers), on the CPU."""
        prefixes = stage_prefixes(self.stage)
        return {
            n: t.detach().cpu().contiguous()
            for n, t in self.model.state_dict().items()
            if n.startswith(prefixes)
        }

    def run(self, batch: dict, m: int) -> torch.Tensor | None:
        """One training iteration's forward/backward over `m` microbatches; the loss on the last stage."""
        mbs = [{k: v.to(self.device) for k, v in mb.items()} for mb in microbatches(batch, m)]
        saved: dict[int, tuple[dict, dict]] = {}
        losses = []
        synchronize(self.device)
        t0 = time.perf_counter()
        for op, i in schedule.ops(self.plan, self.rank, m, self.flows):
            if op == "F":
                inputs = self._recv_acts()
                synchronize(self.device)
                start = time.perf_counter() - t0  # compute starts once the inputs are in
                outputs = self.model.run_layers(self.lids, dict(inputs), mbs[i], self.needs)
                if self.next is None:
                    losses.append(outputs["loss"].detach())
                else:
                    self._send([outputs[k] for k in sorted(outputs)], self.next)
                if self.flows:
                    saved[i] = (inputs, outputs)
            else:
                inputs, outputs = saved.pop(i)
                grads = []
                if self.next is not None:
                    for k in sorted(outputs):
                        g = torch.empty_like(outputs[k])
                        dist.recv(g, src=self.next)
                        grads.append(g)
                synchronize(self.device)
                start = time.perf_counter() - t0
                if self.next is None:
                    (outputs["loss"] / m).backward()
                else:
                    outs = [outputs[k] for k in sorted(outputs)]
                    pairs = [(o, g) for o, g in zip(outs, grads, strict=True) if o.requires_grad]
                    torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
                for p in self.prevs:
                    if self.in_flows[p]:
                        self._send(
                            [
                                inputs[k].grad if inputs[k].grad is not None else torch.zeros_like(inputs[k])
                                for k in self.shapes[p]
                            ],
                            p,
                        )
            synchronize(self.device)
            self.timeline.append((op, i, start, time.perf_counter() - t0))
        for req, _ in self._pending:
            req.wait()
        self._pending.clear()
        return sum(losses) / m if losses else None  # a tensor on the device: the caller reads it


def reference_step(model: MLLM, batch: dict, m: int) -> float:
    """Single-process gradient accumulation over the same microbatches (the equality reference)."""
    total = 0.0
    for mb in microbatches(batch, m):
        loss = model(mb)
        (loss / m).backward()
        total += float(loss.detach())
    return total / m
