"""A vectorised 2-D manipulation world for SkillNet's skill-composition experiments (the research
note's miniature of LIBERO-Skill / RoboTwin transfer; Xie et al., SkillNet, ICML 2026).

A point-mass gripper (position, open/closed) acts in the unit square on a block, a lid, a bowl, a
drawer (a handle sliding along x, opening d in [0, 1]) and a knob (a bar at angle theta). Actions are
(dx, dy, grip, rot) in [-1, 1]^4: the gripper moves by STEP * (dx, dy); grip > 0 closes it (closing next
to a block, lid, handle or knob grasps the nearest one), grip <= 0 opens it (releasing what it
holds); a held drawer follows only the x motion (constrained translation), a held knob turns by
ROT_STEP * rot. An open gripper travels raised, above the objects (the 2-D stand-in for lifting the
arm); a closed, empty one is a fist at table height that pushes the block when it moves into it.

Skills are "verb object" subtasks: pick (carry to the home corner), place (into / onto the bowl),
stack (the block onto the lid), push (the block right past x = 0.8), slide (the block up past
y = 0.8; the few-shot verb), open / close (the drawer), turn (the knob a quarter turn). A task is two
skills on disjoint objects, done in order; the environment advances the phase when the current
skill's success predicate holds (as a subtask monitor would) and the observation carries the phase.
`expert_action` is the scripted reactive controller of every skill (a function of the state only).
Everything is numpy over a batch of environments, each with its own task.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STEP, ROT_STEP = 0.04, 0.25
GRASP_R, PUSH_R, APPROACH = 0.08, 0.04, 0.05
HOME = np.array([0.15, 0.85])
DRAWER_TRAVEL = 0.25
OBJECTS = ("block", "lid", "drawer", "knob")
HELD_NONE = -1
OBS_DIM, ACTION_DIM = 26, 4
REL_SCALE = 10.0  # gripper-relative offsets (to block, lid, bowl, handle, knob, home) are scaled by this

# (verb, object) skills; the object id indexes OBJECTS (the thing the verb acts on)
SKILLS = (("pick", "block"), ("pick", "lid"), ("place", "block"), ("place", "lid"), ("stack", "block"),
          ("push", "block"), ("open", "drawer"), ("close", "drawer"), ("turn", "knob"), ("slide", "block"))
SKILL_IDS = {f"{v} {o}": i for i, (v, o) in enumerate(SKILLS)}
_TOUCHES = {"pick block": {"block"}, "pick lid": {"lid"}, "place block": {"block", "bowl"},
            "place lid": {"lid", "bowl"}, "stack block": {"block", "lid"}, "push block": {"block"},
            "slide block": {"block"}, "open drawer": {"drawer"}, "close drawer": {"drawer"},
            "turn knob": {"knob"}}
WORDS = ("pick", "place", "stack", "push", "open", "close", "turn", "slide", "block", "lid", "drawer", "knob")
WORD_IDS = {w: i for i, w in enumerate(WORDS)}


def skill_name(skill: int) -> str:
    return " ".join(SKILLS[skill])


def valid_tasks(include_slide: bool = False) -> list[tuple[int, int]]:
    """Every ordered pair of skills on disjoint objects; pick ends holding, so it only comes last."""
    names = [n for n in SKILL_IDS if include_slide or not n.startswith("slide")]
    out = []
    for a in names:
        for b in names:
            if a != b and not a.startswith("pick") and not (_TOUCHES[a] & _TOUCHES[b]):
                out.append((SKILL_IDS[a], SKILL_IDS[b]))
    return out


def parse_task(text: str) -> tuple[int, int]:
    """'open drawer, then place block' -> skill ids; raises ValueError naming what is wrong."""
    parts = [p.strip() for p in str(text).lower().replace(" then ", ",").split(",") if p.strip()]
    if len(parts) != 2:
        raise ValueError(f"instruction {text!r} must name two skills: 'VERB OBJECT, then VERB OBJECT'")
    ids = []
    for p in parts:
        if p not in SKILL_IDS:
            raise ValueError(f"skill {p!r} is not one of {sorted(SKILL_IDS)}")
        ids.append(SKILL_IDS[p])
    if tuple(ids) not in valid_tasks(True):
        raise ValueError(f"task {text!r} is not a valid composition (pick only last, objects disjoint)")
    return ids[0], ids[1]


def task_name(task: tuple[int, int]) -> str:
    return f"{skill_name(task[0])}, then {skill_name(task[1])}"


def instruction_words(tasks: np.ndarray) -> np.ndarray:
    """(B, 2) skill ids -> (B, 4) word ids [verb1, object1, verb2, object2]."""
    table = np.array([[WORD_IDS[v], WORD_IDS[o]] for v, o in SKILLS], dtype=np.int64)
    return np.concatenate([table[tasks[:, 0]], table[tasks[:, 1]]], axis=1)


@dataclass
class World:
    """A batch of B environments (arrays of shape (B, ...))."""
    grip: np.ndarray
    closed: np.ndarray
    held: np.ndarray
    block: np.ndarray
    lid: np.ndarray
    bowl: np.ndarray
    drawer_base: np.ndarray
    opening: np.ndarray
    knob: np.ndarray
    theta: np.ndarray
    tasks: np.ndarray
    phase: np.ndarray

    @property
    def handle(self) -> np.ndarray:
        return self.drawer_base + np.stack([DRAWER_TRAVEL * self.opening, 0 * self.opening], 1)

    @property
    def done(self) -> np.ndarray:
        return self.phase >= 2

    def current_skill(self) -> np.ndarray:
        return np.where(self.done, -1, self.tasks[np.arange(len(self.phase)), np.minimum(self.phase, 1)])

    def observation(self) -> np.ndarray:
        """(B, 26): gripper xy, closed, held one-hot (4), REL_SCALE x offsets gripper->block, lid, bowl,
        handle, knob, home (12), block xy, drawer opening, cos/sin knob angle, phase one-hot (2)."""
        held = np.zeros((len(self.phase), 4))
        rows = np.nonzero(self.held >= 0)[0]
        held[rows, self.held[rows]] = 1.0
        phase = np.zeros((len(self.phase), 2))
        phase[np.arange(len(self.phase)), np.minimum(self.phase, 1)] = 1.0
        rel = [REL_SCALE * (x - self.grip) for x in (self.block, self.lid, self.bowl, self.handle, self.knob,
                                                     np.broadcast_to(HOME, self.grip.shape))]
        return np.concatenate([self.grip, self.closed[:, None], held, *rel, self.block, self.opening[:, None],
                               np.cos(self.theta)[:, None], np.sin(self.theta)[:, None], phase],
                              axis=1).astype(np.float32)

    def copy(self) -> World:
        return World(**{k: v.copy() for k, v in self.__dict__.items()})


def reset(tasks: np.ndarray, rng: np.random.Generator) -> World:
    """Random initial scenes for a (B, 2) array of tasks; the drawer starts open when a task closes it."""
    tasks = np.asarray(tasks, dtype=np.int64).reshape(-1, 2)
    b = len(tasks)

    def u(lo, hi):
        return np.stack([rng.uniform(lo[0], hi[0], b), rng.uniform(lo[1], hi[1], b)], 1)

    closes = (tasks == SKILL_IDS["close drawer"]).any(1)
    return World(grip=u((0.35, 0.78), (0.65, 0.92)), closed=np.zeros(b, bool), held=np.full(b, HELD_NONE),
                 block=u((0.36, 0.36), (0.56, 0.5)), lid=u((0.14, 0.55), (0.26, 0.72)),
                 bowl=u((0.62, 0.12), (0.85, 0.3)), drawer_base=u((0.06, 0.08), (0.1, 0.18)),
                 opening=np.where(closes, 1.0, 0.0), knob=u((0.75, 0.64), (0.9, 0.8)), theta=np.zeros(b),
                 tasks=tasks.copy(), phase=np.zeros(b, np.int64))


def _dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.norm(a - b, axis=1)


def skill_success(w: World, skill: np.ndarray) -> np.ndarray:
    """Success predicate of each environment's given skill (-1: False)."""
    s = {k: skill == i for k, i in SKILL_IDS.items()}
    held = w.held
    blk, lid, drw, knb = (held == OBJECTS.index(o) for o in OBJECTS)
    return ((s["pick block"] & blk & (_dist(w.grip, HOME) < 0.1))
            | (s["pick lid"] & lid & (_dist(w.grip, HOME) < 0.1))
            | (s["place block"] & ~blk & (_dist(w.block, w.bowl) < 0.08))
            | (s["place lid"] & ~lid & (_dist(w.lid, w.bowl) < 0.08))
            | (s["stack block"] & ~blk & (_dist(w.block, w.lid) < 0.06))
            | (s["push block"] & ~blk & (w.block[:, 0] >= 0.8))
            | (s["slide block"] & ~blk & (w.block[:, 1] >= 0.8))
            | (s["open drawer"] & ~drw & (w.opening >= 0.9))
            | (s["close drawer"] & ~drw & (w.opening <= 0.1))
            | (s["turn knob"] & ~knb & (w.theta >= 1.4)))


