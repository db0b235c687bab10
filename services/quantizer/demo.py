"""`make demo` for the quantizer: train a tiny Llama-style decoder on the stdlib sources, upload
it (the folder travels as a .tar.gz, as from another machine), quantize it to 2 bits with RaBiT,
then generate with the packed checkpoint over gRPC."""
from __future__ import annotations

from pathlib import Path

from paperworks.quantizer.v1 import quantizer_pb2
from paperworks.shared.backends.tiny_data import stdlib_texts
from paperworks.shared.backends.tiny_model import TinyConfig, save_tiny
from paperworks.shared.backends.tiny_train import train_tiny_lm
from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE

DATA = {"stdlib": {"files": 60, "max_chars": 8000, "seed": 0}}


def run(client, out: Path) -> None:
    texts = stdlib_texts(max_files=60, max_chars=8000, seed=0)
    config = TinyConfig(dim=64, n_layers=2, n_heads=4, mlp_hidden=176, max_seq_len=64)
    console.print("training a tiny decoder on the stdlib sources (300 steps) ...")
    trained = train_tiny_lm(texts, config, steps=300, seed=0)
    model_dir = save_tiny(out.resolve() / "base-model", trained.module)
    sha = client.upload(model_dir, "quantizer").artifact.sha256
    console.print(f"uploaded {model_dir.name} as {sha[:12]}")
    job = client.submit("quantizer", "quantize", model={"kind": "tiny", "source": {"upload": sha}},
                        method="rabit", data=DATA, token_budget=100 * 8 * 64)
    console.print(f"submitted [bold]{job.id}[/] (RaBiT, 2 bits per weight, 100 QAT steps)")
    final = follow(client, job.id, "quantizer.quantize")
    if PROTO_TO_STATE[final.state] != "SUCCEEDED":
        raise SystemExit(f"{job.id} ended {PROTO_TO_STATE[final.state]}: {final.error.message}")
    r = final.result
    base, quant = r["validation"]["base"], r["validation"]["quantized"]
    console.print(f"{int(r['layers'])} layers at {r['bits_per_weight']:g} bits per weight "
                  f"({r['bits_per_weight_with_scales']:.2f} with scales); held-out bits per byte "
                  f"{base['bits_per_byte']:.3f} (fp32) -> {quant['bits_per_byte']:.3f} (2-bit)")
    prompt = "def __init__(self"
    request = quantizer_pb2.GenerateRequest(quantize_job_id=job.id, prompts=[prompt], max_new_tokens=48)
    reply = client.stub("quantizer").Generate(request, metadata=client.metadata, timeout=60)
    console.print(f"Generate (packed kernels): {prompt + reply.completions[0].text!r}")
    paths = client.pull_artifacts(job.id, out)
    console.print("artifacts: " + ", ".join(p.name for p in paths) + f" in {out}")
