"""The one data-root guard: a server path is refused outside PAPERWORKS_<SERVICE>_DATA_ROOT when
that is set, naming the field; `..` and symlinks cannot step out of it."""
from __future__ import annotations

import pytest
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import server_path


def test_paths_are_free_without_a_root_and_confined_with_one(tmp_path, monkeypatch):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    (root / "escape").symlink_to(outside)
    monkeypatch.delenv("PAPERWORKS_URBAN_DATA_ROOT", raising=False)
    assert server_path(str(outside), "urban", "dataset.path") == outside.resolve()

    monkeypatch.setenv("PAPERWORKS_URBAN_DATA_ROOT", str(root))
    assert server_path(str(root / "city"), "urban", "dataset.path") == (root / "city").resolve()
    for sneaky in (outside, root / ".." / "outside", root / "escape" / "x"):
        with pytest.raises(InvalidArgument) as exc:
            server_path(str(sneaky), "urban", "dataset.path")
        assert exc.value.field == "dataset.path" and "PAPERWORKS_URBAN_DATA_ROOT" in exc.value.message
    # another service's root does not confine this one
    assert server_path(str(outside), "router", "local.model.path") == outside.resolve()


def test_a_path_the_os_cannot_take_is_refused_naming_the_field():
    for bad in ("a\0b", "~no-such-user-here/x", "x" * 5000):
        with pytest.raises(InvalidArgument) as exc:
            server_path(bad, "quantizer", "model.path")
        assert exc.value.field == "model.path"
