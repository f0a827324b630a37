"""Real CUDA wheels from PyPI, downloaded on demand into a cache (never committed)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

PLATFORM_ARGS = ["--only-binary=:all:", "--platform", "win_amd64", "--python-version", "3.12"]
#: Linux-only wheels (NCCL has no Windows build)
LINUX = "manylinux_2_27_x86_64"


class Unavailable(Exception):
    """The wheel is not cached and could not be downloaded."""


def cache_dir() -> Path:
    return Path(os.environ.get("CUDA4AMD_WHEEL_CACHE", "~/.cache/cuda4amd/wheels")).expanduser()


def wheel(spec: str, platform: str = "win_amd64") -> Path:
    """The cached wheel for `name==version` (for `platform`), downloading it when absent."""
    name, version = spec.split("==")
    pattern = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-*{'win' if platform.startswith('win') else 'linux'}*.whl"
    cache = cache_dir()
    hits = sorted(cache.glob(pattern))
    if hits:
        return hits[0]
    cache.mkdir(parents=True, exist_ok=True)
    args = [a if a != "win_amd64" else platform for a in PLATFORM_ARGS]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", *args, "-d", str(cache), spec]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"could not fetch {spec} from PyPI: {exc}") from exc
    hits = sorted(cache.glob(pattern))
    if done.returncode != 0 or not hits:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Unavailable(f"could not fetch {spec} from PyPI: {last}")
    return hits[0]


def unpacked(spec: str, platform: str = "win_amd64") -> Path:
    """The wheel's tree, unpacked once into the cache."""
    source = wheel(spec, platform)
    tree = cache_dir() / "unpacked" / source.stem
    marker = tree / ".complete"
    if not marker.exists():
        with zipfile.ZipFile(source) as archive:
            archive.extractall(tree)
        marker.touch()
    return tree