def step(w: World, action: np.ndarray) -> World:
    """Advance every environment by one action (in place; returns w)."""
    a = np.clip(np.nan_to_num(np.asarray(action, dtype=np.float64), nan=0.0), -1.0, 1.0)
    active = ~w.done
    close_cmd = a[:, 2] > 0
    # release
    release = active & ~close_cmd & (w.held >= 0)
    w.held = np.where(release, HELD_NONE, w.held)
    # grasp on an open -> closed transition of an empty gripper
    grasp = active & close_cmd & ~w.closed & (w.held == HELD_NONE)
    cand = np.stack([_dist(w.grip, x) for x in (w.block, w.lid, w.handle, w.knob)], 1)
    nearest = np.argmin(cand, 1)
    ok = grasp & (cand[np.arange(len(nearest)), nearest] < GRASP_R)
    w.held = np.where(ok, nearest, w.held)
    w.closed = np.where(active, close_cmd, w.closed)
    move = STEP * a[:, :2] * active[:, None]
    drawer, knob = w.held == 2, w.held == 3
    free = ~drawer & ~knob
    # constrained translation of the drawer, rotation of the knob
    w.opening = np.where(drawer, np.clip(w.opening + move[:, 0] / DRAWER_TRAVEL, 0.0, 1.0), w.opening)
    w.theta = np.where(knob & active, np.clip(w.theta + ROT_STEP * a[:, 3], 0.0, np.pi / 2), w.theta)
    new = np.clip(w.grip + move, 0.0, 1.0)
    w.grip = np.where(free[:, None], new, w.grip)
    w.grip = np.where(drawer[:, None], w.handle, w.grip)
    w.grip = np.where(knob[:, None], w.knob, w.grip)
    w.block = np.where((w.held == 0)[:, None], w.grip, w.block)
    w.lid = np.where((w.held == 1)[:, None], w.grip, w.lid)
    # a closed, empty gripper (a fist at table height) that moves into the block carries it along
    push = (active & (w.held == HELD_NONE) & w.closed & (_dist(w.block, w.grip) < PUSH_R)
            & (np.abs(move).sum(1) > 0))
    w.block = np.where(push[:, None], np.clip(w.block + move, 0.0, 1.0), w.block)
    # subtask monitor
    while True:
        adv = ~w.done & skill_success(w, w.current_skill())
        if not adv.any():
            break
        w.phase = w.phase + adv
    return w


