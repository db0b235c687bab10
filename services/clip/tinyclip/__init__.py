"""The tiny CLIP both clip papers run on: `transformers.CLIPModel` from a tiny `CLIPConfig`
(random init, trained by the project on the synthetic world), or a real CLIP from a user's folder
(Hugging Face CLIPModel format, safetensors only), behind one `ClipEncoder` interface.
open_clip is not used: it imports torchvision, whose PyPI wheels do not import beside this
machine's CPU torch (see the service README)."""

from paperworks.services.clip.tinyclip.model import (
    ClipEncoder,
    WordTokenizer,
    build_tiny,
    load_hf_folder,
    tiny_config,
)
from paperworks.services.clip.tinyclip.train import (
    contrastive_loss,
    from_bytes,
    to_bytes,
    train_clip,
    zero_shot_accuracy,
)

__all__ = [
    "ClipEncoder",
    "WordTokenizer",
    "build_tiny",
    "contrastive_loss",
    "from_bytes",
    "load_hf_folder",
    "tiny_config",
    "to_bytes",
    "train_clip",
    "zero_shot_accuracy",
]
