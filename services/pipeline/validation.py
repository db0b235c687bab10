"""A pipeline checked whole before anything is written: its shape (`spec.RunParams`), the DAG
(names, references, cycles: `dag.parse`), each step's service and kind, each reference against
what its producer declares, and each step's own parameters, asked of the step's service through
`JobService.ValidateJob` (no job is created). Every refusal names the request field:
`steps[2].params.bits`, `steps[1].service`, `steps[3].params.model.source.from`.
"""
from __future__ import annotations

import grpc
from paperworks.services.pipeline.calls import TenantClient, unreachable
from paperworks.services.pipeline.dag import Dag, DagError, parse, placeholders
from paperworks.services.pipeline.dag.graph import StepNode, param_field
from paperworks.services.pipeline.spec import RunParams
from paperworks.shared import registry
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, NotFound, PaperworksError
from paperworks.shared.sdk.errors import field_violations

BY_CODE = {grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument, grpc.StatusCode.NOT_FOUND: NotFound,
           grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition}


def renamed_pydantic(exc: InvalidArgument) -> InvalidArgument:
    """`steps.2.params` (pydantic's path) as `steps[2].params`, the form every refusal uses."""
    def rename(field: str) -> str:
        head, _, rest = field.partition(".")
        index, _, tail = rest.partition(".")
        if head == "steps" and index.isdigit():
            return f"steps[{index}]" + (f".{tail}" if tail else "")
        return field

    violations = [(rename(f), d) for f, d in exc.violations]
    return InvalidArgument(violations[0][0], violations[0][1], violations)


def structure(params: RunParams) -> Dag:
    """The DAG, its services, kinds and references checked against the registry (no calls)."""
    try:
        dag = parse([s.model_dump() for s in params.steps])
    except DagError as exc:
        raise InvalidArgument(exc.field, exc.message) from None
    specs = registry.services()
    for node in dag.steps:
        if node.service == "pipeline":
            raise InvalidArgument(f"{node.where}.service", "a step cannot be a pipeline (nest the steps)")
        if node.service not in specs:
            raise InvalidArgument(f"{node.where}.service", f"no service {node.service!r} (known: "
                                  f"{', '.join(s for s in specs if s != 'pipeline')})")
        kinds = specs[node.service].kinds
        if node.kind not in kinds:
            raise InvalidArgument(f"{node.where}.kind", f"service {node.service!r} has no job kind "
                                  f"{node.kind!r} (known: {', '.join(sorted(kinds))})")
    by_name = dag.by_name
    for node in dag.steps:
        for ref in node.refs:
            producer = by_name[ref.step]
            declared = specs[producer.service].kinds[producer.kind]
            where = param_field(node, ref.path)
            if ref.output == "result" and declared.result:
                key = ref.name.split(".")[0]
                if key not in declared.result:
                    raise InvalidArgument(f"{where}.result", f"a {producer.service} {producer.kind} result "
                                          f"has no {key!r} (it has: {', '.join(declared.result)})")
            names = getattr(declared, "artifacts", None)  # where a kind declares its artifacts
            if ref.output == "artifact" and names and ref.name not in names:
                raise InvalidArgument(f"{where}.artifact", f"a {producer.service} {producer.kind} job "
                                      f"stores no artifact {ref.name!r} (it stores: {', '.join(names)})")
    return dag


def step_params(client: TenantClient, dag: Dag) -> None:
    """Each step's parameters validated by its own service, references standing in by shape."""
    producers = {s.name: s.service for s in dag.steps}
    for node in dag.steps:
        check_step(client, node, producers)


def check_step(client: TenantClient, node: StepNode, producers: dict[str, str]) -> None:
    filled, deferred, unknown = placeholders(node.params, producers)
    try:
        client.validate_job(node.service, node.kind, filled, sorted(deferred))
    except grpc.RpcError as exc:
        if unreachable(exc):
            raise FailedPrecondition(f"service {node.service!r} did not answer: {exc.details()}",
                                     f"{node.where}.service") from None
        violations = [(f, d) for f, d in field_violations(exc) if not _under(f, unknown)]
        if not violations and field_violations(exc):
            return  # only fields a result reference fills at run time were missing
        if not violations:
            violations = [("", exc.details() or exc.code().name)]
        named = [(param_field(node, f) if f not in ("", "request") else f"{node.where}.params", d)
                 for f, d in violations]
        error = BY_CODE.get(exc.code())
        if error is InvalidArgument:
            raise InvalidArgument(named[0][0], named[0][1], named) from None
        if error is not None:
            raise error(named[0][1], named[0][0]) from None
        raise FailedPrecondition(f"service {node.service!r} refused to validate the step: "
                                 f"{exc.code().name} {exc.details()}", f"{node.where}.service") from None
    except PaperworksError as exc:  # no endpoint known for the service
        raise FailedPrecondition(f"service {node.service!r} is not reachable from the pipeline: "
                                 f"{exc.message}", f"{node.where}.service") from None


def _under(field: str, paths: set[str]) -> bool:
    return any(field == p or field.startswith(f"{p}.") for p in paths)


def validate_run(params: RunParams, tenant: str) -> Dag:
    dag = structure(params)
    with TenantClient(tenant) as client:
        step_params(client, dag)
    return dag
