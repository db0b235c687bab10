"""Fuzzing every RPC of every registered service, found through server reflection.

Each registered service runs its real server (auth, interceptors, servicer,
JobService) in this process on a migrated SQLite database. The test asks each
server's reflection for its services, builds each method's request type from the
returned descriptors, and sends hypothesis-generated requests (every field type,
extremes, NaN, unknown enum values, nested messages, maps) and byte-mutated
copies of them. Every answer must be OK or a precise status with a message:
never INTERNAL or UNKNOWN (a crash), never a dead server; and a rejected request
writes nothing to the database. A new service's RPCs are covered with no edit here; what
they need is step 7 of services/README.md, which every failure message names.
"""
from __future__ import annotations

import grpc
import pytest
from fuzz.inprocess import InProcessServers, settings_for
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor as F
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paperworks.shared.db.models import Artifact, Job, JobArtifact, JobEvent, OutboxMessage
from paperworks.shared.registry import services

EXAMPLES = 10  # per method; each example is one generated and one byte-mutated request
CALL_TIMEOUT_S = 10.0
METADATA = (("authorization", "Bearer alice-token"),)
OPEN = ("grpc.health.v1.", "grpc.reflection.")
PRECISE = {
    grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED,
}
TABLES = (Job, JobEvent, OutboxMessage, Artifact, JobArtifact)
STEP = "services/README.md step 7"

INT_RANGES = {
    F.TYPE_INT32: (-2**31, 2**31 - 1), F.TYPE_SINT32: (-2**31, 2**31 - 1),
    F.TYPE_SFIXED32: (-2**31, 2**31 - 1), F.TYPE_INT64: (-2**63, 2**63 - 1),
    F.TYPE_SINT64: (-2**63, 2**63 - 1), F.TYPE_SFIXED64: (-2**63, 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1), F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1), F.TYPE_FIXED64: (0, 2**64 - 1),
}
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)


def scalar(field) -> st.SearchStrategy:
    if field.type in INT_RANGES:
        lo, hi = INT_RANGES[field.type]
        return st.one_of(st.integers(max(lo, -3), 300), st.sampled_from([lo, hi]),
                         st.integers(lo, hi))
    if field.type in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return st.floats(width=32 if field.type == F.TYPE_FLOAT else 64)
    if field.type == F.TYPE_BOOL:
        return st.booleans()
    if field.type == F.TYPE_STRING:
        return st.one_of(TEXT, st.sampled_from(["ops-", "a" * 300, "../../etc/passwd", "0" * 64]))
    if field.type == F.TYPE_BYTES:
        return st.binary(max_size=64)
    if field.type == F.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values] + [99, -1])
    raise AssertionError(f"unhandled field type {field.type} of {field.full_name}")


def value(field, depth: int) -> st.SearchStrategy:
    if field.type == F.TYPE_MESSAGE:
        return message(field.message_type, depth + 1)
    return scalar(field)


def message(desc, depth: int = 0) -> st.SearchStrategy:
    """Messages of type `desc`: any subset of fields set; nesting stops at depth 3."""
    cls = message_factory.GetMessageClass(desc)
    if depth > 3:
        return st.builds(cls)
    optional = {}
    for field in desc.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key, val = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            optional[field.name] = st.dictionaries(scalar(key), value(val, depth), max_size=3)
        elif field.is_repeated:
            optional[field.name] = st.lists(value(field, depth), max_size=4)
        else:
            optional[field.name] = value(field, depth)
    return st.fixed_dictionaries({}, optional=optional).map(lambda values: build(cls, desc, values))


def build(cls, desc, values: dict):
    msg = cls()
    for name, v in values.items():
        field = desc.fields_by_name[name]
        target = getattr(msg, name) if field.is_repeated else None
        if isinstance(v, dict):
            is_message = field.message_type.fields_by_name["value"].type == F.TYPE_MESSAGE
            for k, item in v.items():
                if is_message:
                    target[k].CopyFrom(item)
                else:
                    target[k] = item
        elif isinstance(v, list):
            for item in v:
                target.add().CopyFrom(item) if field.type == F.TYPE_MESSAGE else target.append(item)
        elif field.type == F.TYPE_MESSAGE:
            getattr(msg, name).CopyFrom(v)
        else:
            setattr(msg, name, v)
    return msg


MUTATIONS = st.lists(
    st.tuples(st.sampled_from(["flip", "insert", "delete", "truncate", "repeat"]),
              st.integers(0, 2**16), st.integers(0, 255)),
    min_size=1, max_size=4)


def mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op, pos, byte in ops:
        at = pos % (len(buf) + 1)
        if op == "flip" and buf:
            buf[at % len(buf)] ^= byte or 0x80
        elif op == "insert":
            buf[at:at] = bytes([byte])
        elif op == "delete" and buf:
            del buf[at % len(buf)]
        elif op == "truncate":
            del buf[at:]
        elif op == "repeat":
            buf += buf[at:]
    return bytes(buf)


@pytest.fixture(scope="module")
def db_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def discover(endpoint: str) -> list[tuple[str, object]]:
    """(path, method descriptor) of every RPC the server's reflection lists."""
    channel = grpc.insecure_channel(endpoint)
    listing = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
    names = [s.name for r in listing for s in r.list_services_response.service]
    pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
    methods = [(f"/{name}/{m.name}", m) for name in names if not name.startswith(OPEN)
               for m in pool.FindServiceByName(name).methods]
    channel.close()
    return methods


def row_counts(db) -> tuple[int, ...]:
    with db.read() as s:
        return tuple(s.query(table).count() for table in TABLES)


def call(channel, path: str, method, data: bytes,
         timeout_s: float = CALL_TIMEOUT_S) -> tuple[grpc.StatusCode, str]:
    kinds = (method.client_streaming, method.server_streaming)
    try:
        if kinds == (False, False):
            channel.unary_unary(path)(data, metadata=METADATA, timeout=timeout_s)
        elif kinds == (False, True):
            for _ in zip(range(50), channel.unary_stream(path)(data, metadata=METADATA,
                                                                timeout=timeout_s),
                         strict=False):
                pass
        elif kinds == (True, False):
            channel.stream_unary(path)(iter([data]), metadata=METADATA, timeout=timeout_s)
        else:
            for _ in zip(range(50), channel.stream_stream(path)(iter([data]), metadata=METADATA,
                                                                 timeout=timeout_s),
                         strict=False):
                pass
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


@pytest.mark.parametrize("name", list(services()))
def test_every_rpc_answers_fuzzed_requests_precisely(db_folder, name):
    servers = InProcessServers(settings_for(db_folder), [name])
    try:
        fuzz(servers.endpoints[name], servers.runtimes[name].db)
    finally:
        servers.close()


def warm(channel, methods) -> None:
    """The first call to a service's own RPC loads its servicer (its method code and torch: many
    seconds on a busy machine); it is made once with a long deadline, so the fuzz's 10 s budget
    measures each answer, not that import. A submit, not a sync RPC: an empty request computes
    nothing (it is refused, or queues a job no worker runs here)."""
    for path, method in methods:
        if path.rsplit("/", 1)[1].startswith("Submit") and not method.client_streaming:
            call(channel, path, method, b"", timeout_s=300)
            return


def fuzz(endpoint: str, db) -> None:
    methods = discover(endpoint)
    assert any(path.startswith("/paperworks.v1.JobService/") for path, _ in methods)
    assert any(not path.startswith("/paperworks.v1.") for path, _ in methods), (
        "the server answers none of its own RPCs: check the spec's servicer, grpc_module and "
        "grpc_service (services/README.md steps 2 and 7)")
    channel = grpc.insecure_channel(endpoint)
    warm(channel, methods)
    seen: dict[str, set] = {}
    for path, method in methods:
        code, details = call(channel, path, method, b"\xff")  # a truncated tag: never parses
        assert code == grpc.StatusCode.INVALID_ARGUMENT and method.input_type.full_name in details, (
            f"{path} answered undecodable bytes with {code.name} ({details}), not INVALID_ARGUMENT "
            f"naming {method.input_type.full_name} ({STEP})")
        fuzz_method(channel, db, path, method, seen)
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    channel.close()
    assert set(seen) == {path for path, _ in methods}


def fuzz_method(channel, db, path: str, method, seen: dict[str, set]) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(request=message(method.input_type), mutations=MUTATIONS)
    def check(request, mutations):
        data = request.SerializeToString()
        for sent in (data, mutate(data, mutations)):
            before = row_counts(db)
            code, details = call(channel, path, method, sent)
            seen.setdefault(path, set()).add(code.name)
            assert code in PRECISE, (
                f"{path} answered {code.name}: {details} to {sent!r}: validate every field and raise "
                f"the platform's errors under @rpc_method, answering within {CALL_TIMEOUT_S:.0f} s ({STEP})")
            assert code == grpc.StatusCode.OK or details, f"{path}: {code.name} without why ({STEP})"
            if code != grpc.StatusCode.OK:
                assert row_counts(db) == before, (
                    f"{path} wrote rows for a rejected request: validate before writing ({STEP})")

    check()
