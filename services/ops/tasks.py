"""The digest job: params -> digest_chain -> result and artifact, one progress report per step
(`ctx` buffers reports and writes at most one per 50 ms; the newest unwritten one goes with the end)."""
from __future__ import annotations

from paperworks.services.ops.digest import digest_chain
from paperworks.services.ops.spec import DigestParams
from paperworks.shared.errors import TransientError
from paperworks.shared.tasks.context import JobContext


def run_digest(params: DigestParams, ctx: JobContext) -> dict:
    def on_step(step: int, _state: str) -> None:
        if step == params.fail_once_at_step and ctx.attempt == 1:
            raise TransientError(f"injected transient failure at step {step}")
        ctx.progress(step, params.steps, stage="hashing", message=f"step {step}/{params.steps}")

    checkpoints = digest_chain(params.seed, params.steps, params.rounds_per_step, on_step)
    ctx.put_json("checkpoints.json", {"seed": params.seed, "checkpoints": checkpoints})
    return {"digest": checkpoints[-1], "steps": params.steps}
