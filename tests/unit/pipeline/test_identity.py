"""Service-to-service identity: the tenant and pipeline headers count only with the operator's
internal credential; a tenant's own token never speaks for another tenant."""
from __future__ import annotations

from paperworks.shared.rpc.auth import DEV_TENANT, PARENT_HEADER, TENANT_HEADER, Authenticator

INTERNAL = "operator-internal"


def meta(token, tenant=None, parent=None):
    m = [("authorization", f"Bearer {token}")]
    if tenant is not None:
        m.append((TENANT_HEADER, tenant))
    if parent is not None:
        m.append((PARENT_HEADER, parent))
    return tuple(m)


def test_the_internal_credential_acts_for_the_tenant_it_names_and_links_the_parent():
    auth = Authenticator("alice:a-token,bob:b-token", INTERNAL)
    assert auth.tenant_for(meta(INTERNAL, "bob", "pipeline-1")) == "bob"
    assert auth.parent_for(meta(INTERNAL, "bob", "pipeline-1")) == "pipeline-1"
    assert auth.tenant_for(meta(INTERNAL)) is None  # it must name a tenant
    assert auth.tenant_for(meta(INTERNAL, "x" * 129)) is None


def test_a_tenant_token_cannot_borrow_the_headers():
    auth = Authenticator("alice:a-token,bob:b-token", INTERNAL)
    assert auth.tenant_for(meta("a-token", "bob", "pipeline-1")) == "alice"
    assert auth.parent_for(meta("a-token", "bob", "pipeline-1")) is None
    assert auth.tenant_for(meta("wrong", "bob")) is None


def test_without_an_internal_credential_no_call_is_internal():
    auth = Authenticator("alice:a-token")
    assert auth.tenant_for(meta("", "bob", "p")) is None
    assert auth.parent_for(meta("a-token", "bob", "p")) is None
    dev = Authenticator("")
    assert dev.tenant_for(meta("anything", "bob", "p")) == DEV_TENANT
    assert dev.parent_for(meta("x", "b", "p")) is None
    dev_internal = Authenticator("", INTERNAL)
    assert dev_internal.tenant_for(meta(INTERNAL, "bob", "p")) == "bob"
    assert dev_internal.parent_for(meta(INTERNAL, "bob", "p")) == "p"
