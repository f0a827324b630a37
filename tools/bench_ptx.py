"""Speed of the PTX stage on real PTX: every fat binary container of the files under the given paths.

    python tools/bench_ptx.py ~/.cache/cuda4amd/wheels/unpacked/cupy_cuda12x-14.2.0-cp312-cp312-win_amd64 [...]

Every container magic at an 8-byte aligned offset with a plausible header is
taken (registered or not: the point is PTX volume), its PTX entries
decompressed (scan/read/ptx/entries.py, timed apart), then the PTX stage
proper is timed in one process: each text read (lexer check, functions,
distinct forms) once and judged at every release with rules, decisions kept
across texts, as a scan's worker keeps them. Prints MB/s of PTX text per core
and the outcomes per release. ``--floor`` times, apart, the whole-text passes every text's reading makes
(sha256, translate, split at `;` and the pieces' set, the functions' headers): what the stage could not go
below without another way of reading; the passes only some texts need (finding where a key occurs, the text
as written cut at `;`, a body stripped) are not in it.
"""
from __future__ import annotations

import argparse
import hashlib
import mmap
import struct
import sys
import time
from collections import Counter
from pathlib import Path

from cuda4amd.scan.read.ptx.entries import ptx_texts
from cuda4amd.scan.read.ptx.lexer import ZERO_DIGITS
from cuda4amd.scan.read.ptx.module import read_module
from cuda4amd.scan.read.ptx.stage import PtxStage

MAGIC = struct.pack("<I", 0xBA55ED50)


def containers(buf: mmap.mmap) -> list[int]:
    found, pos, size = [], 0, len(buf)
    while True:
        hit = buf.find(MAGIC, pos)
        if hit < 0 or hit + 16 > size:
            return found
        _m, version, hsize, length = struct.unpack_from("<IHHQ", buf, hit)
        if hit % 8 == 0 and version == 1 and hsize == 16 and hit + 16 + length <= size:
            found.append(hit)
            pos = hit + 16 + length
        else:
            pos = hit + 4


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--floor", action="store_true", help="also time the whole-text passes apart")
    args = ap.parse_args(argv)
    texts: list[bytes] = []
    files = 0
    start = time.perf_counter()
    for root in args.paths:
        for path in sorted(root.rglob("*") if root.is_dir() else [root]):
            if not path.is_file() or path.stat().st_size < 64:
                continue
            with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                offsets = containers(buf)
                if offsets:
                    files += 1
                for offset in offsets:
                    texts.extend(ptx_texts(buf, offset))
    extracted = time.perf_counter() - start
    total = sum(map(len, texts))
    stage = PtxStage.for_rules()
    outcomes: dict[str, Counter[str]] = {tag: Counter() for tag in stage.checkers}
    constructs: dict[str, Counter[str]] = {tag: Counter() for tag in stage.checkers}
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for text in texts:
        results = stage.check_text(text)  # read once for every release, as PtxStage.check does
        for (tag, checker), module in zip(stage.checkers.items(), results, strict=True):
            result = checker.choose([module])
            outcomes[tag][result.outcome] += 1
            if result.outcome != "ok":
                constructs[tag][result.construct.split(":")[0][:50] + " | " + result.source.split(" ")[0]] += 1
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    mb = total / 1e6
    print(f"{files} files, {len(texts)} PTX texts, {mb:.1f} MB of PTX; extraction+decompression {extracted:.2f} s")
    print(f"PTX stage ({len(stage.checkers)} releases): {cpu:.2f} s CPU, {wall:.2f} s wall: "
          f"{mb / max(cpu, 1e-9):.0f} MB/s per core; {sum(len(c.keys) for c in stage.checkers.values())} keys and "
          f"{sum(len(c.shapes) for c in stage.checkers.values())} shapes decided")
    if args.floor:
        floor(texts, mb)
    for tag, counts in outcomes.items():
        print(f"  {tag}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for construct, n in constructs[tag].most_common(8):
            print(f"      {n:5} {construct}")
    return 0


def floor(texts: list[bytes], mb: float) -> None:
    """CPU seconds of each whole-text pass the reading makes, on its own, over every text."""
    marked = [text.translate(ZERO_DIGITS) for text in texts]
    passes = {
        "sha256": lambda: [hashlib.sha256(text).digest() for text in texts],
        "translate (digits 0)": lambda: [text.translate(ZERO_DIGITS) for text in texts],
        "split at ; and the pieces' set": lambda: [set(text.split(b";")) for text in marked],
        "functions (read_module: .entry, .func)": lambda: [read_module(text) for text in texts],
    }
    total = 0.0
    for name, run in passes.items():
        cpu0 = time.process_time()
        run()
        cpu = time.process_time() - cpu0
        total += cpu
        print(f"  floor: {name:40} {cpu:6.2f} s CPU, {mb / max(cpu, 1e-9):5.0f} MB/s")
    print(f"  floor: all of them {total:.2f} s CPU: {mb / max(total, 1e-9):.0f} MB/s per core at most")


if __name__ == "__main__":
    sys.exit(main())
