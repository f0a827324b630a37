"""The docs' links and the repository paths they cite resolve.

Two checks over the repository's own text: every relative Markdown link (`[text](path)`, images too) in the
README and the Markdown files beside the code points at a file or folder that exists; and every page of `docs/`
and path under `benchmarks/` that a document, a rule file, a test, a tool or the package's source cites exists,
so that moving a log or renaming a page cannot leave a citation behind. (Rules also cite other projects' docs,
`vosen/ZLUDA docs/src/faq.md`: this repository's `docs/` has no subfolders, so only its pages are checked.)
"""
from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

MARKDOWN = sorted({REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("benchmarks/**/*.md"),
                   *REPO.glob("tools/**/*.md"), *REPO.glob("fixtures/**/*.md")})
CITING = sorted({*MARKDOWN, *REPO.glob("rules/**/*.toml"), *REPO.glob("tests/**/*.py"), *REPO.glob("tools/**/*.py"),
                 *REPO.glob("scanner/**/*.py")} - {Path(__file__)})

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# not after a word, a folder, `$VAR/` or `COMMIT:` (a `git show` of an older tree)
CITED = re.compile(r"(?<![\w/.:$-])(benchmarks/[\w.-]*(?:/[\w.-]+)*/?|docs/[\w.-]+\.(?:md|png)\b)")


def relative_links(text: str) -> list[str]:
    """The link targets of a Markdown text that name a file of this repository (no scheme, no bare anchor)."""
    targets = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if target.startswith("#") or re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def cited_paths(text: str) -> list[str]:
    """The pages of docs/ and paths under benchmarks/ a text cites, without the sentence's closing punctuation."""
    return [match.group(1).rstrip(".,") for match in CITED.finditer(text)]


def test_the_patterns_find_what_they_should() -> None:
    text = ("see [the rules](docs/rules.md#kinds), ![graph](report-graph.png), [web](https://example.com/x.md), "
            "[here](#layout); logs in `benchmarks/device/x.log`. And docs/performance.md. Not "
            "tools/docs/y.md, $HOME/benchmarks/z, vosen/ZLUDA docs/src/faq.md, `git show 1a2b3c4:docs/bench/`")
    assert relative_links(text) == ["docs/rules.md", "report-graph.png"]
    assert cited_paths(text) == ["docs/rules.md", "benchmarks/device/x.log", "docs/performance.md"]


def test_every_relative_markdown_link_resolves() -> None:
    broken = [f"{page.relative_to(REPO)}: {target}" for page in MARKDOWN
              for target in relative_links(page.read_text(encoding="utf-8"))
              if target and not (page.parent / target).exists()]
    assert not broken, broken


def test_every_cited_docs_or_benchmarks_path_exists() -> None:
    missing = [f"{source.relative_to(REPO)}: {path}" for source in CITING
               for path in cited_paths(source.read_text(encoding="utf-8"))
               if not (REPO / path).exists()]
    assert not missing, missing


def test_the_checks_cover_the_docs_and_the_rules() -> None:
    names = {path.relative_to(REPO).as_posix() for path in CITING}
    assert {"README.md", "docs/performance.md", "docs/design.md", "benchmarks/README.md",
            "rules/frameworks/torch.toml"} <= names
    assert "tests/unit/test_evidence.py" in names and "scanner/cli/scan.py" in names


def test_nothing_cites_the_log_folders_that_moved_to_benchmarks() -> None:
    old = re.compile(r"(?<![\w/.:-])docs/(?:bench|gpu-truth|evidence)/")
    stale = [f"{source.relative_to(REPO)}: {match.group(0)}" for source in CITING
             for match in old.finditer(source.read_text(encoding="utf-8"))]
    assert not stale, stale
