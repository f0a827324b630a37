"""Run cuda4amd's PTX check over ZLUDA's own test PTX at a tag: every test ZLUDA runs must be `ok`.

    python tools/check_zluda_test_ptx.py --mirror /work/.mirror/vosen+ZLUDA/repo --tag v6 [--tag ...] [-v]

The PTX is read from a fetched mirror of vosen/ZLUDA (``git show``; nothing
is copied into this repository). The tests are those ptx/src/test/spirv_run/
mod.rs invokes (``test_ptx!(name, ...)`` and its siblings, not commented
out) and those ptx/src/test/mod.rs includes (``include_str!("x.ptx")``);
files no active test names are ZLUDA's disabled tests and are counted apart.
Exit status 1 when an active test is not ok.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from cuda4amd.rules.ptx_rules import load_ptx_rules
from cuda4amd.scan.read.ptx import PtxChecker

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "-C", mirror, *args], check=True, capture_output=True, text=True).stdout


def active_tests(mirror: str, tag: str) -> tuple[set[str], set[str]]:
    """(names spirv_run/mod.rs runs, .ptx files test/mod.rs includes), comments removed first."""
    run = _COMMENT.sub("", _git(mirror, "show", f"{tag}:ptx/src/test/spirv_run/mod.rs"))
    names = set(re.findall(r"\btest_\w*!\(\s*(\w+)", run))
    top = _COMMENT.sub("", _git(mirror, "show", f"{tag}:ptx/src/test/mod.rs"))
    return names, set(re.findall(r'include_str!\("([^"]+\.ptx)"\)', top))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", required=True)
    ap.add_argument("--tag", action="append", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    rules = load_ptx_rules()
    status = 0
    for tag in args.tag:
        checker = PtxChecker(rules[tag])
        names, included = active_tests(args.mirror, tag)
        files = [f for f in _git(args.mirror, "ls-tree", "-r", "--name-only", tag, "ptx/src/test/").split()
                 if f.endswith(".ptx")]
        counts = {"active": 0, "ok": 0, "disabled": 0}
        failed = []
        for path in files:
            stem = Path(path).stem
            parent = Path(path).parent.as_posix()
            if parent.startswith("ptx/src/test/spirv_run"):
                active = stem in names
            elif parent == "ptx/src/test":
                active = Path(path).name in included
            else:
                active = False  # spirv_fail/, spirv_build/: not run as passing tests
            if not active:
                counts["disabled"] += 1
                continue
            counts["active"] += 1
            result = checker.check_module(_git(args.mirror, "show", f"{tag}:{path}").encode())
            if result.outcome == "ok":
                counts["ok"] += 1
            else:
                failed.append((path, result))
        print(f"{tag}: {counts['ok']} of {counts['active']} active test modules ok "
              f"({counts['disabled']} files not run by ZLUDA's tests skipped)")
        for path, result in failed:
            print(f"  {path}: {result.outcome}: {result.construct} ({result.source})")
            status = 1
        if args.verbose:
            print(f"  {len(checker.shapes)} distinct statement shapes decided")
    return status


if __name__ == "__main__":
    sys.exit(main())
