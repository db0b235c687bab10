"""The services paperworks runs, discovered from services/<name>/spec.py.

A spec is plain data naming import paths, so the CLI, the stack launcher and
the dispatcher can list services and job kinds without importing any method
code (torch, models); workers import a kind's handler only when it runs.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import lru_cache

import paperworks.services
from pydantic import BaseModel


@dataclass(frozen=True)
class JobKind:
    name: str
    params: type[BaseModel]
    handler: str  # "module:function", called as function(params, ctx) -> dict
    submit_rpc: str  # the service's Submit<Kind> method name
    description: str = ""
    # the result's keys, each with what it means and its unit (`paperworks describe`)
    result: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    description: str
    servicer: str  # "module:Class", constructed with (runtime)
    grpc_module: str  # the *_pb2_grpc module holding the stub and add_*_to_server
    grpc_service: str  # the proto service's short name, e.g. "OpsService"
    kinds: dict[str, JobKind] = field(default_factory=dict)
    # "module:function" turning a model this service's job announced (MODEL_READY) into a
    # language-model backend for other services, called as function(job, artifact, scope, field) with
    # scope the producing job's InputScope (its tenant's uploads and artifacts)
    model_loader: str | None = None
    # the host port Compose publishes this service's gRPC server on (`<port>:50051`), fixed for
    # good so adding a service never moves another's; taken in order of addition from 50051 (the
    # next free one is in services/README.md). None is refused by `make deploy-files` and test_deploy.
    port: int | None = None
    # the shared kernel ops (paperworks.kernels.ops) the service's methods call: its processes
    # report which backend runs each (`paperworks status`, /metrics)
    kernel_ops: tuple[str, ...] = ()

    @property
    def package(self) -> str:
        return self.grpc_module.rsplit(".", 1)[0]

    def kind(self, name: str) -> JobKind:
        from paperworks.shared.errors import InvalidArgument

        if name not in self.kinds:
            known = ", ".join(sorted(self.kinds))
            raise InvalidArgument("kind", f"service {self.name!r} has no job kind {name!r} "
                                  f"(known: {known})")
        return self.kinds[name]


def load(path: str):
    """Imports 'module:attr'."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


@lru_cache(maxsize=1)
def services() -> dict[str, ServiceSpec]:
    found = {}
    for info in pkgutil.iter_modules(paperworks.services.__path__):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"paperworks.services.{info.name}.spec")
        except ModuleNotFoundError as exc:
            if exc.name == f"paperworks.services.{info.name}.spec":
                continue
            raise
        spec: ServiceSpec = module.SPEC
        found[spec.name] = spec
    return dict(sorted(found.items()))


def service(name: str) -> ServiceSpec:
    from paperworks.shared.errors import NotFound

    specs = services()
    if name not in specs:
        raise NotFound(f"no service {name!r} (known: {', '.join(specs)})", "service")
    return specs[name]
