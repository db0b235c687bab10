"""`make bench`: runs every tests/benchmarks/bench_*.py, then regenerates the README tables.

Each benchmark writes its figures to results/<name>.json and exposes
`table(results) -> str` (markdown); the README holds each table between
`<!-- bench:<name> -->` and `<!-- /bench:<name> -->`. `--tables-only` skips the
runs and rebuilds the tables from the committed results.
"""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parent.parent / "README.md"


def benches() -> list[Path]:
    return sorted(HERE.glob("bench_*.py"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replace_section(text: str, name: str, body: str) -> str:
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{body}\n{end}"
    if start in text:
        return re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    return text.replace("<!-- /benchmarks -->", f"{block}\n\n<!-- /benchmarks -->")


def update_readme() -> None:
    text = README.read_text()
    for path in benches():
        name = path.stem.removeprefix("bench_")
        results = HERE / "results" / f"{name}.json"
        module = load(path)
        if results.exists() and hasattr(module, "table"):
            text = replace_section(text, name, module.table(json.loads(results.read_text())))
    README.write_text(text)


def main(argv: list[str]) -> int:
    failed = []
    if "--tables-only" not in argv:
        for path in benches():
            print(f"== {path.name}", flush=True)
            if subprocess.run([sys.executable, str(path)]).returncode != 0:
                failed.append(path.name)
    update_readme()
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
