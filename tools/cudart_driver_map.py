#!/usr/bin/env python3
"""Write rules/runtime/cudart-to-driver.toml: the driver function each CUDA runtime function ends in.

    python tools/cudart_driver_map.py [--cuda /usr/local/cuda-13.0] [--out rules/runtime/cudart-to-driver.toml]

The source is NVIDIA's own: the CUDA Runtime API documentation is generated from the doxygen
comments of ``include/cuda_runtime_api.h``, and each function's ``\\sa`` list (the docs' "See also")
names the driver function it corresponds to (cudaMallocManaged: ``::cuMemAllocManaged``). A function
whose list names exactly one driver function is mapped to it, citing the header line and the docs
section (its ``\\defgroup``). Left out, and counted in the file's notes: functions whose list names no
driver function (nothing documented) and those naming several (which one a call ends in depends on
its arguments: cudaMemcpy names cuMemcpyDtoH, cuMemcpyHtoD, cuMemcpyDtoD, cuMemcpy), and names the
driver header ``include/cuda.h`` does not declare (a typo in a comment is not a driver function);
also a See also name other than the function's own counterpart where cuda.h declares that one
(cudaStreamGetDevice names cuStreamGetId, cuda.h has cuStreamGetDevice: a cross-reference), and the
functions in OWN_ANSWER, which cudart answers from its own facts.
Deterministic: same headers, same bytes.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

DECLARATION = re.compile(r"^extern __host__.*?CUDARTAPI\s+(cuda\w+)\s*\(")
GROUP = re.compile(r"\\defgroup\s+(CUDART_\w+)\s+(.+?)\s*(?:\*/)?\s*$")
#: a group reopened further down the header (its functions are documented in the first one's section)
ADD_TO_GROUP = re.compile(r"\\addtogroup\s+(CUDART_\w+)")
#: runtime functions whose See also names a driver function they do not end in: cudart answers them
#: itself, from its own facts (the signatures in cuda_runtime_api.h say so)
OWN_ANSWER = {
    "cudaGetErrorName": "takes a cudaError_t, an error code of the runtime (cuGetErrorName takes a CUresult)",
    "cudaGetErrorString": "takes a cudaError_t, an error code of the runtime (cuGetErrorString takes a CUresult)",
    "cudaRuntimeGetVersion": "returns the version of the runtime (cuDriverGetVersion: that of the driver)",
}
DRIVER_NAME = re.compile(r"::(cu[A-Z]\w*)")
DRIVER_DECLARATION = re.compile(r"CUresult\s+CUDAAPI\s+(cu[A-Z]\w*)\s*\(")
DOCS = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__{}.html"


def comment_before(lines: list[str], at: int) -> tuple[int, list[str]] | None:
    """The doxygen block ending just above line ``at`` (0-based): (its first line, its lines)."""
    end = at - 1
    while end >= 0 and not lines[end].rstrip().endswith("*/"):
        if lines[end].lstrip().startswith("extern") or at - end > 6:
            return None
        end -= 1
    start = end
    while start >= 0 and "/**" not in lines[start]:
        start -= 1
    return (start, lines[start:end + 1]) if start >= 0 else None


def see_also(start: int, block: list[str]) -> list[tuple[str, int]]:
    """The driver functions of the block's last ``\\sa`` list, with their 1-based line numbers."""
    marks = [n for n, line in enumerate(block) if "\\sa" in line]
    if not marks:
        return []
    return [(name, start + n + 1) for n in range(marks[-1], len(block)) for name in DRIVER_NAME.findall(block[n])]


def mapping(runtime_header: Path, driver_header: Path) -> tuple[list[dict[str, str]], dict[str, list[str]]]:
    lines = runtime_header.read_text(encoding="utf-8").split("\n")
    declared = set(DRIVER_DECLARATION.findall(driver_header.read_text(encoding="utf-8")))
    rows: list[dict[str, str]] = []
    left: dict[str, list[str]] = {"none": [], "several": [], "undeclared": [], "other": [], "own": []}
    seen: set[str] = set()
    titles: dict[str, str] = {}
    group = ("", "")
    for i, line in enumerate(lines):
        found = GROUP.search(line)
        if found:
            group = (found.group(1), found.group(2))
            titles.setdefault(group[0], group[1])
        added = ADD_TO_GROUP.search(line)
        if added:
            group = (added.group(1), titles.get(added.group(1), added.group(1)))
        decl = DECLARATION.match(line)
        if not decl or decl.group(1) in seen:
            continue
        name = decl.group(1)
        seen.add(name)
        block = comment_before(lines, i)
        drivers = see_also(*block) if block else []
        if not drivers:
            left["none"].append(name)
        elif len({d for d, _ in drivers}) > 1:
            left["several"].append(name)
        elif drivers[0][0] not in declared:
            left["undeclared"].append(f"{name} (\\sa names {drivers[0][0]}, line {drivers[0][1]})")
        elif "cu" + name[4:] in declared and drivers[0][0] != "cu" + name[4:]:
            # its own counterpart exists, and the See also names another: a cross-reference
            left["other"].append(f"{name} (\\sa names {drivers[0][0]}, cuda.h declares cu{name[4:]})")
        elif name in OWN_ANSWER:
            left["own"].append(f"{name}: {OWN_ANSWER[name]}")
        else:
            rows.append({"runtime": name, "driver": drivers[0][0], "section": group[1],
                         "doc": DOCS.format(group[0].replace("_", "__")),
                         "source": f"cuda_runtime_api.h:{drivers[0][1]}"})
    return sorted(rows, key=lambda r: r["runtime"]), left


