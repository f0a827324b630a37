"""Compare what workloads really did on an NVIDIA GPU with what a cuda4amd scan predicted.

Pure functions over plain data (the probe results and the scan's JSON
report), so they are tested without a GPU (tests/unit/test_gpu_truth.py).

    summary = compare(probes, report, site, family_of, PACKAGES)

Re-judging a recorded run offline (the probes of its gpu-truth.json against
a scan report, e.g. a new scan of a copy of the same site-packages):

    python tools/gpu_truth/compare.py --probes OUT/gpu-truth.json --scan OUT/scan.json [--markdown FILE]

`probes`: [{op, mode ("normal" | "ptx-jit"), ok, error, maps: [paths]}];
`report`: the `cuda4amd scan SITE --format json` document; `site` the
scanned site-packages folder (maps paths below it are compared with the
report's binary paths); `family_of(basename)`: the NVIDIA family id of a
library file name or None (cuda4amd's rules).
"""
from __future__ import annotations

import argparse
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterable

#: workload package -> the distributions whose binaries predict its loads
PACKAGES: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "cupy": ("cupy-cuda13x", "cupy-cuda12x", "cupy"),
    "jax": ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin", "jax-cuda12-pjrt"),
    "triton": ("triton", "torch"),
    "numba-cuda": ("numba-cuda", "numba", "cuda-bindings", "cuda-core", "cuda-pathfinder", "cuda-python"),
}

_PLACEHOLDER = re.compile(r"\{[A-Za-z0-9_]*\}|%[-+ #0]*[0-9]*[diuxXs]")


def template_regex(name: str) -> re.Pattern[str]:
    """A reported name with placeholders as a regex (``libcublas.so.{version}``
    matches ``libcublas.so.13``)."""
    parts = _PLACEHOLDER.split(name)
    return re.compile("[A-Za-z0-9_.]+".join(re.escape(p) for p in parts) + r"\Z")


def _norm(name: str) -> str:
    return re.sub(r"[-_]", "-", name.lower())


def reached(report: dict, distributions: Iterable[str]) -> tuple[set[str], list[str]]:
    """(in-tree binary paths reachable from the distributions' binaries and
    from the files their framework rules' by-name loads resolved to
    (packages[].loads[].resolved), by their dependencies; names of
    dependencies not resolved in the tree, plus those by-name loads)."""
    wanted = {_norm(d) for d in distributions}
    binaries = {b["path"]: b for b in report.get("binaries", [])}
    todo = [p for p, b in binaries.items() if _norm(b.get("distribution") or "") in wanted]
    outside: list[str] = []
    for package in report.get("packages", []):
        if _norm(package["name"]) in wanted:
            for load in package.get("loads", []):
                outside.append(load["name"])
                if load.get("resolved") in binaries:
                    todo.append(load["resolved"])
    seen: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for dep in binaries[path].get("dependencies", []):
            resolved = dep.get("resolved")
            if resolved in binaries:
                todo.append(resolved)
            else:
                outside.append(dep["name"])
    return seen, outside


def relative(path: str, site: str) -> str | None:
    site = site.rstrip("/") + "/"
    real = os.path.normpath(path)
    return real[len(site):] if real.startswith(site) else None


def _so_stem(name: str) -> str:
    """``libcuda.so.580.159.04`` and ``libcuda.so.1`` -> ``libcuda.so`` (the
    driver's files carry the driver version, their sonames only ``.1``)."""
    i = name.find(".so")
    return name[:i + 3] if i >= 0 else name


