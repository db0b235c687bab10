"""The import contracts in pyproject.toml hold, and they would catch a breach."""
from __future__ import annotations

import pytest
from paperworks.shared.devstack.import_contracts import assemble, check, lint


def test_the_tree_keeps_every_import_contract():
    result = check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("module, source, contract", [
    ("services/ops/spy.py", "import paperworks.services.bias.spec\n", "never import other services"),
    ("shared/db/spy.py", "import paperworks.services.ops.tasks\n", "runtime never imports services"),
    ("shared/sdk/spy.py", "import sqlalchemy\n", "light client"),
    ("shared/sdk/spy2.py", "from paperworks.shared.db import jobs\n", "light client"),
    ("services/quantizer/rabit/spy.py", "from paperworks.shared import errors\n", "method subpackages"),
    ("services/router/mild/spy.py", "import paperworks.shared.tasks.context\n", "method subpackages"),
])
def test_a_breach_is_reported_by_its_contract(tmp_path, module, source, contract):
    package = assemble(tmp_path)
    (package / module).write_text(source)
    result = lint(tmp_path)
    assert result.returncode != 0
    broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]
    assert any(contract in line for line in broken), result.stdout
