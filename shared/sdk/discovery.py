"""Services and job kinds, read from the generated stubs alone.

A client knows a service by its proto package (`paperworks.<service>.v1`, file `<service>.proto`)
and a job kind by its `Submit<Kind>` RPC (kind `train_decider` <-> `SubmitTrainDecider`), so the
SDK needs neither the server's registry nor any method code to build a typed request.
"""
from __future__ import annotations

import importlib
import re
from functools import cache

from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from paperworks.shared.errors import InvalidArgument, NotFound

SUBMIT = "Submit"


def kind_name(rpc: str) -> str:
    """`SubmitEvaluateMCQ` -> `evaluate_mcq`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", rpc.removeprefix(SUBMIT)).lower()


def _module(service: str, suffix: str):
    try:
        return importlib.import_module(f"paperworks.{service}.v1.{service}_{suffix}")
    except ModuleNotFoundError:
        raise NotFound(f"no service {service!r}: no paperworks.{service}.v1 stubs", "service") from None


@cache
def service_descriptor(service: str) -> ServiceDescriptor:
    descriptors = list(_module(service, "pb2").DESCRIPTOR.services_by_name.values())
    if len(descriptors) != 1:
        raise NotFound(f"{service}.proto declares {len(descriptors)} services, not one", "service")
    return descriptors[0]


def kinds(service: str) -> dict[str, MethodDescriptor]:
    """The service's job kinds, each with its Submit RPC's descriptor."""
    return {kind_name(m.name): m for m in service_descriptor(service).methods if m.name.startswith(SUBMIT)}


def submit_method(service: str, kind: str) -> MethodDescriptor:
    found = kinds(service)
    if kind not in found:
        raise InvalidArgument("kind", f"service {service!r} has no job kind {kind!r} "
                              f"(known: {', '.join(sorted(found))})")
    return found[kind]


def rpc_method(service: str, name: str) -> MethodDescriptor:
    """One of the service's RPCs by name (a sync call or a Submit)."""
    found = service_descriptor(service).methods_by_name.get(name)
    if found is None:
        names = ", ".join(m.name for m in service_descriptor(service).methods)
        raise InvalidArgument("rpc", f"service {service!r} has no RPC {name!r} (known: {names})")
    return found


def build_request(method: MethodDescriptor, params: dict):
    """The method's typed request from plain parameters; a wrong field or value is named, and an
    enum value that does not exist lists the ones that do."""
    request = message_factory.GetMessageClass(method.input_type)()
    try:
        json_format.ParseDict(params, request)
    except json_format.ParseError as exc:
        raise InvalidArgument("params", _explained(str(exc), method.input_type)) from None
    return request


def submit_request(service: str, kind: str, params: dict):
    """The typed Submit<Kind> request for plain parameters; unknown fields are named."""
    return build_request(submit_method(service, kind), params)


def _explained(message: str, root) -> str:
    found = re.search(r"Invalid enum value (\S+) for enum type (\S+)", message)
    if found:
        enum = root.file.pool.FindEnumTypeByName(found.group(2))
        return f"{message} (allowed: {', '.join(v.name for v in enum.values)})"
    return message


def stub(service: str, channel):
    """The service's own stub on `channel`."""
    return getattr(_module(service, "pb2_grpc"), f"{service_descriptor(service).name}Stub")(channel)
