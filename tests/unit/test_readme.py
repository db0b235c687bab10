"""The README documents what the code does: every setting, every registered service."""
from __future__ import annotations

from paperworks.shared.config import Settings
from paperworks.shared.devstack.deploy import ROOT
from paperworks.shared.registry import services

README = (ROOT / "README.md").read_text()


def test_every_setting_is_documented():
    for name in Settings.model_fields:
        assert f"`PAPERWORKS_{name.upper()}`" in README, f"PAPERWORKS_{name.upper()} missing"


def test_every_service_is_in_the_table_and_has_a_readme():
    for name in services():
        assert f"\n| {name} |" in README, (
            f"add a row `| {name} | <methods (papers)> | <jobs> | <sync RPCs> | <status> |` to the "
            "services table in README.md (services/README.md step 9)")
        assert (ROOT / "services" / name / "README.md").exists(), (
            f"services/{name}/README.md is missing: write the service's manual (services/README.md step 9)")


def test_the_two_commands_are_there():
    assert "make demo" in README and "make test" in README
