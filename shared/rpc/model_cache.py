"""Models that sync RPCs load from job artifacts, kept loaded between calls.

Keyed by the artifact's sha256: artifacts are content-addressed, so an entry is never
stale and needs no invalidation; the least recently used one is dropped past `size`.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

DEFAULT_SIZE = 8


class ModelCache:
    def __init__(self, size: int = DEFAULT_SIZE):
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, sha: str, load: Callable[[], Any]) -> Any:
        with self.lock:
            if sha not in self.items:
                self.items[sha] = load()
                if len(self.items) > self.size:
                    self.items.popitem(last=False)
            self.items.move_to_end(sha)
            return self.items[sha]
