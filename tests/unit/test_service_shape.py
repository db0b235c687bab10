"""Every service folder has the one shape (services/README.md step 2): the same six files (data.py
may grow into a data/ package), its
method code in subpackages the import contract covers, and no experiment drivers inside."""
from __future__ import annotations

import tomllib

from paperworks.shared.devstack.deploy import ROOT
from paperworks.shared.registry import services

FILES = ("spec.py", "servicer.py", "tasks.py", "data.py", "demo.py", "README.md")


def method_packages() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if c["name"].startswith("method subpackages")]
    return set(contract["source_modules"])


def test_every_service_has_the_one_shape():
    for name in services():
        folder = ROOT / "services" / name
        missing = [f for f in FILES if not (folder / f).exists()
                   and not (f == "data.py" and (folder / "data" / "__init__.py").exists())]
        assert not missing, f"services/{name} lacks {missing} (services/README.md step 2)"
        assert not (folder / "experiments.py").exists(), (
            f"services/{name}/experiments.py: experiment drivers live in tests/reproduction/{name}/")
        readme = (folder / "README.md").read_text().splitlines()
        assert len(readme) <= 130, (f"services/{name}/README.md has {len(readme)} lines: a manual of about "
                                    f"a page; logs go to docs/reproductions/{name}.md")


def test_every_service_has_a_method_subpackage_under_the_import_contract():
    covered = method_packages()
    for name in services():
        mine = [m for m in covered if m.startswith(f"paperworks.services.{name}.")]
        assert mine, (f"no method subpackage of {name} in pyproject's 'method subpackages' import "
                      f"contract (services/README.md step 12)")
        for module in mine:
            folder = ROOT / "services" / name / module.rsplit(".", 1)[1]
            assert (folder / "__init__.py").exists(), f"{module} is not a package"


def test_every_job_kind_says_what_its_result_means():
    """`paperworks describe SERVICE KIND` prints a legend of the result's keys (services/README.md
    step 2): a user reads units and meanings there, not in the code."""
    for name, spec in services().items():
        for kind in spec.kinds.values():
            assert kind.result and all(kind.result.values()), (
                f"{name} {kind.name}: JobKind(result=...) names no result key with its meaning and unit")
