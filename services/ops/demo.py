"""`make demo` for ops, the platform's own smoke check (it runs first): one digest job end to
end, its result recomputed here with hashlib and its artifact pulled (sha256-verified)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE

SEED, STEPS, ROUNDS = 2026, 40, 50_000


def run(client, out: Path) -> None:
    job = client.submit("ops", "digest", seed=SEED, steps=STEPS, rounds_per_step=ROUNDS)
    console.print(f"submitted [bold]{job.id}[/] (ops digest: {STEPS} steps × {ROUNDS} sha256)")
    done = follow(client, job.id, "ops.digest")
    if PROTO_TO_STATE[done.state] != "SUCCEEDED":
        raise SystemExit(f"job ended {PROTO_TO_STATE[done.state]}: {done.error.message}")
    state = hashlib.sha256(SEED.to_bytes(8, "little")).digest()
    for _ in range(STEPS * ROUNDS):
        state = hashlib.sha256(state).digest()
    match = state.hex() == done.result["digest"]
    paths = client.pull_artifacts(job.id, out)
    checkpoints = json.loads(paths[0].read_text())["checkpoints"]
    console.print(f"result digest {done.result['digest']}")
    console.print(f"recomputed    {state.hex()}  " + ("[green]match[/]" if match else "[red]MISMATCH[/]"))
    console.print(f"artifact {paths[0].name}: {len(checkpoints)} checkpoints (sha256-verified pull)")
    if not match:
        raise SystemExit("ops digest does not match its recomputation")
