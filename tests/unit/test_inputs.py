"""The one data-root guard: a server path is refused outside PAPERWORKS_<SERVICE>_DATA_ROOT when
that is set, naming the field; `..` and symlinks cannot step out of it."""
from __future__ import annotations

import pytest
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import server_path


def test_paths_are_confined_to_the_data_root(tmp_path, monkeypatch):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    (root / "escape").symlink_to(outside)
    monkeypatch.delenv("PAPERWORKS_DATA_ROOT", raising=False)
    monkeypatch.setenv("PAPERWORKS_URBAN_DATA_ROOT", str(root))
    assert server_path(str(root / "city"), "urban", "dataset.path") == (root / "city").resolve()
    for sneaky in (outside, root / ".." / "outside", root / "escape" / "x"):
        with pytest.raises(InvalidArgument) as exc:
            server_path(str(sneaky), "urban", "dataset.path")
        assert exc.value.field == "dataset.path" and "PAPERWORKS_URBAN_DATA_ROOT" in exc.value.message
        assert str(root) not in exc.value.message  # the server's layout is not told
    # the common root serves every service; a service's own root overrides it
    monkeypatch.setenv("PAPERWORKS_DATA_ROOT", str(outside))
    assert server_path(str(outside / "m"), "router", "local.model.path") == (outside / "m").resolve()
    with pytest.raises(InvalidArgument):
        server_path(str(outside / "m"), "urban", "dataset.path")


def test_with_auth_and_no_root_server_paths_are_refused_alike(tmp_path, monkeypatch):
    monkeypatch.delenv("PAPERWORKS_DATA_ROOT", raising=False)
    monkeypatch.delenv("PAPERWORKS_QUANTIZER_DATA_ROOT", raising=False)
    monkeypatch.setenv("PAPERWORKS_AUTH_TOKENS", "t1:secret")
    (tmp_path / "exists").mkdir()
    messages = set()
    for probe in ("/root/.bashrc", "/etc/passwd", str(tmp_path / "exists"), str(tmp_path / "missing")):
        with pytest.raises(InvalidArgument) as exc:
            server_path(probe, "quantizer", "model.path")
        messages.add(exc.value.message)
    assert len(messages) == 1 and "not accepted" in messages.pop()


def test_dev_mode_reads_under_the_working_directory(tmp_path, monkeypatch):
    for name in ("PAPERWORKS_DATA_ROOT", "PAPERWORKS_AUTH_TOKENS", "PAPERWORKS_URBAN_DATA_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert server_path("data/city", "urban", "dataset.path") == (tmp_path / "data" / "city").resolve()
    with pytest.raises(InvalidArgument):
        server_path("/etc/passwd", "urban", "dataset.path")


def test_a_path_the_os_cannot_take_is_refused_naming_the_field():
    for bad in ("a\0b", "~no-such-user-here/x", "x" * 5000):
        with pytest.raises(InvalidArgument) as exc:
            server_path(bad, "quantizer", "model.path")
        assert exc.value.field == "model.path"


def _tar(path, members):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = payload
                tar.addfile(info)
    return path


def test_a_safe_archive_unpacks(tmp_path):
    import zipfile

    from paperworks.shared.inputs import unpack_archive

    archive = _tar(tmp_path / "model.tar.gz", [("config.json", "file", b"{}"), ("sub/w.bin", "file", b"12")])
    out = unpack_archive(archive, tmp_path / "out", "model.upload")
    assert (out / "config.json").read_bytes() == b"{}" and (out / "sub" / "w.bin").read_bytes() == b"12"
    with zipfile.ZipFile(tmp_path / "data.zip", "w") as zf:
        zf.writestr("cases/a.txt", "a")
    assert (unpack_archive(tmp_path / "data.zip", tmp_path / "z", "f") / "cases" / "a.txt").read_text() == "a"


@pytest.mark.parametrize("members, says", [
    ([("/etc/evil", "file", b"x")], "points outside"),
    ([("../evil", "file", b"x")], "points outside"),
    ([("ok/../../evil", "file", b"x")], "points outside"),
    ([("link", "symlink", "/etc/passwd")], "link or device"),
    ([("hard", "hardlink", "/etc/passwd")], "link or device"),
    ([(f"f{i}", "file", b"") for i in range(6)], "more than 5"),
    ([("big", "file", b"x" * 2000)], "more than 1000 bytes"),
])
def test_unsafe_archives_are_refused_and_write_nothing(tmp_path, members, says):
    from paperworks.shared.inputs import unpack_archive

    archive = _tar(tmp_path / "bad.tar.gz", members)
    with pytest.raises(InvalidArgument) as exc:
        unpack_archive(archive, tmp_path / "out", "dataset.upload", max_bytes=1000, max_files=5)
    assert exc.value.field == "dataset.upload" and says in exc.value.message
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "evil").exists()


def test_zip_slip_is_refused(tmp_path):
    import zipfile

    from paperworks.shared.inputs import unpack_archive

    with zipfile.ZipFile(tmp_path / "slip.zip", "w") as zf:
        zf.writestr("../../slipped.txt", "x")
    with pytest.raises(InvalidArgument, match="points outside"):
        unpack_archive(tmp_path / "slip.zip", tmp_path / "out", "f")


def test_a_model_folder_named_by_anything_but_a_path_must_travel_as_an_archive():
    from paperworks.shared.inputs import InputRefParams, require_folder_archive

    scope = None  # no upload named: nothing is looked up
    for ok in ({"uri": "s3://b/models/llama.tar.gz"}, {"path": "/data/llama"},
               {"artifact": {"job_id": "moe-1", "name": "model.zip"}}):
        require_folder_archive(InputRefParams(**ok), scope, "model.source")
    for bad in ({"uri": "s3://b/models/model.safetensors"},
                {"artifact": {"job_id": "moe-1", "name": "model.safetensors"}}):
        with pytest.raises(InvalidArgument) as exc:
            require_folder_archive(InputRefParams(**bad), scope, "model.source")
        assert exc.value.field == "model.source" and "send a model folder as a .tar" in str(exc.value)
