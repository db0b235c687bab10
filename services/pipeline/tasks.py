"""The run job: the pipeline's steps submitted and followed to the end (`engine.PipelineRun`),
acting for the pipeline's tenant with the operator's internal credential (`calls.TenantClient`)."""
from __future__ import annotations

from paperworks.services.pipeline.calls import TenantClient
from paperworks.services.pipeline.engine import PipelineRun
from paperworks.services.pipeline.events import StepEvents
from paperworks.services.pipeline.spec import RunParams
from paperworks.shared.config import get_settings
from paperworks.shared.tasks.context import JobContext


def run_run(params: RunParams, ctx: JobContext) -> dict:
    settings = get_settings()
    events = StepEvents(settings, ctx.job_id)
    try:
        with TenantClient(ctx.tenant, parent=ctx.job_id, settings=settings) as client:
            return PipelineRun(ctx, params, client, events).run()
    finally:
        events.close()
