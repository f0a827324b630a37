"""Helpers to replay recorded host outputs (tests, bug reports, demos).

    text = read_recorded(FIXTURES / "host/hipinfo/win_rx7900xtx_hipsdk62.txt")   # header stripped
    build_tree(tmp / "rocm64", FIXTURES / "host/sdk/win-hipsdk-6.4.manifest")
    probes = windows_probes(mounts={"C:\\Program Files\\AMD\\ROCm\\6.4": tmp / "rocm64"},
                            env={"HIP_PATH": "C:\\Program Files\\AMD\\ROCm\\6.4\\"},
                            commands={"hipinfo": text}, hip=HipRuntimeResult(...))

Recorded files start with a header of '# ' lines saying where the output
came from; ``read_recorded`` drops it. A manifest lists one relative path a
line (created empty) or ``path <- file`` (content copied from ``file``, next
to the manifest).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from cuda4amd.host.probes import (
    CommandResult,
    HipRuntimeResult,
    MountedFileSystem,
    PrivateStrings,
    Probes,
    RecordedCommands,
    RecordedEnvironment,
    RecordedHipRuntime,
)

__all__ = ["build_tree", "linux_probes", "read_recorded", "windows_probes"]


def read_recorded(path: str | os.PathLike[str]) -> str:
    lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        i += 1
    return "".join(lines[i:])


def build_tree(root: str | os.PathLike[str], manifest: str | os.PathLike[str],
               contents: Mapping[str, bytes] | None = None) -> Path:
    """Create the files a manifest lists under `root`; `contents` overrides
    file contents by relative path."""
    root = Path(root)
    manifest = Path(manifest)
    for line in read_recorded(manifest).splitlines():
        line = line.strip()
        if not line:
            continue
        rel, _, src = (x.strip() for x in line.partition(" <- "))
        dest = root.joinpath(*rel.split("/"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        if contents and rel in contents:
            dest.write_bytes(contents[rel])
        elif src:
            dest.write_bytes((manifest.parent / src).read_bytes())
        else:
            dest.write_bytes(b"")
    for rel, data in (contents or {}).items():
        dest = root.joinpath(*rel.split("/"))
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
    return root


def _probes(platform: str, mounts: Mapping[str, str | os.PathLike[str]] | None,
            env: Mapping[str, str] | None, commands: Mapping[str, CommandResult | str] | None,
            hip: HipRuntimeResult | None, private: PrivateStrings | None, os_description: str) -> Probes:
    return Probes(
        env=RecordedEnvironment(platform, env or {}, os_description, private),
        fs=MountedFileSystem(mounts or {}, platform),
        commands=RecordedCommands(commands or {}),
        hip=RecordedHipRuntime(hip or HipRuntimeResult(error="amdhip64_7.dll: not found; amdhip64_6.dll: not found")),
    )


def windows_probes(mounts: Mapping[str, str | os.PathLike[str]] | None = None, env: Mapping[str, str] | None = None,
                   commands: Mapping[str, CommandResult | str] | None = None, hip: HipRuntimeResult | None = None,
                   private: PrivateStrings | None = None, os_description: str = "Windows 10.0.26100") -> Probes:
    base = {"SystemRoot": "C:\\Windows", "ProgramFiles": "C:\\Program Files"}
    return _probes("windows", mounts, {**base, **(env or {})}, commands, hip, private, os_description)


def linux_probes(mounts: Mapping[str, str | os.PathLike[str]] | None = None, env: Mapping[str, str] | None = None,
                 commands: Mapping[str, CommandResult | str] | None = None, private: PrivateStrings | None = None,
                 os_description: str = "Linux 6.8.0") -> Probes:
    return _probes("linux", mounts, env, commands, None, private, os_description)
