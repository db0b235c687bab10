"""Security of the gRPC surface: TLS and mutual TLS from settings, hashed tokens,
per-tenant quotas, per-tenant artifact access, and no unpickling of user files."""
from __future__ import annotations

import datetime
import ipaddress
import re
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fuzz.inprocess import InProcessServers, settings_for
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from paperworks.shared.config import Settings
from paperworks.shared.db.models import Job
from paperworks.shared.devstack.deploy import ROOT
from paperworks.shared.rpc.auth import Authenticator, hash_token
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.rpc.tls import TLSConfigError, channel_credentials, server_credentials
from paperworks.shared.sdk.client import Client
from paperworks.v1 import jobs_pb2, jobs_pb2_grpc
from support import TOKENS, chain, start_stack

# --- certificates -------------------------------------------------------------------------


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: Path, cert: x509.Certificate, key) -> tuple[Path, Path]:
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    path.with_suffix(".key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path.with_suffix(".crt"), path.with_suffix(".key")


def make_ca(folder: Path, cn: str):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    _write(folder / cn, cert, key)
    return cert, key


def issue(folder: Path, ca, cn: str, server: bool) -> tuple[Path, Path]:
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1)))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return _write(folder / cn, builder.sign(ca_key, hashes.SHA256()), key)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pki")
    ca, rogue = make_ca(folder, "paperworks-ca"), make_ca(folder, "rogue-ca")
    server_crt, server_key = issue(folder, ca, "server", server=True)
    client_crt, client_key = issue(folder, ca, "client", server=False)
    rogue_crt, rogue_key = issue(folder, rogue, "rogue-client", server=False)
    return {"ca": folder / "paperworks-ca.crt", "rogue_ca": folder / "rogue-ca.crt",
            "server_crt": server_crt, "server_key": server_key,
            "client_crt": client_crt, "client_key": client_key,
            "rogue_crt": rogue_crt, "rogue_key": rogue_key}


# --- TLS ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mtls_stack(tmp_path_factory, pki):
    """The real stack (broker, dispatcher, worker processes) with servers on mutual TLS."""
    stack = start_stack(
        tmp_path_factory.mktemp("mtls"),
        PAPERWORKS_TLS_CERT_FILE=str(pki["server_crt"]),
        PAPERWORKS_TLS_KEY_FILE=str(pki["server_key"]),
        PAPERWORKS_TLS_CLIENT_CA_FILE=str(pki["ca"]),
    )
    yield stack
    stack.down()


def tls_client(stack, pki, ca="ca", cert: str | None = "client") -> Client:
    settings = Settings(
        state_dir=Path("/nonexistent"), tls_ca_file=pki[ca],
        tls_client_cert_file=pki[f"{cert}_crt"] if cert else None,
        tls_client_key_file=pki[f"{cert}_key"] if cert else None,
    )
    return Client(endpoints=stack.endpoints, token=TOKENS["alice"], settings=settings)


def test_a_job_runs_end_to_end_over_mutual_tls(mtls_stack, pki):
    with tls_client(mtls_stack, pki) as c:
        job = c.submit("ops", "digest", seed=4, steps=2, rounds_per_step=10)
        done = c.wait(job.id, timeout=120)
    assert PROTO_TO_STATE[done.state] == "SUCCEEDED"
    assert done.result["digest"] == chain(4, 2, 10)[-1]


@pytest.mark.parametrize("who", ["plaintext", "no client certificate", "certificate of another CA",
                                 "server not verified"])
