"""The tests read nothing outside this repository (the reference tables live in fixtures/reference/)."""
from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

# paths built above the repository root: `REPO.parent`, `../shared`, `"shared" / "data"`, or `parents[N]` of a
# file N or more folders below the root
ABOVE = re.compile(r"REPO\.parent\b|\.\./shared|\"shared\" / \"data\"")
PARENTS = re.compile(r"__file__\)\.resolve\(\)\.parents\[(\d+)\]")


def test_no_test_builds_a_path_outside_the_repository() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        depth = len(path.relative_to(REPO).parts)  # tests/x.py: parents[1] is the root, parents[2] above it
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ABOVE.search(line) or any(int(n) >= depth for n in PARENTS.findall(line)):
                offenders.append(f"{path.relative_to(REPO)}:{number}")
    assert offenders == []


def test_the_reference_tables_are_here() -> None:
    reference = REPO / "fixtures" / "reference"
    assert (reference / "PROVENANCE.md").is_file()
    assert sorted(p.name for p in (reference / "zluda").glob("zluda-*-functions.tsv"))


def test_unit_and_integration_tests_are_apart() -> None:
    # tests/unit runs on the repository's fixtures; every test on real wheels (the acceptance marker) is in
    # tests/integration, and every test there is one
    marked_in_unit = [p.name for p in sorted((TESTS / "unit").glob("test_*.py"))
                      if "pytest.mark.acceptance" in p.read_text(encoding="utf-8")
                      and p.name != Path(__file__).name]
    assert marked_in_unit == []
    for path in sorted((TESTS / "integration").glob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        tests = text.count("\ndef test_")
        assert "pytestmark = pytest.mark.acceptance" in text or text.count("@pytest.mark.acceptance") == tests, path