def classify_loads(maps: Iterable[str], site: str, family_of: Callable[[str], str | None],
                   tree: set[str], outside: list[str], replaced: set[str] = frozenset()) -> dict[str, list[str]]:
    """The NVIDIA libraries among mapped paths, sorted into
    predicted (a binary the scan reaches, or a name/template it lists, or the
    same file name up to its version tail), behind-replaced (loaded by an
    NVIDIA library ZLUDA replaces, e.g. cuDNN 9's sub-libraries: under ZLUDA
    they are not loaded), family (only a library of the same family was
    predicted), missed, and driver (the driver's own helpers outside the
    scanned tree: libnvidia-ptxjitcompiler, not loaded by the package)."""
    names = [n for n in outside if not _PLACEHOLDER.search(n)]
    stems = {_so_stem(posixpath.basename(n)) for n in names}
    templates = [template_regex(n) for n in outside if _PLACEHOLDER.search(n)]
    families = {family_of(posixpath.basename(n)) for n in names}
    families |= {family_of(posixpath.basename(p)) for p in tree}
    for n in outside:
        if _PLACEHOLDER.search(n):
            families.add(family_of(posixpath.basename(_PLACEHOLDER.sub("12", n))))
    out: dict[str, list[str]] = {"predicted": [], "behind-replaced": [], "family": [], "missed": [], "driver": []}
    for path in sorted(set(maps)):
        base = posixpath.basename(path)
        family = family_of(base)
        if family is None:
            continue
        rel = relative(path, site)
        label = rel or path
        if rel in tree or base in names or _so_stem(base) in stems or any(t.match(base) for t in templates):
            out["predicted"].append(label)
        elif rel is None and family == "unknown":
            out["driver"].append(label)
        elif family in replaced:
            out["behind-replaced"].append(label)
        elif family in families:
            out["family"].append(label)
        else:
            out["missed"].append(label)
    return out


def replaced_families(report: dict, tree: set[str], distributions: Iterable[str] = ()) -> set[str]:
    """Families of the NVIDIA libraries the scan predicts and ZLUDA replaces
    (route redirect): reached binaries, and the libraries the distributions'
    framework rules load by name (packages[].loads[]; e.g. JAX's preload of
    libcudnn.so.9, which the scan names but does not follow to a file). What
    such a library loads in turn (cuDNN 9's sub-libraries) is NVIDIA's code,
    not loaded under ZLUDA, whose library takes the front library's place."""
    binaries = {b["path"]: b for b in report.get("binaries", [])}
    out = set()
    for path in tree:
        lib = binaries[path].get("nvidia_library") or {}
        if lib.get("route") == "redirect":
            out.add(lib["family"])
    wanted = {_norm(d) for d in distributions}
    for package in report.get("packages", []):
        if _norm(package["name"]) in wanted:
            out |= {load["family"] for load in package.get("loads", []) if load.get("route") == "redirect"}
    return out


def kernel_view(report: dict, rel_paths: Iterable[str]) -> list[dict]:
    """The scan's verdict and kernel state of the given tree binaries."""
    binaries = {b["path"]: b for b in report.get("binaries", [])}
    view = []
    for rel in sorted(set(rel_paths)):
        b = binaries.get(rel)
        if b is None:
            continue
        kernels = b.get("kernels") or {}
        if kernels.get("state", "none") == "none" and b.get("verdict") == "no-cuda":
            continue
        view.append({
            "path": rel,
            "verdict": b.get("verdict"),
            "kernels": kernels.get("state"),
            "ptx": [p["arch"] for p in kernels.get("ptx", [])],
            "reason": (b.get("reasons") or [None])[0],
        })
    return view


def _arch_number(arch: str) -> int:
    digits = re.sub(r"\D", "", arch)
    return int(digits) if digits else 0