def origin(cuda: Path, header: Path) -> str:
    """Which release the header is: the PyPI wheel whose RECORD lists it (a toolkit assembled from
    NVIDIA's wheels has their dist-info/), else the CUDART_VERSION it defines; with its SHA-256."""
    digest = hashlib.sha256(header.read_bytes()).hexdigest()
    for record in sorted(cuda.glob("dist-info/*.dist-info/RECORD")):
        for line in record.read_text(encoding="utf-8").splitlines():
            if line.split(",")[0].endswith("/include/" + header.name):
                name, version = record.parent.name.removesuffix(".dist-info").rsplit("-", 1)
                path = line.split(",")[0]
                return f"{name.replace('_', '-')} {version} (PyPI wheel by NVIDIA) {path}, sha256 {digest}"
    found = re.search(r"#define CUDART_VERSION\s+(\d+)", header.read_text(encoding="utf-8"))
    version = f"{int(found.group(1)) // 1000}.{int(found.group(1)) % 1000 // 10}" if found else "?"
    return f"NVIDIA CUDA {version} include/{header.name}, sha256 {digest}"


def toml(rows: list[dict[str, str]], left: dict[str, list[str]], runtime: str, driver: str) -> str:
    def q(text: str) -> str:
        return "'" + text.replace("'", "") + "'"

    sources = [
        f"{runtime}: the doxygen comment of each runtime function; its "
        "\\sa list is the See also of the CUDA Runtime API documentation (https://docs.nvidia.com/cuda/"
        "cuda-runtime-api/, generated from these comments) and names the driver function it corresponds to; "
        "source = the header line of that name",
        f"{driver}: the driver functions (CUresult CUDAAPI declarations); a name it "
        "does not declare is left out",
    ]
    notes = [
        "a runtime function is mapped only where its See also names exactly one driver function",
        f"left out, nothing documented (no driver function in its See also): {len(left['none'])} functions",
        "left out, several driver functions in its See also (which one a call ends in depends on its "
        "arguments): " + ", ".join(left["several"]),
        "left out, a See also name that cuda.h does not declare: " + (", ".join(left["undeclared"]) or "none"),
        "left out, a See also name other than the counterpart of the function, which cuda.h declares (a "
        "cross-reference, not the function it ends in): " + (", ".join(left["other"]) or "none"),
        "left out, answered by cudart itself (the See also names a related driver function): "
        + ("; ".join(left["own"]) or "none"),
    ]
    out = [
        "# The driver function each CUDA runtime function ends in, as NVIDIA documents it.",
        "# Generated by tools/cudart_driver_map.py from the CUDA toolkit's headers; do not edit by hand.",
        "# Read by cuda4amd.rules.cudart; judged against a ZLUDA release's driver table (scan/classify.py).",
        "",
        "[provenance]",
        "generated_by = 'tools/cudart_driver_map.py'",
        "sources = [",
        *(f"    {q(text)}," for text in sources),
        "]",
        "notes = [",
        *(f"    {q(text)}," for text in notes),
        "]",
    ]
    for row in rows:
        out += ["", "[[function]]", *(f"{key} = {q(value)}" for key, value in row.items())]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda", default="/usr/local/cuda-13.0", help="CUDA toolkit folder (with include/)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "rules" / "runtime"
                                             / "cudart-to-driver.toml"))
    args = parser.parse_args(argv)
    include = Path(args.cuda) / "include"
    rows, left = mapping(include / "cuda_runtime_api.h", include / "cuda.h")
    runtime, driver = (origin(Path(args.cuda), include / name) for name in ("cuda_runtime_api.h", "cuda.h"))
    Path(args.out).write_text(toml(rows, left, runtime, driver), encoding="utf-8")
    print(f"{args.out}: {len(rows)} functions; left out {', '.join(f'{k} {len(v)}' for k, v in left.items())}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
