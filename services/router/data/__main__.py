"""`python -m paperworks.services.router.data FOLDER`: the README's example inputs (`examples.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

from paperworks.services.router.data.examples import write_examples

if len(sys.argv) != 2:
    raise SystemExit("usage: python -m paperworks.services.router.data FOLDER")
for written in write_examples(Path(sys.argv[1])):
    print(written)
