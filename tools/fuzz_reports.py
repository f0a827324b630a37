"""Fuzz the saved-report readers: mutants of the golden scan reports through `cuda4amd report`, `diff`
and `matrix`, counting tracebacks (any exception other than click's exit).

    python tools/fuzz_reports.py --mutants 3000 --seed 1

A mutant changes one to three places of a golden report: a value replaced by one of another type (or
a huge, empty, negative or hostile one), a key dropped or added, a list emptied or doubled, the schema
id set to an earlier or unknown version, deep nesting grafted on; a tenth of them are written as TOML.
Prints the counts and each traceback's place; exit status 1 when there was any traceback.
"""
from __future__ import annotations

import argparse
import copy
import json
import random
import re
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

GOLDENS = Path(__file__).resolve().parent.parent / "tests" / "goldens"
ODD_VALUES: list[Any] = [None, 0, -1, 1.5, 10**30, "", "x" * 300, "\x1b[2J=cmd|' /C calc'!A0", True, [], {},
                         [None], {"": None}, [[[]]], "../../etc/passwd", "cuda4amd.scan/3"]
HOSTILE_STRINGS = ["", "x" * 5000, "\x1b]8;;https://evil.example\x07link", "[a](https:evil) <img src=x>",
                   "=HYPERLINK(\"x\")", "\r\n\t|", "/home/bob/app", "C:\\Users\\bob\\x.dll", "ready", "blocked"]
DEEP = "@@deep@@"
DEEP_TEXT = re.compile(r'"@@deep@@(\d+)"')
SCHEMAS = ["cuda4amd.scan/1", "cuda4amd.scan/2", "cuda4amd.scan/3", "cuda4amd.scan/9", 3, None]


def places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indexes) into `value`."""
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:8]):
            out += places(item, (*path, index))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


def mutate(doc: dict, rng: random.Random) -> dict:
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        all_places = places(doc)[1:]
        if not all_places:
            break
        path = rng.choice(all_places)
        parent, key = _parent(doc, path), path[-1]
        kind = rng.random()
        if kind < 0.3 and isinstance(parent[key], (str, int)) and not isinstance(parent[key], bool):
            # the same type, another value: what passes the schema reaches every renderer
            parent[key] = rng.choice(HOSTILE_STRINGS) if isinstance(parent[key], str) else \
                rng.choice([0, -1, 2**63, 10**30])
        elif kind < 0.55:
            parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))
        elif kind < 0.7 and isinstance(parent, dict):
            del parent[key]
        elif kind < 0.8 and isinstance(parent[key], list):
            parent[key] = [] if rng.random() < 0.5 else parent[key] * 2
        elif kind < 0.9 and isinstance(parent[key], dict):
            parent[key][rng.choice(["x", "path", "verdict", "name", "schema"])] = rng.choice(ODD_VALUES)
        else:  # nesting grafted on as text (DEEP is replaced when written): deeper than json.dumps goes
            parent[key] = f"{DEEP}{rng.choice([10, 70, 2000, 100_000])}"
    if rng.random() < 0.15:
        doc["schema"] = rng.choice(SCHEMAS)
    return doc


def without_nulls(value: Any) -> Any:
    """TOML has no null: left out, as the TOML writer does."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value if v is not None]
    return value


def run(mutants: int, seed: int, *, echo: Any = print) -> dict[str, Any]:
    """Run `mutants` mutants through report, diff and matrix; the counts and the traceback places."""
    from click.testing import CliRunner

    from cuda4amd.cli.matrix import matrix
    from cuda4amd.cli.report import diff, report

    rng = random.Random(seed)
    bases = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(GOLDENS.glob("*/scan.json"))]
    runner = CliRunner()
    exits: Counter[str] = Counter()
    crashes: Counter[str] = Counter()
    formats = ["console", "markdown", "json", "toml"]
    with tempfile.TemporaryDirectory() as tmp:
        good = Path(tmp) / "good.json"
        good.write_text(json.dumps(bases[0]), encoding="utf-8")
        for n in range(mutants):
            doc = mutate(rng.choice(bases), rng)
            path = Path(tmp) / f"m{n % 4}.json"
            if rng.random() < 0.1:
                import tomli_w

                path = path.with_suffix(".toml")
                text = tomli_w.dumps(without_nulls(doc))
            else:
                text = json.dumps(doc)
            path.write_text(DEEP_TEXT.sub(lambda m: "[" * int(m[1]) + "1" + "]" * int(m[1]), text), encoding="utf-8")
            fmt = formats[n % len(formats)]
            calls = [(report, [str(path), "--format", fmt, "-v"]),
                     (diff, [str(good), str(path)] if n % 2 else [str(path), str(good)]),
                     (matrix, [str(path), str(good)])]
            for command, args in calls:
                result = runner.invoke(command, args, catch_exceptions=True)
                exits[f"{command.name} exit {result.exit_code}"] += 1
                if result.exception is not None and not isinstance(result.exception, SystemExit):
                    frame = traceback.extract_tb(result.exception.__traceback__)[-1]
                    crashes[f"{type(result.exception).__name__} at {frame.filename}:{frame.lineno}"] += 1
    total = sum(crashes.values())
    echo(f"{mutants} mutants x 3 commands: {total} tracebacks at {len(crashes)} places")
    for where, count in crashes.most_common():
        echo(f"  {count:5d}  {where}")
    for what, count in sorted(exits.items()):
        echo(f"  {what}: {count}")
    return {"mutants": mutants, "tracebacks": total, "places": dict(crashes), "exits": dict(exits)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    return 1 if run(args.mutants, args.seed)["tracebacks"] else 0


if __name__ == "__main__":
    sys.exit(main())