def _toward(grip: np.ndarray, target: np.ndarray) -> np.ndarray:
    return np.clip((target - grip) / STEP, -1.0, 1.0)


def _approach(grip: np.ndarray, obj: np.ndarray) -> np.ndarray:
    """Point APPROACH short of obj on the gripper's side (grasping range, outside pushing contact)."""
    off = grip - obj
    n = np.linalg.norm(off, axis=1, keepdims=True)
    return obj + APPROACH * off / np.maximum(n, 1e-6)


def expert_action(w: World) -> np.ndarray:
    """The scripted controller of each environment's current skill: (B, 4) actions."""
    b = len(w.phase)
    act = np.zeros((b, 4))
    skill = w.current_skill()
    held = w.held
    grip = w.grip

    def grasp_carry(rows, obj_pos, obj_id, dest, release):
        g, o = grip[rows], obj_pos[rows]
        h = held[rows]
        out = np.zeros((len(rows), 4))
        holding = h == obj_id
        at_dest = _dist(g, dest[rows]) < 0.01
        carry = holding & ~(release & at_dest)
        out[carry, :2] = _toward(g[carry], dest[rows][carry])
        out[carry, 2] = 1.0
        drop = holding & release & at_dest
        out[drop, 2] = -1.0
        other = ~holding & (h >= 0)
        out[other, 2] = -1.0
        empty = h == HELD_NONE
        near = _dist(g, o) < APPROACH + 0.005
        go = empty & ~near
        out[go, :2] = _toward(g[go], _approach(g[go], o[go]))
        out[go, 2] = -1.0
        grab = empty & near
        out[grab, 2] = np.where(w.closed[rows][grab], -1.0, 1.0)  # reopen first if it closed on nothing
        return out

    home = np.broadcast_to(HOME, grip.shape)
    for name, obj_pos, obj_id, dest, release in (
            ("pick block", w.block, 0, home, False), ("pick lid", w.lid, 1, home, False),
            ("place block", w.block, 0, w.bowl, True), ("place lid", w.lid, 1, w.bowl, True),
            ("stack block", w.block, 0, w.lid, True)):
        rows = np.nonzero(skill == SKILL_IDS[name])[0]
        if len(rows):
            act[rows] = grasp_carry(rows, obj_pos, obj_id, dest, release)

    for name, axis in (("push block", 0), ("slide block", 1)):
        rows = np.nonzero(skill == SKILL_IDS[name])[0]
        if not len(rows):
            continue
        g, bl = grip[rows], w.block[rows]
        out = np.zeros((len(rows), 4))
        other = 1 - axis
        lateral = g[:, other] - bl[:, other]
        behind = bl[:, axis] - g[:, axis]
        closed = w.closed[rows]
        pushing = closed & (np.abs(lateral) < 0.015) & (behind > 0.02)
        push_dir = np.zeros((len(rows), 2))
        push_dir[:, axis] = 1.0
        push_dir[:, other] = np.clip(-lateral / STEP, -1, 1)
        start = bl.copy()
        start[:, axis] -= 0.09
        at_start = ~closed & (_dist(g, start) < 0.01)
        # travel open (raised) to behind the block, close into a fist there, push it along
        out[:, :2] = np.where(pushing[:, None], push_dir, np.where(at_start[:, None], 0.0, _toward(g, start)))
        out[:, 2] = np.where(pushing | at_start, 1.0, -1.0)
        out[held[rows] >= 0, :3] = (0.0, 0.0, -1.0)
        act[rows] = out

    for name, sign in (("open drawer", 1.0), ("close drawer", -1.0)):
        rows = np.nonzero(skill == SKILL_IDS[name])[0]
        if not len(rows):
            continue
        g, hd, d = grip[rows], w.handle[rows], w.opening[rows]
        h = held[rows]
        out = np.zeros((len(rows), 4))
        finished = (d >= 0.95) if sign > 0 else (d <= 0.05)
        holding = h == 2
        pull = holding & ~finished
        out[pull, 0] = sign
        out[pull, 2] = 1.0
        out[holding & finished, 2] = -1.0
        out[~holding & (h >= 0), 2] = -1.0
        empty = h == HELD_NONE
        near = _dist(g, hd) < APPROACH + 0.005
        go = empty & ~near
        out[go, :2] = _toward(g[go], _approach(g[go], hd[go]))
        out[go, 2] = -1.0
        grab = empty & near
        out[grab, 2] = np.where(w.closed[rows][grab], -1.0, 1.0)
        act[rows] = out

    rows = np.nonzero(skill == SKILL_IDS["turn knob"])[0]
    if len(rows):
        g, kn, th = grip[rows], w.knob[rows], w.theta[rows]
        h = held[rows]
        out = np.zeros((len(rows), 4))
        holding = h == 3
        turning = holding & (th < 1.5)
        out[turning, 2], out[turning, 3] = 1.0, 1.0
        out[holding & ~turning, 2] = -1.0
        out[~holding & (h >= 0), 2] = -1.0
        empty = h == HELD_NONE
        near = _dist(g, kn) < APPROACH + 0.005
        go = empty & ~near
        out[go, :2] = _toward(g[go], _approach(g[go], kn[go]))
        out[go, 2] = -1.0
        grab = empty & near
        out[grab, 2] = np.where(w.closed[rows][grab], -1.0, 1.0)
        act[rows] = out
    return act


