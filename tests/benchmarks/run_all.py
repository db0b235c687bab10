"""`make bench`: runs every tests/benchmarks/bench_*.py, then regenerates the tables.

Each benchmark writes its figures to results/<name>.json and exposes
`table(results) -> str` (markdown). docs/benchmarks.md holds each full table between
`<!-- bench:<name> -->` and `<!-- /bench:<name> -->`; the README's summary (between
`<!-- benchmarks -->` and `<!-- /benchmarks -->`) is one row per benchmark: the first row
of its full table, cells named by their column. `--tables-only` skips the runs and
rebuilds the tables from the committed results.

A service benchmark may also expose `claims(results) -> str`: its service README's table of
what reproduces, written between `<!-- bench:claims -->` and `<!-- /bench:claims -->` in
services/<name>/README.md, so no number in that table is typed by hand; and
`readme_sections() -> {marker: str}` for tables from its other results files (each between
`<!-- bench:<marker> -->` and `<!-- /bench:<marker> -->`).
"""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs" / "benchmarks.md"


def benches() -> list[Path]:
    return sorted(HERE.glob("bench_*.py"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replace_between(text: str, start: str, end: str, body: str) -> str:
    block = f"{start}\n{body}\n{end}"
    return re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)


def replace_section(text: str, name: str, body: str) -> str:
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{body}\n{end}"
    if start in text:
        return re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    return text.replace("<!-- /benchmarks -->", f"{block}\n\n<!-- /benchmarks -->")


def tables() -> dict[str, str]:
    """name -> the full markdown table, for every benchmark with committed results."""
    found = {}
    for path in benches():
        name = path.stem.removeprefix("bench_")
        results = HERE / "results" / f"{name}.json"
        module = load(path)
        if results.exists() and hasattr(module, "table"):
            found[name] = module.table(json.loads(results.read_text()))
    return found


def headline(table: str) -> str:
    """The first row of a markdown table, each cell prefixed by its column's name."""
    rows = [line for line in table.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    first = [c.strip() for c in rows[2].strip("|").split("|")]
    return " · ".join(f"{h}: {c}" if h else c for h, c in zip(header, first, strict=False))


def summary(found: dict[str, str]) -> str:
    lines = ["| benchmark | headline (first row of the full table) |", "|---|---|"]
    lines += [f"| [{name}](docs/benchmarks.md#{name}) | {headline(table)} |" for name, table in found.items()]
    return "\n".join(lines)


def update_claims() -> None:
    """Each service README's claims table from its benchmark's committed results."""
    for path in benches():
        name = path.stem.removeprefix("bench_")
        results, readme = HERE / "results" / f"{name}.json", ROOT / "services" / name / "README.md"
        module = load(path)
        if results.exists() and readme.exists() and hasattr(module, "claims"):
            text = readme.read_text()
            start, end = "<!-- bench:claims -->", "<!-- /bench:claims -->"
            if start not in text:
                raise SystemExit(f"{readme}: add {start} {end} where the claims table goes")
            text = replace_between(text, start, end, module.claims(json.loads(results.read_text())))
            # further tables a benchmark writes from its other results files, each in its own block
            for marker, body in getattr(module, "readme_sections", dict)().items():
                text = replace_between(text, f"<!-- bench:{marker} -->", f"<!-- /bench:{marker} -->", body)
            readme.write_text(text)


def update_tables() -> None:
    update_claims()
    found = tables()
    docs = DOCS.read_text()
    for name, table in found.items():
        docs = replace_section(docs, name, table)
    DOCS.write_text(docs)
    README.write_text(replace_between(README.read_text(), "<!-- benchmarks -->", "<!-- /benchmarks -->",
                                      summary(found)))


def main(argv: list[str]) -> int:
    failed = []
    if "--tables-only" not in argv:
        for path in benches():
            print(f"== {path.name}", flush=True)
            if subprocess.run([sys.executable, str(path)]).returncode != 0:
                failed.append(path.name)
    update_tables()
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
