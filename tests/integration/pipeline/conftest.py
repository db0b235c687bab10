"""One embedded stack for the pipeline tests: the pipeline service and the services its examples
chain, with the operator's internal credential the pipeline acts for tenants with."""
from __future__ import annotations

import pytest
from support import TOKENS, start_stack

INTERNAL_TOKEN = "pipeline-tests-internal-credential"
SERVICES = ("pipeline", "ops", "segmenter", "clip", "moe", "quantizer", "router")


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    s = start_stack(tmp_path_factory.mktemp("pipeline-stack"), services=SERVICES,
                    PAPERWORKS_INTERNAL_TOKEN=INTERNAL_TOKEN)
    yield s
    s.down()


@pytest.fixture(scope="package")
def client(stack):
    from paperworks.shared.sdk.client import Client

    with Client(endpoints=stack.endpoints, token=TOKENS["alice"]) as c:
        yield c
