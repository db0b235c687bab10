"""Model backends: one interface over remote endpoints, local transformers models and tiny models.

Only the interface, results, errors and `load_backend` are imported here; the backends
themselves (openai, hf, tiny) load on first use so that importing this package stays cheap.
"""

from paperworks.shared.backends.base import (
    ChatMessage,
    Generation,
    HiddenStates,
    ModelBackend,
    Score,
    parse_json_answer,
)
from paperworks.shared.backends.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    InvalidModel,
    InvalidRequest,
    MalformedOutput,
    MalformedResponse,
    RemoteError,
    Unsupported,
    platform_error,
)
from paperworks.shared.backends.ref import ModelRef, load_backend

__all__ = [
    "BackendError",
    "BackendTimeout",
    "BackendUnavailable",
    "ChatMessage",
    "Generation",
    "HiddenStates",
    "InvalidModel",
    "InvalidRequest",
    "MalformedOutput",
    "MalformedResponse",
    "ModelBackend",
    "ModelRef",
    "RemoteError",
    "Score",
    "Unsupported",
    "platform_error",
    "load_backend",
    "parse_json_answer",
]
