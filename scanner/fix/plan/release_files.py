"""The release files a plan takes: each linked family's top-level files, the launcher's
(Windows) or the LD_AUDIT module (Linux), and the targets of the release's links."""
from __future__ import annotations

from typing import TYPE_CHECKING

from cuda4amd.fix.plan.model import STORE_DIR, PlanError

if TYPE_CHECKING:
    from cuda4amd.fix.plan.green_lit import GreenLit
    from cuda4amd.rules.releases import ZludaFile, ZludaRelease
    from cuda4amd.rules.ruleset import RuleSet

__all__ = ["LINUX_AUDIT_FILES", "WINDOWS_LAUNCHER_FILES", "is_executable", "release_part", "resolve_row"]

#: the release files zluda.exe (or v5's zluda_with.exe) needs to start a program
WINDOWS_LAUNCHER_FILES = ("zluda.exe", "zluda_with.exe", "zluda_redirect.dll")
LINUX_AUDIT_FILES = ("libzluda_ld.so", "zluda_ld")


def release_part(rules: RuleSet, release: ZludaRelease, platform: str, chosen: GreenLit,
                 mode: str) -> tuple[list[ZludaFile], bool, str | None]:
    """(the release rows the plan copies, whether Linux needs LD_AUDIT, the
    Windows launcher zluda.exe relative to the root or None)."""
    ld_audit = platform == "linux" and mode == "launcher" and any(
        d.in_tree and d.how != "runpath" for d in chosen.linked)
    files = _release_files(rules, release, platform, chosen.families, mode, ld_audit)
    launcher_exe: str | None = None
    if platform == "windows" and mode == "launcher":
        listed = {f.path for f in release.files if f.platform == platform}
        exe = next((n for n in ("zluda.exe", "zluda_with.exe") if n in listed), None)
        if exe is None:
            raise PlanError(f"ZLUDA {release.tag} ships no launcher (zluda.exe) for Windows: use --mode place")
        launcher_exe = f"{STORE_DIR}/{exe}"
    return files, ld_audit, launcher_exe


def resolve_row(listed: dict[str, ZludaFile], path: str | None) -> str | None:
    """The release path a row's links lead to (the row's own when it is no link)."""
    seen: set[str] = set()
    while path in listed and listed[path].link_to and path not in seen:
        seen.add(path)
        path = listed[path].link_to
    return path


def _release_files(rules: RuleSet, release: ZludaRelease, platform: str, families: list[str], mode: str,
                   ld_audit: bool) -> list[ZludaFile]:
    """The release rows the link uses: each linked family's top-level files,
    the launcher's (Windows) or the LD_AUDIT module (Linux), and link targets."""
    rows = {f.path: f for f in release.files if f.platform == platform}
    libraries: set[str] = set()
    for fam in families:
        family = rules.family(fam)
        if family is not None:
            libraries.update(family.zluda_libraries)
    chosen = {p for p, f in rows.items() if "/" not in p and f.library in libraries}
    if mode == "launcher":
        extra = WINDOWS_LAUNCHER_FILES if platform == "windows" else (LINUX_AUDIT_FILES if ld_audit else ())
        chosen |= {p for p in extra if p in rows}
        if platform == "linux" and ld_audit and "zluda_ld" not in rows:
            raise PlanError(f"ZLUDA {release.tag} has no zluda_ld (LD_AUDIT) for Linux, which this application "
                            f"needs (an RPATH or a load by full path would find NVIDIA's library first)")
    more = list(chosen)
    while more:
        f = rows[more.pop()]
        if f.link_to and f.link_to in rows and f.link_to not in chosen:
            chosen.add(f.link_to)
            more.append(f.link_to)
    if not any(rows[p].library == "driver" for p in chosen):
        raise PlanError(f"ZLUDA {release.tag} lists no driver library for {platform}")
    return [rows[p] for p in sorted(chosen)]


def is_executable(path: str, platform: str) -> bool:
    """Whether a release file is a program (Linux: not a shared library)."""
    name = path.rsplit("/", 1)[-1]
    return platform == "linux" and ".so" not in name


