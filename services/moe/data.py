"""Inputs of the moe service: the synthetic two-modality token stream (`dpsl.world`, rebuilt from
the parameters an MoE's checkpoint records), dense models (an earlier upcycle job's
dense.safetensors, an upload, an s3:// object or a server path, through
`paperworks.shared.inputs.resolve_input`), MoEs named by job id, and the small files the README
examples start from:

    python -m paperworks.services.moe.data tokens ./tokens.npy --batch 2 --seed 0
    python -m paperworks.services.moe.data llama ./llama    # a tiny random Llama folder (hf)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from paperworks.services.moe import checkpoint
from paperworks.services.moe.dpsl.world import World
from paperworks.services.moe.spec import MOE_KINDS, WorldParams
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import resolve_input

HF_ARCHIVE = "model.tar"  # the MoE of a job that upcycled (or router-tuned) a Hugging Face model
HF_REFUSAL = (
    "job {job_id} holds a Hugging Face MoE (model.tar, a transformers model for `hf` model "
    "references); evaluate_routing and Route take the service's TokenClassifier MoEs"
)


def hf_moe(store, job) -> bool:
    """Whether a moe job's MoE is a Hugging Face model (model.tar), not a TokenClassifier."""
    return any(a.name == HF_ARCHIVE for a in store.artifacts(job.id))


def check_hf_terms(router_losses) -> None:
    """The router terms a transformers MoE cannot take, refused naming the field: the aux-free
    bias (its routers have no selection bias) and per-modality priors (text has no modality)."""
    for i, t in enumerate(router_losses):
        if t.type == "aux_free_bias":
            raise InvalidArgument(
                f"router_losses[{i}].type", "a Hugging Face MoE's routers have no selection bias"
            )
        if t.per_modality:
            raise InvalidArgument(
                f"router_losses[{i}].per_modality", "text has no modalities; give a prior in alpha"
            )


def text_windows(ref, ctx, tokenizer_encode, seq_len: int, seed: int, field: str = "text"):
    """Token windows (T, seq_len + 1) of a UTF-8 text file (`ref`, an InputRef) or, unset, of this
    interpreter's standard-library sources; refusals name `field`."""
    import torch

    if ref is None:
        from paperworks.shared.backends.tiny_data import stdlib_texts

        texts = stdlib_texts(max_files=40, max_chars=4000, seed=seed)
    else:
        path = resolve_input(ref, ctx, "moe", field)
        if not path.is_file():
            raise InvalidArgument(field, "must name a UTF-8 text file")
        try:
            texts = [path.read_text(encoding="utf-8")]
        except UnicodeDecodeError as exc:
            raise InvalidArgument(field, f"is not UTF-8 text: {exc}") from None
    ids = [i for t in texts for i in tokenizer_encode(t)]
    n = len(ids) // (seq_len + 1)
    if n < 4:
        raise InvalidArgument(field, f"holds {len(ids)} tokens; at least {4 * (seq_len + 1)} are needed")
    return torch.tensor(ids[: n * (seq_len + 1)]).reshape(n, seq_len + 1)


def world(params: WorldParams | dict) -> World:
    p = params if isinstance(params, WorldParams) else WorldParams.model_validate(params)
    return World(p.seed, p.d_in, p.classes, p.length, p.noise)


def dense_model(ref, ctx):
    """A dense TokenClassifier from an InputRef (refusals name `dense`)."""
    path = resolve_input(ref, ctx, "moe", "dense")
    if not path.is_file():
        raise InvalidArgument("dense", "must name a dense.safetensors file, not a folder")
    if path.stat().st_size > checkpoint.MAX_BYTES:
        raise InvalidArgument("dense", f"larger than {checkpoint.MAX_BYTES} bytes")
    model, info = checkpoint.from_bytes(path.read_bytes(), ctx.device, "dense")
    if model.config.experts:
        raise InvalidArgument("dense", "is already a mixture of experts; upcycle a dense model")
    return model, info


def moe_of(ctx, job_id: str, field: str = "model_job_id"):
    """(MoE on the job's device, its info) from a tenant's finished upcycle or train_moe job."""
    job = ctx.finished_job("moe", job_id, field)
    if job.kind not in MOE_KINDS:
        raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not one of {', '.join(MOE_KINDS)}")
    if hf_moe(ctx.store, job):
        raise InvalidArgument(field, HF_REFUSAL.format(job_id=job_id))
    raw, _ = ctx.job_artifact("moe", job_id, checkpoint.MODEL, field)
    return checkpoint.from_bytes(raw, ctx.device, field)


def write_llama(folder: Path, seed: int = 0) -> Path:
    """A tiny Llama (2 layers, width 32, random weights) with a byte-level tokenizer, written with
    save_pretrained: a Hugging Face `base` the examples can upcycle with no network."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    specials = ["<s>", "</s>", "<pad>"]
    vocab.update({s: len(vocab) + i for i, s in enumerate(specials)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"], pad_token_id=vocab["<pad>"],
    )  # fmt: skip
    torch.manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    LlamaForCausalLM(config).save_pretrained(folder)
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    ).save_pretrained(folder)
    return folder


def _main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m paperworks.services.moe.data")
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("tokens", help="a (batch, 8, 16) float32 .npy of the default world's sequences")
    t.add_argument("out", type=Path)
    t.add_argument("--batch", type=int, default=2)
    t.add_argument("--world-seed", type=int, default=0)
    t.add_argument("--seed", type=int, default=0)
    m = sub.add_parser("llama", help="a tiny random Llama folder with a byte tokenizer (an hf base)")
    m.add_argument("out", type=Path)
    m.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.what == "llama":
        print(write_llama(a.out, a.seed))
        return
    batch = world(WorldParams(seed=a.world_seed)).sample(np.random.default_rng(a.seed), a.batch)
    np.save(a.out, batch.x.numpy())
    print(a.out)


if __name__ == "__main__":
    _main()
