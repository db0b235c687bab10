"""Real Hugging Face vision-language models in the vlm service: a user's folder (safetensors only)
holding a `LlavaForConditionalGeneration` or a `Qwen2VLForConditionalGeneration` with its processor,
checked, loaded and wrapped in the interface the modality-following audit (arXiv 2511.02243) and
Answer use for TinyVLM: per-option probabilities over a closed answer set for (image, text)
queries, the unimodal copies (no image at all; the text without its context) and the logit lens.

Design choices, and why:
- the answer is read at the prompt's last position over the options' first tokens (a closed
  answer set, as the paper's multiple-choice conflict items), normalised over the options only;
- the logit lens (§4 of the paper: the per-layer "which modality's answer leads" state) applies
  the LM's own final norm and `lm_head` to the residual stream after every decoder layer at that
  position, captured with forward hooks (`output_hidden_states` differs across families in
  whether its last entry is already normalised); the last layer's row is therefore the model's own
  final answer distribution;
- batches are right-padded: every real token sees the positions it would alone (LLaVA's plain 1-D
  positions and Qwen2-VL's M-RoPE alike) and the answer position is each row's last real token;
- the prompt is the processor's chat template where the folder has one (a user turn holding the
  image and the question, with the generation prompt), else the bare image placeholder and text;
- float32 throughout (the audit's entropies are the measurement); the model sits on the job's
  device. The processor is `AutoProcessor`; where transformers cannot build it (Qwen2-VL's
  processor also wants a video processor, which needs torchvision) the folder's tokenizer and
  image processor are used as that processor would: one `<|image_pad|>` per merged patch.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from paperworks.shared.errors import InvalidArgument

# model_type in config.json -> the transformers class that loads it
SUPPORTED = {"llava": "LlavaForConditionalGeneration", "qwen2_vl": "Qwen2VLForConditionalGeneration"}
MAX_OPTIONS = 64
BATCH = 16
_TOKENIZER_FILES = (("tokenizer.json",), ("tokenizer.model",), ("vocab.json", "merges.txt"))


def supported() -> str:
    return ", ".join(f"{cls} (model_type {t})" for t, cls in SUPPORTED.items())


def check_folder(folder: Path, where: str, shown: str) -> dict:
    """The folder's config.json, or InvalidArgument on `where` saying why the folder is no VLM this
    service loads (naming `shown`, never a server folder an upload was unpacked to): no config, an
    architecture outside SUPPORTED, no model.safetensors (pickles are never loaded), no tokenizer
    or no image processor. Reads no weights."""

    def refuse(reason: str):
        raise InvalidArgument(where, reason.replace(str(folder), shown))

    if not folder.is_dir():
        refuse(f"{shown} is not a folder (send a model folder as a .tar, .tar.gz or .zip archive)")
    path = folder / "config.json"
    if not path.is_file():
        refuse(f"{shown} has no config.json: not a transformers model")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        refuse(f"{shown}/config.json is not valid JSON: {exc}")
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type not in SUPPORTED:
        archs = config.get("architectures") if isinstance(config, dict) else None
        refuse(
            f"{shown} holds {', '.join(archs or []) or 'a model'} (model_type {model_type!r}); "
            f"supported vision-language models: {supported()}"
        )
    names = {p.name for p in folder.iterdir()}
    if not names & {"model.safetensors", "model.safetensors.index.json"}:
        pickled = sorted(n for n in names if n.endswith((".bin", ".pt", ".pth", ".ckpt")))
        refuse(
            f"{shown} has no model.safetensors"
            + (f"; pickle weights ({', '.join(pickled)}) are never loaded, convert them" if pickled else "")
        )
    if not any(all(f in names for f in group) for group in _TOKENIZER_FILES):
        refuse(f"{shown} has no tokenizer (tokenizer.json, tokenizer.model or vocab.json)")
    if not names & {"preprocessor_config.json", "processor_config.json"}:
        refuse(f"{shown} has no image processor (preprocessor_config.json or processor_config.json)")
    return config


def load(folder: Path, device: str, where: str, shown: str) -> HFVLM:
    """The checked folder's model (float32, eval, on `device`) and processor as an HFVLM."""
    import transformers
    from paperworks.shared.backends.hf import load_pretrained
    from transformers import AutoImageProcessor, AutoProcessor, AutoTokenizer

    family = check_folder(folder, where, shown)["model_type"]
    cls = getattr(transformers, SUPPORTED[family])
    try:
        model, info = load_pretrained(cls, folder)
    except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
        raise InvalidArgument(
            where, f"{shown}: weights cannot be loaded: {exc}".replace(str(folder), shown)
        ) from None
    problems = {k: sorted(v) for k, v in info.items() if k in ("missing_keys", "mismatched_keys") and v}
    if problems or info.get("error_msgs"):
        raise InvalidArgument(
            where, f"{shown}: weights do not match config.json: {problems or info['error_msgs']}"
        )
    try:
        processor = AutoProcessor.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except (ImportError, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        processor, why = None, (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    else:
        why = f"AutoProcessor gave a {type(processor).__name__}, no image processor"
        if not hasattr(processor, "image_processor"):
            processor = None
    try:
        if processor is not None:
            tokenizer, images = processor.tokenizer, processor.image_processor
        elif family == "qwen2_vl":
            tokenizer = AutoTokenizer.from_pretrained(
                str(folder), local_files_only=True, trust_remote_code=False
            )
            images = AutoImageProcessor.from_pretrained(
                str(folder), local_files_only=True, trust_remote_code=False
            )
        else:
            raise ValueError(why)
    except (ImportError, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidArgument(
            where, f"{shown}: its processor cannot be loaded: {exc}".replace(str(folder), shown)
        ) from None
    return HFVLM(model.to(device).eval(), tokenizer, images, processor, family)


def _picture(image: np.ndarray):
    """(H, W, 3) float in [0, 1] or uint8 -> an RGB PIL image, as a processor takes it."""
    from PIL import Image

    a = np.asarray(image)
    if a.dtype != np.uint8:
        a = (np.clip(a.astype(np.float32), 0.0, 1.0) * 255.0).round().astype(np.uint8)
    return Image.fromarray(a, "RGB")


class HFVLM:
    """A loaded LLaVA- or Qwen2-VL-style model with its processor, answering over closed answer sets."""

    def __init__(self, model, tokenizer, image_processor, processor, family: str):
        self.model, self.tokenizer, self.image_processor = model, tokenizer, image_processor
        self.processor, self.family = processor, family
        self.tokenizer.padding_side = "right"  # the answer position is each row's last real token
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        config = model.config
        image_id = getattr(config, "image_token_id", None)
        if image_id is None:
            image_id = getattr(config, "image_token_index", None)
        self.image_token = tokenizer.convert_ids_to_tokens(image_id)
        self.image_token_id = image_id
        self.wrap = ("", "")
        if family == "qwen2_vl":
            self.wrap = tuple(
                tokenizer.convert_ids_to_tokens(getattr(config, f"vision_{e}_token_id"))
                for e in ("start", "end")
            )
        base = model.model
        self.decoder = base.language_model
        self.layers = list(self.decoder.layers)
        self.device = next(model.parameters()).device

    @property
    def template(self):
        """What renders the chat template (the processor's, else the tokenizer's), or None."""
        for holder in (self.processor, self.tokenizer):
            if holder is not None and getattr(holder, "chat_template", None):
                return holder
        return None

    def prompt(self, text: str, image: bool) -> str:
        """The model's prompt for a question, with one image placeholder where `image`."""
        holder = self.template
        if holder is not None:
            content = ([{"type": "image"}] if image else []) + [{"type": "text", "text": text}]
            return holder.apply_chat_template(
                [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
            )
        if not image:
            return text
        start, end = self.wrap
        return f"{start}{self.image_token}{end}\n{text}"

    def option_ids(self, options: Sequence[str], where: str = "options") -> list[int]:
        """The first token of each option word; refused where the tokenizer does not know a word or
        two options share a first token (the closed answer set would not be one)."""
        if not 1 <= len(options) <= MAX_OPTIONS:
            raise InvalidArgument(where, f"{len(options)} options; give 2..{MAX_OPTIONS} answer words")
        ids = []
        for word in options:
            tokens = self.tokenizer.encode(word, add_special_tokens=False)
            if not word.strip() or not tokens or tokens[0] == self.tokenizer.unk_token_id:
                raise InvalidArgument(where, f"option {word!r} is not a word this model's tokenizer knows")
            ids.append(int(tokens[0]))
        if len(set(ids)) < len(ids):
            raise InvalidArgument(where, f"options {list(options)} do not all start with different tokens")
        return ids

    def inputs(self, images: Sequence[np.ndarray] | None, texts: Sequence[str]) -> dict:
        """The model's batch for (images or none, texts): prompts, image placeholders expanded,
        right-padded, on the model's device."""
        prompts = [self.prompt(t, images is not None) for t in texts]
        pictures = None if images is None else [_picture(i) for i in images]
        if self.processor is not None:
            batch = dict(self.processor(images=pictures, text=prompts, padding=True, return_tensors="pt"))
        else:  # Qwen2-VL without its processor class: what Qwen2VLProcessor.__call__ does
            batch = {}
            if pictures is not None:
                batch = dict(self.image_processor(images=pictures, return_tensors="pt"))
                merge = self.image_processor.merge_size**2
                counts = (batch["image_grid_thw"].prod(-1) // merge).tolist()
                token = self.image_token
                prompts = [p.replace(token, token * n, 1) for p, n in zip(prompts, counts, strict=True)]
            batch |= dict(self.tokenizer(prompts, padding=True, return_tensors="pt"))
        if self.family == "qwen2_vl" and pictures is not None and "mm_token_type_ids" not in batch:
            batch["mm_token_type_ids"] = (batch["input_ids"] == self.image_token_id).int()
        batch.pop("token_type_ids", None)
        return {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in batch.items()}

    @torch.no_grad()
    def forward(
        self, batch: dict, option_ids: Sequence[int], lens: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(final logits over the options (B, |A|), logit lens (B, layers, |A|) or None) at each
        row's last real token: the base model's normalised last state through `lm_head`, and every
        decoder layer's output through the final norm and `lm_head`. The hooks sit on modules a
        server shares between threads, so each keeps only its own thread's pass."""
        states, me = [], threading.get_ident()

        def keep(_module, _args, out):
            if threading.get_ident() == me:
                states.append(out[0] if isinstance(out, tuple) else out)

        hooks = [layer.register_forward_hook(keep) for layer in self.layers] if lens else []
        try:
            out = self.model.model(**batch, use_cache=False)
        finally:
            for h in hooks:
                h.remove()
        rows = torch.arange(batch["input_ids"].shape[0], device=self.device)
        last = batch["attention_mask"].sum(1) - 1
        ids = torch.as_tensor(list(option_ids), device=self.device)
        head, norm = self.model.lm_head, self.decoder.norm
        final = head(out.last_hidden_state[rows, last])[:, ids].float()
        if not lens:
            return final, None
        return final, torch.stack([head(norm(s[rows, last]))[:, ids] for s in states], 1).float()

    def run(
        self,
        images: Sequence[np.ndarray] | None,
        texts: Sequence[str],
        options: Sequence[str],
        lens: bool = True,
        batch: int = BATCH,
        where: str = "options",
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """p over `options` (N, |A|) and, with `lens`, the logit lens (N, layers, |A|), float64;
        `images` None runs the texts alone (no image placeholder, no pixels). Options the
        tokenizer cannot tell apart are refused on `where`."""
        ids = self.option_ids(options, where)
        self.model.eval()
        ps, ls = [], []
        for i in range(0, len(texts), batch):
            part = None if images is None else images[i : i + batch]
            final, layers = self.forward(self.inputs(part, texts[i : i + batch]), ids, lens)
            ps.append(final.double().softmax(-1).cpu().numpy())
            if lens:
                ls.append(layers.double().softmax(-1).cpu().numpy())
        return np.concatenate(ps), (np.concatenate(ls) if lens else None)

    def probabilities(self, images, texts, options, batch: int = BATCH, where: str = "options") -> np.ndarray:
        return self.run(images, texts, options, lens=False, batch=batch, where=where)[0]
