"""The router's jobs: run a pipeline, store the policy, its report and plot; return a summary."""

from __future__ import annotations

from paperworks.services.router.pipelines import TrainedPolicy, train_decider, train_rejector
from paperworks.services.router.policy import FILE_NAME, dump_policy
from paperworks.services.router.spec import TrainDeciderParams, TrainRejectorParams
from paperworks.shared.backends import BackendError
from paperworks.shared.errors import FailedPrecondition, InvalidArgument
from paperworks.shared.tasks.context import JobContext
from paperworks.shared.tasks.runner import TransientError


def run_train_rejector(params: TrainRejectorParams, ctx: JobContext) -> dict:
    return _store(_guarded(lambda: train_rejector(params, _progress(ctx))), ctx)


def run_train_decider(params: TrainDeciderParams, ctx: JobContext) -> dict:
    return _store(_guarded(lambda: train_decider(params, _progress(ctx), ctx.load_announced_model)), ctx)


def _progress(ctx: JobContext):
    def report(step: int, total: int, stage: str, message: str) -> None:
        ctx.progress(step, total, stage=stage, message=message)

    return report


def _guarded(run) -> TrainedPolicy:
    """Backend failures become the platform's errors: retryable ones (a remote down, too slow)
    are retried by the runner, the rest fail the job with the backend's precise message."""
    try:
        return run()
    except BackendError as exc:
        if exc.retryable:
            raise TransientError(exc.message) from exc
        if exc.grpc_code_name == "INVALID_ARGUMENT":
            raise InvalidArgument(exc.field or "model", exc.message) from exc
        raise FailedPrecondition(exc.message) from exc


def _store(trained: TrainedPolicy, ctx: JobContext) -> dict:
    policy = ctx.put_artifact(
        FILE_NAME, dump_policy(trained.meta, trained.tensors), "application/octet-stream"
    )
    ctx.put_json("report.json", trained.report)
    ctx.put_artifact("curves.png", trained.png, "image/png")
    ctx.announce_model(policy, f"{trained.meta['kind']} routing policy (load it with Route)")
    return {"kind": trained.meta["kind"], "policy_sha256": policy["sha256"], **trained.summary}
