"""The backend over a transformers causal LM in a local directory: any model_type that
transformers' AutoModelForCausalLM loads without remote code (tested: TESTED_MODEL_TYPES).

Users point jobs at their own models, so the directory is checked before transformers sees it
and every refusal says why: unsupported model_type, pickle-only weights (never unpickled),
weights that do not cover the architecture (transformers would silently fill them with random
values), no tokenizer. Loading is `local_files_only`, safetensors-only and never runs remote
code, so nothing is fetched from a hub and no user file is executed.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from paperworks.shared.backends.base import ChatMessage
from paperworks.shared.backends.errors import InvalidModel, InvalidRequest
from paperworks.shared.backends.ref import ModelRef
from paperworks.shared.backends.tiny_model import MODEL_TYPE as TINY_MODEL_TYPE
from paperworks.shared.backends.torch_lm import TorchCausalLM
from paperworks.shared.threads import TRANSFORMERS_LOCK
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

# Every family AutoModelForCausalLM knows loads; these are the ones the tests build, load, run and
# score here (tests/unit/backends/test_hf.py), so they are the ones known to work end to end.
TESTED_MODEL_TYPES = ("llama", "gpt2", "qwen2", "mistral", "gemma", "gpt_neox", "phi", "opt")
_TOKENIZER_FILES = (("tokenizer.json",), ("tokenizer.model",), ("vocab.json", "merges.txt"))


def load_pretrained(cls, folder: str | Path, dtype: torch.dtype = torch.float32, **kwargs):
    """`cls.from_pretrained(folder)` as every loader here calls it: local files only, safetensors
    only (a pickle is never unpickled), no remote code; returns (model, loading info) so the caller
    can refuse weights that do not match the config."""
    with TRANSFORMERS_LOCK:  # one load at a time in a process (paperworks.shared.threads)
        return cls.from_pretrained(str(folder), local_files_only=True, use_safetensors=True,
                                   trust_remote_code=False, dtype=dtype, output_loading_info=True,
                                   **kwargs)


def check_model_dir(path: str | Path) -> dict[str, Any]:
    """The directory's config.json, or InvalidModel(field="path") saying why it is unusable."""
    directory = Path(path)
    if not directory.exists():
        raise InvalidModel("path", f"{directory} does not exist")
    if not directory.is_dir():
        raise InvalidModel("path", f"{directory} is not a directory")
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise InvalidModel("path", f"{directory} has no config.json: not a transformers model")
    try:
        config = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidModel("path", f"{config_path} is not valid JSON: {exc}") from exc
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type == TINY_MODEL_TYPE:
        raise InvalidModel("path", f"{directory} holds a paperworks tiny model; use kind='tiny'")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise InvalidModel(
            "path",
            f"{config_path}: model_type {model_type!r} is not a causal language model transformers "
            f"can load (AutoModelForCausalLM; tested: {', '.join(TESTED_MODEL_TYPES)})",
        )
    names = {p.name for p in directory.iterdir()}
    if not names & {"model.safetensors", "model.safetensors.index.json"}:
        pickled = sorted(n for n in names if n.endswith((".bin", ".pt", ".pth", ".ckpt")))
        raise InvalidModel(
            "path",
            f"{directory} has no model.safetensors"
            + (f"; pickle weights ({', '.join(pickled)}) are never loaded, convert them"
               if pickled else ""),
        )  # fmt: skip
    if not any(all(f in names for f in group) for group in _TOKENIZER_FILES):
        raise InvalidModel(
            "path", f"{directory} has no tokenizer (tokenizer.json, tokenizer.model or vocab.json)"
        )
    return config


class HFBackend(TorchCausalLM):
    kind = "hf"

    def __init__(self, module: Any, tokenizer: Any, *, device: str = "cpu") -> None:
        self.device = torch.device(device)
        self.module = module.to(self.device).eval()
        self.tokenizer = tokenizer
        config = module.config
        self.max_length = int(config.max_position_embeddings)
        eos = [config.eos_token_id, tokenizer.eos_token_id]
        flat = [e for item in eos for e in (item if isinstance(item, list) else [item])]
        self.eos_ids = frozenset(e for e in flat if e is not None)
        params = inspect.signature(module.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._last_only = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    @classmethod
    def from_dir(cls, path: str | Path, *, device: str = "cpu", dtype: str = "float32") -> HFBackend:
        check_model_dir(path)
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                str(path), local_files_only=True, trust_remote_code=False
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InvalidModel("path", f"{path}: tokenizer cannot be loaded: {exc}") from exc
        try:
            module, info = load_pretrained(AutoModelForCausalLM, path, getattr(torch, dtype))
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise InvalidModel("path", f"{path}: weights cannot be loaded: {exc}") from exc
        problems = {k: sorted(v) for k, v in info.items() if k != "error_msgs" and v}
        if info.get("error_msgs"):
            problems["errors"] = list(info["error_msgs"])
        if problems.get("missing_keys") or problems.get("mismatched_keys") or "errors" in problems:
            raise InvalidModel("path", f"{path}: weights do not match config.json: {problems}")
        return cls(module, tokenizer, device=device)

    @classmethod
    def from_ref(cls, ref: ModelRef) -> HFBackend:
        assert ref.path is not None
        return cls.from_dir(ref.path, device=ref.device, dtype=ref.dtype)

    def encode(self, text: str, *, add_special: bool = True) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=add_special))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def _start_ids(self) -> list[int]:
        start = self.tokenizer.bos_token_id
        start = start if start is not None else self.tokenizer.eos_token_id
        if start is None:
            raise InvalidRequest("prompts", "empty prompt, and the tokenizer has no BOS/EOS token")
        return [start]

    def _render_chat(self, messages: list[ChatMessage]) -> tuple[str, bool, tuple[str, ...]]:
        if not getattr(self.tokenizer, "chat_template", None):
            return super()._render_chat(messages)
        text = self.tokenizer.apply_chat_template(
            [asdict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
        return text, False, ()

    def _forward(
        self, input_ids: torch.Tensor, *, hidden: bool, cache: Any = None, use_cache: bool = False
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, Any]:
        extra = self._last_only if use_cache else {}
        out = self.module(
            input_ids=input_ids,
            use_cache=use_cache,
            output_hidden_states=hidden,
            **{self._cache_kw: cache},
            **extra,
        )
        return out.logits, out.hidden_states if hidden else None, getattr(out, self._cache_kw)
