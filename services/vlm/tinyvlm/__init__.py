"""The one small vision-language model both vlm papers run on: a patch-embedding vision encoder
and a small causal decoder LM (LLaVA-style: projected image tokens, then text), pure PyTorch, with
eager attention so CFPO's value intervention is one function, and per-layer residuals exposed for
the logit lens. The shared vocabulary and image format live in `vocab`."""

from paperworks.services.vlm.tinyvlm.model import TinyVLM, VLMConfig, answer_logprobs
from paperworks.services.vlm.tinyvlm.vocab import COLORS, IMAGE_SIZE, PALETTE, SHAPES, VOCAB, encode

__all__ = [
    "COLORS",
    "IMAGE_SIZE",
    "PALETTE",
    "SHAPES",
    "VOCAB",
    "TinyVLM",
    "VLMConfig",
    "answer_logprobs",
    "encode",
]
