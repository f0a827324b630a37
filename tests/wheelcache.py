"""Real CUDA wheels from PyPI, downloaded on demand into a cache (never committed)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

PLATFORM_ARGS = ["--only-binary=:all:", "--python-version", "3.12"]
WINDOWS = "win_amd64"
#: pip's platform tags for a Linux x86-64 wheel, for Linux-only wheels (NCCL, the JAX CUDA plugins):
#: pip matches each tag exactly, and these wheels carry different ones
LINUX = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
         "manylinux1_x86_64")


class Unavailable(Exception):
    """The wheel is not cached and could not be downloaded."""


def cache_dir() -> Path:
    return Path(os.environ.get("CUDA4AMD_WHEEL_CACHE", "~/.cache/cuda4amd/wheels")).expanduser()


def wheel(spec: str, platform: str | tuple[str, ...] = WINDOWS) -> Path:
    """The cached wheel for `name==version`, downloading it when absent;
    `platform`: a pip platform tag or several (Windows x86-64 unless given)."""
    tags = (platform,) if isinstance(platform, str) else tuple(platform)
    name, version = spec.split("==")
    pattern = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-*{'win' if tags[0].startswith('win') else 'linux'}*.whl"
    cache = cache_dir()
    hits = sorted(cache.glob(pattern))
    if hits:
        return hits[0]
    cache.mkdir(parents=True, exist_ok=True)
    args = [*PLATFORM_ARGS, *(arg for tag in tags for arg in ("--platform", tag))]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", *args, "-d", str(cache), spec]
    announce(f"downloading {spec} ({tags[0]}) from PyPI into {cache} ...")
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"could not fetch {spec} from PyPI: {exc}") from exc
    hits = sorted(cache.glob(pattern))
    if done.returncode != 0 or not hits:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Unavailable(f"could not fetch {spec} from PyPI: {last}")
    announce(f"downloaded {hits[0].name}: {hits[0].stat().st_size / 1e6:,.0f} MB in {time.monotonic() - started:.0f} s")
    return hits[0]


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


#: where a download is said while it runs (conftest.py points it past pytest's capture, at the terminal)
announce: Callable[[str], None] = _to_stderr


def unpacked(spec: str, platform: str | tuple[str, ...] = WINDOWS) -> Path:
    """The wheel's tree, unpacked once into the cache."""
    source = wheel(spec, platform)
    tree = cache_dir() / "unpacked" / source.stem
    marker = tree / ".complete"
    if not marker.exists():
        with zipfile.ZipFile(source) as archive:
            archive.extractall(tree)
        marker.touch()
    return tree
