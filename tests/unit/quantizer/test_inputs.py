"""A quantize job's model and text from uploads (shared.inputs, as the job's tenant): a model folder
sent as an archive (its contents, or the folder itself as `tar czf m.tar.gz m/` packs it), text as
a file or an archived folder; refusals name the source's field and never the server's folders; the
model loader other services call rebuilds a packed model on its uploaded base, for its tenant."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from paperworks.services.quantizer import checkpoint, data, quantize
from paperworks.services.quantizer.distill import TokenData
from paperworks.services.quantizer.linears import forward
from paperworks.services.quantizer.spec import LocalModelSpec, QuantizeParams, TextSource
from paperworks.shared.artifacts import ArtifactStore
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder, load_tiny, save_tiny
from paperworks.shared.config import get_settings
from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import JobStore
from paperworks.shared.db.migrate import upgrade
from paperworks.shared.db.uploads import UploadStore
from paperworks.shared.errors import InvalidArgument, NotFound
from paperworks.shared.inputs import InputScope

CONFIG = TinyConfig(dim=32, n_layers=1, n_heads=2, mlp_hidden=64, max_seq_len=32)


@pytest.fixture
def scope(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    monkeypatch.setenv("PAPERWORKS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PAPERWORKS_DATABASE_URL", url)
    get_settings.cache_clear()
    upgrade(url)
    yield InputScope(JobStore(Database(url)), ArtifactStore(tmp_path / "artifacts"), "t1")
    get_settings.cache_clear()


def upload(scope: InputScope, name: str, blob: bytes, tenant: str = "t1") -> dict:
    sha = scope.artifacts.put(blob)
    UploadStore(scope.store.db).record(tenant, sha, name, "application/octet-stream", len(blob), ttl_s=3600)
    return {"upload": sha}


def tar_gz(folder: Path, top: str = "") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for item in sorted(folder.rglob("*")):
            if item.is_file():
                tar.add(item, arcname=str(Path(top) / item.relative_to(folder)))
    return out.getvalue()


def test_model_and_text_come_from_uploads(scope, tmp_path):
    torch.manual_seed(0)
    model = save_tiny(tmp_path / "tiny", TinyDecoder(CONFIG))
    text = tmp_path / "text"
    (text / "sub").mkdir(parents=True)
    (text / "a.txt").write_text("hello")
    (text / "sub" / "b.md").write_text("world")
    for archive in (tar_gz(model), tar_gz(model, top="tiny")):  # contents, or the folder itself
        spec = LocalModelSpec(kind="tiny", source=upload(scope, "tiny.tar.gz", archive))
        data.check_model(spec, scope)
        backend = data.open_model(spec, scope)
        torch.testing.assert_close(backend.module.state_dict(), load_tiny(model).state_dict())
    folder = TextSource(source=upload(scope, "text.tar.gz", tar_gz(text, top="text")))
    assert sorted(data.load_texts(folder, scope)) == ["hello", "world"]
    one = TextSource(source=upload(scope, "notes.txt", b"just one file"))
    assert data.load_texts(one, scope) == ["just one file"]


def test_refusals_name_the_source_and_not_the_server_folders(scope, tmp_path):
    (tmp_path / "t5").mkdir()
    (tmp_path / "t5" / "config.json").write_text(json.dumps({"model_type": "t5"}))
    t5 = LocalModelSpec(kind="hf", source=upload(scope, "t5.tar.gz", tar_gz(tmp_path / "t5")))
    loose = LocalModelSpec(kind="tiny", source=upload(scope, "model.safetensors", b"\0" * 8))
    cases = ((data.open_model, t5, "is not a causal language model"),
             (data.check_model, loose, "a model folder is sent as a .tar, .tar.gz or .zip archive"),
             (data.open_model, loose, "is not a directory"))
    for call, spec, why in cases:
        with pytest.raises(InvalidArgument) as exc:
            call(spec, scope)
        assert exc.value.field == "model.source.upload" and why in exc.value.message, exc.value.message
        assert str(get_settings().state_dir) not in exc.value.message
    binary = TextSource(source=upload(scope, "blob.txt", b"\xff\xfe\x00"))
    with pytest.raises(InvalidArgument) as exc:
        data.load_texts(binary, scope)
    assert exc.value.field == "data.source.upload"
    assert exc.value.message.startswith("blob.txt is not readable")
    bobs = LocalModelSpec(kind="tiny", source=upload(scope, "m.tar.gz", b"bob's", tenant="bob"))
    with pytest.raises(NotFound) as exc:
        data.check_model(bobs, scope)
    assert exc.value.field == "model.source.upload"


def test_the_announced_model_loader_rebuilds_on_an_uploaded_base_for_its_tenant(scope, tmp_path):
    torch.manual_seed(0)
    source = upload(scope, "tiny.tar.gz", tar_gz(save_tiny(tmp_path / "tiny", TinyDecoder(CONFIG))))
    params = QuantizeParams(model={"kind": "tiny", "source": source}, method="rtn", data={"stdlib": {}})
    tokens = TokenData.from_ids(torch.randint(0, 256, (2000,)).tolist())
    student, _ = quantize.quantize(data.open_model(params.model, scope).module, tokens,
                                   quantize.QuantConfig(method="rtn", seq_len=16, calib_windows=2))
    packed = quantize.pack(student)
    sha = scope.artifacts.put(checkpoint.save(packed, "rtn", {})[0])
    job = SimpleNamespace(tenant="t1", params=params.model_dump(mode="json"))
    loaded = data.announced_model(job, {"sha256": sha}, scope, "local.quantize_job_id")
    ids = tokens.valid_windows(16, 2)
    with torch.no_grad():
        torch.testing.assert_close(forward(loaded.module, ids)[0], forward(packed, ids)[0])
    with pytest.raises(NotFound) as exc:  # the upload is t1's: a job of another tenant cannot name it
        data.announced_model(SimpleNamespace(tenant="bob", params=job.params), {"sha256": sha},
                             InputScope(scope.store, scope.artifacts, "bob"), "local.quantize_job_id")
    assert exc.value.field == "local.quantize_job_id.model.source.upload"