@dataclass
class Demos:
    """Demonstration samples: observation, task (skill ids) and the expert action chunk after it."""
    obs: np.ndarray        # (N, OBS_DIM) float32
    tasks: np.ndarray      # (N, 2) int64
    chunks: np.ndarray     # (N, H, ACTION_DIM) float32
    episodes: int
    success: float         # fraction of the expert's episodes that succeeded

    def __len__(self) -> int:
        return len(self.obs)

    def concat(self, other: Demos) -> Demos:
        return Demos(np.concatenate([self.obs, other.obs]), np.concatenate([self.tasks, other.tasks]),
                     np.concatenate([self.chunks, other.chunks]), self.episodes + other.episodes,
                     (self.success * self.episodes + other.success * other.episodes)
                     / max(1, self.episodes + other.episodes))


def rollout_expert(tasks: np.ndarray, rng: np.random.Generator, max_steps: int = 90, noise: float = 0.0):
    """Run the expert (executed travel actions perturbed by N(0, noise) on dx, dy: DART-style) and record
    (observations, expert labels, alive mask, final world)."""
    w = reset(tasks, rng)
    obs, labels, alive = [], [], []
    for _ in range(max_steps):
        alive.append(~w.done)
        obs.append(w.observation())
        a = expert_action(w)
        labels.append(a)
        executed = a.copy()
        if noise > 0:  # perturb travel only: a still (grasping / releasing) step stays still
            moving = np.abs(a[:, :2]).max(1, keepdims=True) > 0.25
            executed[:, :2] += moving * rng.normal(0.0, noise, (len(a), 2))
        step(w, executed)
        if w.done.all():
            break
    return np.stack(obs, 1), np.stack(labels, 1).astype(np.float32), np.stack(alive, 1), w


