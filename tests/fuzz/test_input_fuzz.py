"""Fuzzing what a tenant can hand a job as input: archives, server paths, input references.

Hypothesis builds tar and zip archives from hostile members (absolute names, `..`, links out,
devices, deep and empty names), server paths from hostile strings, and input references to other
tenants' uploads and jobs. Each is either accepted with everything inside its bounds, or refused
with INVALID_ARGUMENT / NOT_FOUND naming the field, writing nothing.
"""
from __future__ import annotations

import io
import tarfile
import warnings
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, NotFound, PaperworksError
from paperworks.shared.inputs import InputRefParams, InputScope, check_inputs, server_path, unpack_archive
from pydantic import BaseModel

FUZZ = settings(max_examples=60, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))
SEGMENT = st.sampled_from(["..", ".", "", "a", "b c", "~", "ünï", "x" * 40, "/", "\\", "C:", ".hidden"])
NAMES = st.lists(SEGMENT, min_size=1, max_size=6).map("/".join) | st.sampled_from(
    ["/etc/passwd", "../../x", "a/../../b", "//x", "a/./b", "./a", "a\x00b"])
KINDS = st.sampled_from(["file", "dir", "symlink", "hardlink", "fifo", "chardev"])
LINK_TARGETS = st.sampled_from(["/etc/passwd", "../../outside", "a", "/", "../x/../.."])


def tar_bytes(members) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, kind, target, data in members:
            info = tarfile.TarInfo(name)
            info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                         "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE,
                         "chardev": tarfile.CHRTYPE}[kind]
            if kind in ("symlink", "hardlink"):
                info.linkname = target
            if kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return buf.getvalue()


def zip_bytes(members) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
        warnings.simplefilter("ignore")  # duplicate names are part of the attack
        for name, kind, _target, data in members:
            info = zipfile.ZipInfo(name)
            if kind == "symlink":
                info.external_attr = (0o120777 << 16)
            zf.writestr(info, data)
    return buf.getvalue()


MEMBERS = st.lists(st.tuples(NAMES, KINDS, LINK_TARGETS, st.binary(max_size=64)), min_size=1, max_size=5)


@FUZZ
@given(members=MEMBERS, as_zip=st.booleans())
def test_archives_unpack_inside_their_folder_or_are_refused_whole(tmp_path_factory, members, as_zip):
    work = tmp_path_factory.mktemp("archive")
    archive = work / ("in.zip" if as_zip else "in.tar.gz")
    try:
        archive.write_bytes(zip_bytes(members) if as_zip else tar_bytes(members))
    except (ValueError, tarfile.TarError, OSError):
        return  # the archive libraries refuse to write it: nothing a client could send either
    dest = work / "out"
    try:
        unpack_archive(archive, dest, "dataset.upload")
    except InvalidArgument as exc:
        assert exc.field == "dataset.upload" and exc.message
        assert not dest.exists(), "a refused archive wrote files"
        return
    root = dest.resolve()
    for path in dest.rglob("*"):
        assert not path.is_symlink(), path
        assert path.resolve().is_relative_to(root), path
        assert path.is_file() or path.is_dir(), path


PATHS = st.one_of(NAMES, st.text(max_size=60), st.sampled_from(
    ["/", "/etc/passwd", "~root/.bashrc", "~nobody-such-user/x", "a" * 5000, "data/../../etc"]))


@FUZZ
@given(raw=PATHS)
def test_server_paths_outside_the_root_read_the_same_whether_they_exist_or_not(tmp_path_factory, raw):
    root = tmp_path_factory.mktemp("root")
    (root / "data").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAPERWORKS_DATA_ROOT", str(root))
        mp.chdir(root)
        try:
            resolved = server_path(raw, "segmenter", "dataset.path")
        except InvalidArgument as exc:
            assert exc.field == "dataset.path"
            assert str(root) not in exc.message and "exist" not in exc.message
            return
        assert resolved.is_relative_to(root.resolve())


class Job(BaseModel):
    dataset: InputRefParams
    extra: list[InputRefParams] = []


SHAS = iter(range(1, 10**6))


@FUZZ
@given(source=st.sampled_from(["upload", "path", "uri", "artifact"]), owner=st.sampled_from(["alice", "bob"]),
       index=st.integers(0, 2))
def test_other_tenants_references_and_foreign_inputs_are_refused_at_submit(
        store, tmp_path_factory, source, owner, index):
    """Inputs checked at submit (`check_inputs`): another tenant's upload or job is NOT_FOUND, an
    unfinished job FAILED_PRECONDITION, a path outside the root or a bucket not listed
    INVALID_ARGUMENT, each on its own field path (`extra.N.<source>`); a refused request pins no
    upload. The owner's own live upload is accepted and pinned (the job uses it)."""
    from paperworks.shared.config import get_settings
    from paperworks.shared.db.uploads import UploadStore

    root = tmp_path_factory.mktemp("root")
    uploads = UploadStore(store.db)
    sha = f"{next(SHAS):064x}"
    uploads.record("alice", sha, "data.csv", "", 10, ttl_s=3600)
    job = store.submit("alice", "segmenter", "train", {}, None)[0]
    refs = {"upload": {"upload": sha}, "path": {"path": "/etc/passwd"}, "uri": {"uri": "s3://other/key"},
            "artifact": {"artifact": {"job_id": job.id, "name": "model.safetensors"}}}
    params = Job(dataset={"path": str(root)}, extra=[{"path": str(root)}] * index + [refs[source]])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAPERWORKS_DATA_ROOT", str(root))
        mp.setenv("PAPERWORKS_INPUT_S3_BUCKETS", "inputs")
        get_settings.cache_clear()
        try:
            check_inputs(params, InputScope(store, None, owner), "segmenter")
            error = None
        except PaperworksError as exc:
            error = exc
        finally:
            get_settings.cache_clear()
    if source == "upload" and owner == "alice":
        assert error is None and uploads.get("alice", sha, "x").pinned
        return
    expected = {"upload": NotFound, "artifact": NotFound if owner == "bob" else FailedPrecondition,
                "path": InvalidArgument, "uri": InvalidArgument}[source]
    assert isinstance(error, expected), error
    assert error.field.startswith(f"extra.{index}.{source}"), error.field
    assert not uploads.get("alice", sha, "x").pinned