def compare(probes: list[dict], report: dict, site: str, family_of: Callable[[str], str | None],
            packages: dict[str, tuple[str, ...]] = PACKAGES, gpu_arch: int = 90) -> dict:
    """Per workload package: run-time loads predicted/missed, operations
    that fail without SASS against the scan's verdicts, disagreements."""
    report_paths = {b["path"] for b in report.get("binaries", [])}
    verdict_of = {p["name"]: p["verdict"] for p in report.get("packages", [])}
    summary: dict = {}
    for package, dists in packages.items():
        mine = [p for p in probes if p["op"].split(".", 1)[0] == package]
        if not mine:
            continue
        tree, outside = reached(report, dists)
        normal = [p for p in mine if p["mode"] == "normal"]
        maps = [m for p in normal for m in p.get("maps", [])]
        loads = classify_loads(maps, site, family_of, tree, outside, replaced_families(report, tree, dists))
        ops = []
        disagreements = []
        package_verdicts = {d: verdict_of[d] for d in dists if d in verdict_of}
        by_op: dict[str, dict[str, dict]] = {}
        for p in mine:
            by_op.setdefault(p["op"], {})[p["mode"]] = p
        for op, modes in sorted(by_op.items()):
            n, j = modes.get("normal"), modes.get("ptx-jit")
            entry = {"op": op, "normal": _status(n), "ptx_jit": _status(j)}
            if j is not None:
                rels = [r for r in (relative(m, site) for m in j.get("maps", [])) if r in report_paths]
                view = kernel_view(report, rels)
                entry["binaries"] = view
                fails_without_sass = bool(n and n["ok"] and not j["ok"])
                entry["fails_without_sass"] = fails_without_sass
                blocked = [v for v in view if v["verdict"] == "blocked" or v["kernels"] == "sass-only"]
                newer_ptx = [v for v in view if v["ptx"] and all(_arch_number(a) > gpu_arch for a in v["ptx"])]
                if newer_ptx:
                    entry["jit_vs_zluda"] = (
                        f"PTX only for {', '.join(sorted({a for v in newer_ptx for a in v['ptx']}))} in "
                        f"{', '.join(v['path'] for v in newer_ptx)}: NVIDIA's JIT cannot build it for sm_{gpu_arch}, "
                        "ZLUDA compiles PTX for its AMD target whatever the .target says")
                if fails_without_sass and not blocked and "blocked" not in package_verdicts.values():
                    text = (f"{op} fails under CUDA_FORCE_PTX_JIT=1 ({j.get('error')}) but no binary it "
                            "loaded is blocked or SASS-only in the scan")
                    if newer_ptx:
                        text += " (those with PTX only for newer GPUs may be NVIDIA's JIT limit, not ZLUDA's)"
                    disagreements.append(text)
                if j["ok"] and blocked:
                    entry["note"] = ("ran under CUDA_FORCE_PTX_JIT=1 although "
                                     + ", ".join(v["path"] for v in blocked) + " is blocked/SASS-only in the scan "
                                     "(that library's SASS-only kernels were not needed by this operation)")
            ops.append(entry)
        failing = [o["op"] for o in ops if o.get("fails_without_sass")]
        ran = [o["op"] for o in ops if o["normal"] == "ok"]
        if failing and any(v == "ready" for v in package_verdicts.values()):
            disagreements.append(f"package verdict ready ({package_verdicts}) but {len(failing)} operation(s) fail "
                                 f"without SASS: {', '.join(failing)}")
        elif ran and len(failing) == len(ran) and package_verdicts and "blocked" not in package_verdicts.values():
            disagreements.append(f"every operation that runs normally ({len(ran)}) fails without SASS, but the "
                                 f"package verdict is {package_verdicts}, not blocked")
        counted = sum(len(v) for k, v in loads.items() if k not in ("driver", "behind-replaced"))
        summary[package] = {
            "distributions": package_verdicts,
            "loads": loads,
            "recall": f"{len(loads['predicted'])}/{counted}",
            "operations": ops,
            "disagreements": disagreements,
        }
    return summary


def _status(probe: dict | None) -> str:
    if probe is None:
        return "not run"
    if probe["ok"]:
        return "ok"
    return f"FAIL ({probe.get('stage')}): {probe.get('error')}"


