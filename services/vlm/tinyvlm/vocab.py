"""The shared word vocabulary and image format of the small VLM.

Images are 16 x 16 RGB in [0, 1] (16 patches of 4 x 4); text is a sequence of whole words from
`VOCAB`. Answers are single tokens: the six colour words. `<none>` is the neutral filler that
replaces a text context (image-only queries); a blank (all-zero) image removes the visual one.
"""

from __future__ import annotations

IMAGE_SIZE = 16
PATCH = 4
COLORS = ("red", "green", "blue", "yellow", "purple", "orange")
PALETTE = (
    (0.9, 0.1, 0.1),
    (0.1, 0.8, 0.2),
    (0.15, 0.25, 0.95),
    (0.95, 0.9, 0.1),
    (0.6, 0.1, 0.8),
    (1.0, 0.55, 0.0),
)
SHAPES = ("circle", "square", "triangle")
SPECIALS = ("<pad>", "<none>", ":", ";", "?")
WORDS = ("what", "color", "is", "the", "object", "reports", "say", "of")
VOCAB = SPECIALS + COLORS + SHAPES + WORDS
INDEX = {w: i for i, w in enumerate(VOCAB)}
PAD, NONE = INDEX["<pad>"], INDEX["<none>"]
COLOR_IDS = tuple(INDEX[c] for c in COLORS)


def encode(words: list[str] | str) -> list[int]:
    """Word ids; raises KeyError naming the first unknown word."""
    if isinstance(words, str):
        words = words.split()
    out = []
    for w in words:
        if w not in INDEX:
            raise KeyError(w)
        out.append(INDEX[w])
    return out
