"""SkillNet's skill hierarchy tokenizer (Xie et al., "SkillNet", ICML 2026; code
github.com/VIPL-VSU/SkillNet, `data_process/skill_hierarchy/skill_hierarchy_tokenizer.py`).

Each "verb object" subtask gets a 6-digit motion code (Motion Taxonomy, Paulius et al. RSS 2020):
contact time (0-2), deformation type (0-2), arm fixed-axis rotation (0/1), object constrained
translation (0 none, 1 1-D, 2 free), object fixed-axis rotation (0/1), tool use (0/1). The code is
assigned to the nearest of the 12 released centres under the released weighted distance (digits 1, 2
and 4: zero<->non-zero costs the full weight, non-zero<->non-zero half of it; digits 3, 5, 6: any
change the full weight). The skill token is the triple [motion cluster id, VerbNet class id, verb id].

The verbs of the 2-D simulator (`sim.py`) are annotated here by hand, as the authors' optional LLM
annotation would: pick/place/stack are free-translation grasps (200200, cluster 0), push/slide and the
drawer's open/close are long-contact 1-D constrained translations (200100, cluster 1) and turn is an
arm+object rotation (201010, cluster 5). `slide` is the few-shot verb: unseen in training, it shares
push's motion cluster but has its own VerbNet class. VerbNet classes follow VerbNet 3.x.

`hierarchy_similarity` is the depth of the lowest common ancestor in the 3-level tree divided by 3
(same verb 1, same cluster and class 2/3, same cluster 1/3, else 0) [R: our choice of tree metric].
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

MOTION_CODE_CENTERS = ("200200", "200100", "100200", "200010", "100100", "201010", "200001", "201201",
                       "000001", "220001", "100001", "200201")
MOTION_CODE_WEIGHTS = (3.056, 1.539, 1.350, 2.844, 1.039, 2.632)
_CODE = re.compile(r"[0-2][0-2][0-1][0-2][0-1][0-1]")


def validate_motion_code(code: str) -> str:
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        raise ValueError(f"motion code {code!r} must be six digits in [0-2][0-2][0-1][0-2][0-1][0-1]")
    return code


def motion_code_distance(a: str, b: str) -> float:
    """The released weighted distance between two motion codes."""
    a, b = validate_motion_code(a), validate_motion_code(b)
    d = 0.0
    for i, (x, y, w) in enumerate(zip(a, b, MOTION_CODE_WEIGHTS, strict=True)):
        if i in (0, 1, 3):
            if (x == "0") != (y == "0"):
                d += w
            elif x != y:
                d += w / 2.0
        elif x != y:
            d += w
    return d


def assign_motion_cluster(code: str) -> int:
    """Index of the nearest released centre (ties: the lower index, as `min` over the released dict)."""
    return int(np.argmin([motion_code_distance(code, c) for c in MOTION_CODE_CENTERS]))


@dataclass(frozen=True)
class Verb:
    name: str
    motion_code: str
    verbnet: str


# The simulator's verbs (order = verb id). `slide` is held out of base training (few-shot verb).
VERBS = (
    Verb("pick", "200200", "get-13.5.1"),
    Verb("place", "200200", "put-9.1"),
    Verb("stack", "200200", "put_spatial-9.2"),
    Verb("push", "200100", "push-12"),
    Verb("open", "200100", "other_cos-45.4"),
    Verb("close", "200100", "other_cos-45.4"),
    Verb("turn", "201010", "turn-26.6.1"),
    Verb("slide", "200100", "slide-11.2"),
)
VERB_IDS = {v.name: i for i, v in enumerate(VERBS)}
VERBNET_CLASSES = tuple(dict.fromkeys(v.verbnet for v in VERBS))


def skill_token(verb: str) -> tuple[int, int, int]:
    """[motion cluster id, VerbNet class id, verb id] of a verb, as the released tokenizer returns."""
    if verb not in VERB_IDS:
        raise ValueError(f"verb {verb!r} is not one of {sorted(VERB_IDS)}")
    v = VERBS[VERB_IDS[verb]]
    return assign_motion_cluster(v.motion_code), VERBNET_CLASSES.index(v.verbnet), VERB_IDS[verb]


def token_table() -> np.ndarray:
    """(n_verbs, 3) int64 table of the skill tokens, row = verb id."""
    return np.array([skill_token(v.name) for v in VERBS], dtype=np.int64)


def hierarchy_similarity(a: str, b: str) -> float:
    """Depth of the lowest common ancestor in cluster -> VerbNet class -> verb, over 3."""
    ta, tb = skill_token(a), skill_token(b)
    depth = 0
    for x, y in zip(ta, tb, strict=True):
        if x != y:
            break
        depth += 1
    return depth / 3.0