def markdown(summary: dict, meta: dict) -> str:
    """The human summary committed under benchmarks/gpu-truth/."""
    lines = [f"# GPU truth run {meta.get('date', '')}", ""]
    for key in ("machine", "gpu", "driver", "python", "site", "scan_seconds", "cuda4amd"):
        if key in meta:
            lines.append(f"- {key}: {meta[key]}")
    lines.append("")
    for package, s in summary.items():
        lines += [f"## {package}", "", f"scan verdicts: {s['distributions']}", "",
                  f"run-time NVIDIA loads predicted: **{s['recall']}** "
                  f"(family only: {len(s['loads']['family'])}, missed: {len(s['loads']['missed'])}; not counted: "
                  f"{len(s['loads']['behind-replaced'])} behind a library ZLUDA replaces, "
                  f"{len(s['loads']['driver'])} driver helpers)", ""]
        for kind in ("predicted", "behind-replaced", "family", "missed", "driver"):
            if s["loads"][kind]:
                lines.append(f"- {kind}: " + ", ".join(f"`{posixpath.basename(p)}`" for p in s["loads"][kind]))
        lines += ["", "| operation | normal | CUDA_FORCE_PTX_JIT=1 | scan: binaries it loaded (verdict, kernels) |",
                  "| --- | --- | --- | --- |"]
        for o in s["operations"]:
            seen = "; ".join(f"{posixpath.basename(v['path'])} ({v['verdict']}, {v['kernels']})"
                             for v in o.get("binaries", []))
            lines.append(f"| {o['op']} | {_cell(o['normal'])} | {_cell(o['ptx_jit'])} | {_cell(seen)} |")
        notes = [o for o in s["operations"] if o.get("jit_vs_zluda") or o.get("note")]
        if notes:
            lines.append("")
            for o in notes:
                for key in ("jit_vs_zluda", "note"):
                    if o.get(key):
                        lines.append(f"- {o['op']}: {o[key]}")
        lines += ["", "disagreements:" if s["disagreements"] else "disagreements: none", ""]
        lines += [f"- {d}" for d in s["disagreements"]]
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= 300 else text[:297] + "..."


def rules_family_of() -> Callable[[str], str | None]:
    """`family_of` from cuda4amd's rules (Linux names): the family id, "unknown"
    for a CUDA library of no known family, None for anything else."""
    from cuda4amd.rules.ruleset import load_rules

    rules = load_rules()

    def family_of(name: str) -> str | None:
        family = rules.family_for(name, "linux")
        if family is not None:
            return family.id
        return "unknown" if rules.is_unknown_cuda(name, "linux") else None

    return family_of


def rejudge(recorded: dict, report: dict, family_of: Callable[[str], str | None]) -> tuple[dict, str]:
    """The comparison and its markdown for a recorded run's probes (its
    gpu-truth.json document) against a scan report."""
    meta = dict(recorded.get("meta", {}))
    site = meta.get("site")
    if not site:
        raise ValueError("the recorded run names no site-packages folder (meta.site)")
    compute = str(meta.get("compute") or "9.0")
    probes = sorted(recorded.get("probes", []), key=lambda p: (p["op"], p["mode"]))
    summary = compare(probes, report, site, family_of, gpu_arch=int(compute.replace(".", "")))
    return summary, markdown(summary, meta)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Re-judge a recorded GPU truth run against a scan report.")
    parser.add_argument("--probes", required=True, help="a run's gpu-truth.json (its probes and meta are used)")
    parser.add_argument("--scan", required=True, help="a `cuda4amd scan SITE --format json` report of that site")
    parser.add_argument("--markdown", help="write the summary here (default: print it)")
    parser.add_argument("--json", dest="json_out", help="also write the comparison as JSON here")
    args = parser.parse_args(argv)
    try:
        with open(args.probes, encoding="utf-8") as f:
            recorded = json.load(f)
        with open(args.scan, encoding="utf-8") as f:
            report = json.load(f)
        summary, text = rejudge(recorded, report, rules_family_of())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.exit(2, f"compare.py: cannot re-judge: {exc}\n")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
