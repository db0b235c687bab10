"""DescribeService: a service's job kinds and sync RPCs, from the schema the server validates with.

The parameters' JSON Schema is the pydantic model `Submit<Kind>` validates against, so what
`paperworks describe` shows cannot drift from what the server accepts. RPC descriptions are the
servicer methods' docstrings.
"""
from __future__ import annotations

import importlib
import inspect
import json

from paperworks.shared.registry import ServiceSpec, load
from paperworks.v1 import jobs_pb2


def describe(spec: ServiceSpec) -> jobs_pb2.DescribeServiceResponse:
    pb2 = importlib.import_module(spec.grpc_module.removesuffix("_grpc"))
    service = pb2.DESCRIPTOR.services_by_name[spec.grpc_service]
    servicer = load(spec.servicer)
    submit_rpcs = {kind.submit_rpc for kind in spec.kinds.values()}
    kinds = [
        jobs_pb2.JobKindInfo(name=kind.name, description=kind.description, submit_rpc=kind.submit_rpc,
                             params_schema_json=json.dumps(kind.params.model_json_schema()),
                             result_legend=kind.result)
        for kind in spec.kinds.values()
    ]
    rpcs = [
        jobs_pb2.RpcInfo(
            name=m.name, request_type=m.input_type.full_name, response_type=m.output_type.full_name,
            client_streaming=m.client_streaming, server_streaming=m.server_streaming,
            description=inspect.getdoc(getattr(servicer, m.name, None)) or "",
        )
        for m in service.methods if m.name not in submit_rpcs
    ]
    return jobs_pb2.DescribeServiceResponse(service=spec.name, description=spec.description, kinds=kinds,
                                            rpcs=rpcs)
