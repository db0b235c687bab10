"""Small example inputs for the README's commands, the demo and the upload tests, made with no network.

`python -m paperworks.services.router.data FOLDER` writes:
- `prompts.jsonl`: a user's prompt set (TrainDecider `prompts.source`), one
  `{"prompt", "reference"}` row a line, drawn from the generated checkable suite (sums, upper-casing,
  lookups in a fixed table), so a small local LM is right on some and wrong on others;
- `tiny-lm/`: a tiny decoder (`tiny` model folder: config.json + model.safetensors) trained briefly
  on that suite (300 steps, ~10 s of one CPU core; right on about a third of the prompts, mostly
  lookups), the local LM of TrainDecider (`local.model.source`, uploaded as a .tar.gz);
- `x.npy`: one feature vector of the synthetic mixture's default dimension (8), for Route with a
  TrainRejector policy.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from paperworks.services.router.data.checkable import TaskSuite
from paperworks.services.router.sdr.local_lm import DEFAULT_TINY, train_local_tiny
from paperworks.shared.backends.tiny_model import save_tiny


def write_examples(folder: Path, *, rows: int = 60, steps: int = 300) -> list[Path]:
    """The example inputs in `folder` (created): `rows` prompts and a tiny LM of `steps` steps."""
    folder.mkdir(parents=True, exist_ok=True)
    suite = TaskSuite()
    prompts = folder / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"prompt": t.prompt, "reference": t.answer}) + "\n"
                for t in suite.generate(rows, seed=7)),
        encoding="utf-8",
    )
    model = save_tiny(folder / "tiny-lm", train_local_tiny(suite, steps=steps, seed=0, config=DEFAULT_TINY))
    features = folder / "x.npy"
    np.save(features, np.zeros(8, dtype=np.float32))
    return [prompts, model, features]