def test_mutual_tls_refuses_every_other_client(mtls_stack, pki, who):
    if who == "plaintext":
        ch = grpc.insecure_channel(mtls_stack.endpoints["ops"])
        call = lambda: jobs_pb2_grpc.JobServiceStub(ch).ListJobs(  # noqa: E731
            jobs_pb2.ListJobsRequest(), metadata=(("authorization", "Bearer alice-token"),),
            timeout=5)
    else:
        ca, cert = {"no client certificate": ("ca", None),
                    "certificate of another CA": ("ca", "rogue"),
                    "server not verified": ("rogue_ca", "client")}[who]
        client = tls_client(mtls_stack, pki, ca, cert)
        call = lambda: client.list("ops")  # noqa: E731
    with pytest.raises(grpc.RpcError) as exc:
        call()
    assert exc.value.code() == grpc.StatusCode.UNAVAILABLE


def test_probe_and_status_speak_tls_from_the_settings(mtls_stack, pki):
    env = {**mtls_stack.state.env, "PAPERWORKS_TLS_CA_FILE": str(pki["ca"]),
           "PAPERWORKS_TLS_CLIENT_CERT_FILE": str(pki["client_crt"]),
           "PAPERWORKS_TLS_CLIENT_KEY_FILE": str(pki["client_key"])}
    probe = [sys.executable, "-m", "paperworks.shared.sdk.cli", "probe", mtls_stack.endpoints["ops"]]
    ok = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "SERVING" in ok.stdout, ok.stdout + ok.stderr
    without = {k: v for k, v in env.items() if not k.startswith("PAPERWORKS_TLS_CLIENT")}
    refused = subprocess.run(probe, env=without, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "UNAVAILABLE" in refused.stdout


@pytest.mark.parametrize("values, named", [
    ({"tls_cert_file": "x.crt"}, "PAPERWORKS_TLS_KEY_FILE"),
    ({"tls_key_file": "x.key"}, "PAPERWORKS_TLS_CERT_FILE"),
    ({"tls_client_ca_file": "ca.crt"}, "PAPERWORKS_TLS_CLIENT_CA_FILE"),
    ({"tls_cert_file": "/missing.crt", "tls_key_file": "/missing.key"}, "PAPERWORKS_TLS_CERT_FILE"),
])
def test_server_tls_settings_that_cannot_work_fail_naming_the_setting(values, named):
    with pytest.raises(TLSConfigError, match=named):
        server_credentials(Settings(**values))


def test_client_certificate_without_a_ca_fails_naming_the_setting():
    with pytest.raises(TLSConfigError, match="PAPERWORKS_TLS_CA_FILE"):
        channel_credentials(Settings(tls_client_cert_file="c.crt", tls_client_key_file="c.key"))
    assert channel_credentials(Settings()) is None and server_credentials(Settings()) is None


# --- tokens -----------------------------------------------------------------------------------


def test_tokens_are_kept_only_as_hashes():
    auth = Authenticator(f"alice:alice-token,bob:sha256:{hash_token('bob-token')}")
    assert auth.tenant_for([("authorization", "Bearer alice-token")]) == "alice"
    assert auth.tenant_for([("authorization", "Bearer bob-token")]) == "bob"
    assert auth.tenant_for([("authorization", f"Bearer {hash_token('bob-token')}")]) is None
    assert "alice-token" not in repr(vars(auth)) and "bob-token" not in repr(vars(auth))


# --- quotas -----------------------------------------------------------------------------------


@pytest.fixture
def quota_servers(tmp_path):
    servers = InProcessServers(
        settings_for(tmp_path, max_queued_jobs_per_tenant=3, max_active_jobs_per_tenant=4), ["ops"])
    yield servers
    servers.close()


def job_count(servers, tenant: str) -> int:
    with servers.runtimes["ops"].db.read() as s:
        return s.query(Job).filter(Job.tenant == tenant).count()


def test_queued_quota_is_resource_exhausted_and_writes_nothing(quota_servers):
    with Client(endpoints=quota_servers.endpoints, token="alice-token") as alice:
        first = alice.submit("ops", "digest", seed=0, steps=1, rounds_per_step=1,
                             idempotency_key="k0")
        for i in (1, 2):
            alice.submit("ops", "digest", seed=i, steps=1, rounds_per_step=1)
        with pytest.raises(grpc.RpcError) as exc:
            alice.submit("ops", "digest", seed=9, steps=1, rounds_per_step=1)
        assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "PAPERWORKS_MAX_QUEUED_JOBS_PER_TENANT=3" in exc.value.details()
        [detail] = rpc_status.from_call(exc.value).details
        quota = error_details_pb2.QuotaFailure()
        assert detail.Unpack(quota) and quota.violations[0].subject == "tenant:alice/service:ops"
        assert job_count(quota_servers, "alice") == 3
        again = alice.submit("ops", "digest", seed=0, steps=1, rounds_per_step=1,
                             idempotency_key="k0")
        assert again.id == first.id  # a resubmission is not a new job: answered at the limit
    with Client(endpoints=quota_servers.endpoints, token="bob-token") as bob:
        bob.submit("ops", "digest", seed=1, steps=1, rounds_per_step=1)  # quotas are per tenant


def test_active_quota_counts_running_jobs(quota_servers):
    store = quota_servers.runtimes["ops"].store
    with Client(endpoints=quota_servers.endpoints, token="alice-token") as alice:
        jobs = [alice.submit("ops", "digest", seed=i, steps=1, rounds_per_step=1) for i in range(3)]
        for job in jobs[:2]:
            store.acquire(job.id, lease_s=60, max_attempts=5)  # two RUNNING, one QUEUED
        alice.submit("ops", "digest", seed=3, steps=1, rounds_per_step=1)  # 2 queued + 2 running
        with pytest.raises(grpc.RpcError) as exc:
            alice.submit("ops", "digest", seed=4, steps=1, rounds_per_step=1)
        assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "PAPERWORKS_MAX_ACTIVE_JOBS_PER_TENANT=4" in exc.value.details()
        assert job_count(quota_servers, "alice") == 4


# --- artifacts --------------------------------------------------------------------------------


def test_an_artifact_is_reachable_only_through_its_owners_job(quota_servers):
    rt = quota_servers.runtimes["ops"]
    with Client(endpoints=quota_servers.endpoints, token="alice-token") as alice, \
            Client(endpoints=quota_servers.endpoints, token="bob-token") as bob:
        secret = alice.submit("ops", "digest", seed=1, steps=1, rounds_per_step=1)
        claim = rt.store.acquire(secret.id, lease_s=60, max_attempts=5)
        data = b"alice's private result"
        sha = rt.artifacts.put(data)
        rt.store.attach_artifact(secret.id, claim.token, "result.bin", sha, "application/octet-stream",
                                 len(data))
        pulled = alice.pull_artifact(secret.id, sha, quota_servers.settings.state_dir / "a")
        assert pulled.read_bytes() == data
        own = bob.submit("ops", "digest", seed=2, steps=1, rounds_per_step=1)
        for job_id in (secret.id, own.id):  # neither her job nor his own job with her hash
            with pytest.raises(grpc.RpcError) as exc:
                bob.pull_artifact(job_id, sha, quota_servers.settings.state_dir / "b")
            assert exc.value.code() == grpc.StatusCode.NOT_FOUND


# --- no unpickling --------------------------------------------------------------------------------

UNPICKLING = [
    (re.compile(r"\bpickle\.loads?\("), "pickle.load"),
    (re.compile(r"\bjoblib\.load\("), "joblib.load"),
    (re.compile(r"allow_pickle\s*=\s*True"), "np.load(allow_pickle=True)"),
    (re.compile(r"\btorch\.load\((?![^)]*weights_only\s*=\s*True)"), "torch.load without weights_only=True"),
]


def test_no_code_path_unpickles_a_file():
    found = []
    for folder in ("shared", "services", "kernels"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            found += [f"{path.relative_to(ROOT)}: {what}" for pattern, what in UNPICKLING
                      if pattern.search(text)]
    assert not found, found
