"""Specs → artifacts: the files a census scans, each named by its sha256 (docs/census.md)."""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: archives a census scans (the ones `cuda4amd scan` reads as an archive target)
ARCHIVE_SUFFIXES = (".whl", ".zip")
#: bytes read at a time while hashing
CHUNK = 1 << 20
#: `name==version`, as pip's requirement syntax writes a pinned distribution (PEP 508, no extras or markers)
PINNED = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)\s*$")


@dataclass(frozen=True)
class Artifact:
    """One file to scan: where it is here, its content's sha256 and its size."""

    path: str
    sha256: str
    size: int

    @property
    def name(self) -> str:
        return Path(self.path).name


@dataclass
class Plan:
    artifacts: list[Artifact] = field(default_factory=list)
    #: what could not become an artifact: {"source", "reason"}
    problems: list[dict[str, str]] = field(default_factory=list)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def pip_download(name: str, version: str, platforms: Sequence[str], dest: Path) -> list[Path]:
    """The wheels of `name==version` for `platforms` (all pip would pick for this machine when none), fetched with
    pip's own machinery into `dest`. pip prints which files it saved, but not in a stable form; the files are
    found by the wheel name's distribution and version (PEP 427: both normalised with `_` for `-`)."""
    dest.mkdir(parents=True, exist_ok=True)
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(dest),
            "--quiet", f"{name}=={version}"]
    runs = [[*base, "--platform", p] for p in platforms] or [base]
    for command in runs:
        subprocess.run(command, check=True, stdin=subprocess.DEVNULL)
    prefix = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version.replace('-', '_')}-"
    return sorted(p for p in dest.iterdir() if p.suffix == ".whl" and p.name.lower().startswith(prefix.lower()))


def _requirements(path: Path) -> Iterable[str]:
    """The `name==version` lines of a requirements file (comments, blank lines and pip options skipped)."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            yield line


def plan(specs: Iterable[str], platforms: Sequence[str] = (), wheel_cache: Path | None = None,
         download: Callable[[str, str, Sequence[str], Path], list[Path]] = pip_download) -> Plan:
    """Each spec: a wheel (or .zip) file, a folder of them (searched below), a requirements file of `name==version`
    lines, or `name==version` (downloaded into `wheel_cache`). The same content named twice is one artifact."""
    out = Plan()
    files: list[Path] = []

    def pinned(text: str, source: str) -> None:
        match = PINNED.match(text)
        if match is None:
            out.problems.append({"source": source, "reason": f"not a wheel, folder, requirements file or "
                                                             f"name==version: {text!r}"})
            return
        if wheel_cache is None:
            out.problems.append({"source": source, "reason": "no wheel cache folder to download into"})
            return
        try:
            got = download(match[1], match[2], platforms, wheel_cache)
        except (OSError, subprocess.CalledProcessError) as exc:
            out.problems.append({"source": source, "reason": f"pip download failed: {exc}"})
            return
        if not got:
            out.problems.append({"source": source, "reason": "pip downloaded no wheel for the platforms asked"})
        files.extend(got)

    for spec in specs:
        path = Path(spec)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix.lower() in ARCHIVE_SUFFIXES and p.is_file()))
        elif path.is_file() and path.suffix.lower() in ARCHIVE_SUFFIXES:
            files.append(path)
        elif path.is_file():
            for line in _requirements(path):
                pinned(line, f"{spec}: {line}")
        else:
            pinned(spec, spec)
    seen: set[str] = set()
    for file in files:
        try:
            artifact = Artifact(str(file.resolve()), sha256_of(file), file.stat().st_size)
        except OSError as exc:
            out.problems.append({"source": str(file), "reason": f"unreadable: {exc.strerror or exc}"})
            continue
        if artifact.sha256 not in seen:
            seen.add(artifact.sha256)
            out.artifacts.append(artifact)
    return out