def make_demonstrations(tasks, n: int, seed: int, horizon: int = 10, noise: float = 0.3,
                        max_steps: int = 90) -> Demos:
    """n expert episodes per task (list of (skill, skill) pairs), cut into (observation, next-`horizon`
    action chunk) samples while the episode is running; chunks past the end repeat a zero action."""
    tasks = np.asarray(tasks, dtype=np.int64).reshape(-1, 2)
    rng = np.random.default_rng(seed)
    batch = np.repeat(tasks, n, axis=0)
    obs, labels, alive, w = rollout_expert(batch, rng, max_steps, noise)
    b, t = alive.shape
    padded = np.concatenate([labels, np.zeros((b, horizon, ACTION_DIM), np.float32)], 1)
    idx = np.arange(t)[:, None] + np.arange(horizon)[None]
    chunks = padded[:, idx]                                     # (B, T, H, A)
    keep = alive
    return Demos(obs[keep], np.repeat(batch[:, None], t, 1)[keep], chunks[keep], b, float(w.done.mean()))


# Held-out compositions (zero-shot): every skill of these pairs is trained in the same position in other
# pairs; the pairs themselves never are.
ZERO_SHOT_HELD_OUT = (("close drawer", "place block"), ("open drawer", "stack block"),
                      ("turn knob", "push block"), ("push block", "close drawer"),
                      ("place block", "turn knob"), ("place lid", "pick block"), ("turn knob", "pick lid"),
                      ("open drawer", "place lid"))
# Few-shot transfer: tasks with the new verb `slide` (push's motion cluster, its own VerbNet class)
FEW_SHOT_TASKS = (("open drawer", "slide block"), ("slide block", "turn knob"), ("place lid", "slide block"),
                  ("slide block", "close drawer"))


def _ids(pairs) -> list[tuple[int, int]]:
    return [(SKILL_IDS[a], SKILL_IDS[b]) for a, b in pairs]


def zero_shot_split() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(training tasks, held-out compositions) over the base skills (no slide)."""
    held = _ids(ZERO_SHOT_HELD_OUT)
    return [t for t in valid_tasks() if t not in held], held


def few_shot_tasks() -> list[tuple[int, int]]:
    return _ids(FEW_SHOT_TASKS)
