"""Explain a ZLUDA trace (cuda4amd.trace.read) in the report's terms.

For each run folder: the calls that failed, grouped by library family and
function, each with its state in the ZLUDA release's function tables
(implemented, stub, or not exported: the same tables the scan judges by) and,
given a scan report, the scanned binaries that import it; the last kernel
launch traced back to its function name and module file; PTX that ZLUDA's
parser rejected (``module_….log``) or whose load call failed; each kernel
that ``cuModuleGetFunction``/``cuLibraryGetKernel`` did not find
(``CUDA_ERROR_NOT_FOUND``), judged by the scan's PTX check
(cuda4amd.scan.read.ptx): the module's saved PTX where the trace holds all
of it, the scanned binaries whose check drops that kernel, and those
binaries' containers checked again to say which refusal dropped it; and
what to do.

Failures that zluda_trace's own documentation shows in a working run are kept
apart as usually harmless: ``cuGetProcAddress`` answering
``CUDA_ERROR_NOT_FOUND`` (a library probing for optional entry points) and
``CUDA_ERROR_DEINITIALIZED`` while the program exits (ZLUDA
docs/src/troubleshooting.md at v6, "Understanding the zluda_trace output").
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda4amd.scan.read.demangle import demangle
from cuda4amd.trace.read import MODULE_FILE, Entry, TraceRun, ptx_header

if TYPE_CHECKING:
    from cuda4amd.rules.ptx_rules import PtxRules
    from cuda4amd.rules.releases import ZludaRelease
    from cuda4amd.scan.read.ptx import ModuleResult

__all__ = ["SCHEMA", "explain", "explain_run", "family_of"]

SCHEMA = "cuda4amd.trace-explain/1"
#: function-name prefix -> (family id of the report, function-table keys of the release), longest first
PREFIXES = (
    ("cublasLt", "blaslt", ("blaslt",)),
    ("cublas", "blas", ("blas",)),
    ("cusparse", "sparse", ("sparse",)),
    ("cudnn", "dnn", ("dnn9", "dnn8")),
    ("cufft", "fft", ("fft",)),
    ("nvml", "nvml", ("nvml",)),
    ("cu", "driver_api", ("driver",)),
)
LAUNCHES = {"cuLaunchKernel": "f", "cuLaunchKernel_ptsz": "f", "cuLaunchKernelEx": "f", "cuLaunchKernelEx_ptsz": "f",
            "cuLaunchCooperativeKernel": "f", "cuLaunchCooperativeKernel_ptsz": "f"}
#: call -> (argument holding the new module/library handle, argument holding the image or file)
MODULE_LOADS = {"cuModuleLoad": "module", "cuModuleLoadData": "module", "cuModuleLoadDataEx": "module",
                "cuModuleLoadFatBinary": "module", "cuLibraryLoadData": "library", "cuLibraryLoadFromFile": "library"}
#: call -> (out handle, parent handle, name argument)
FUNCTION_GETS = {"cuModuleGetFunction": ("hfunc", "hmod", "name"), "cuLibraryGetKernel": ("pKernel", "library", "name"),
                 "cuKernelGetFunction": ("pFunc", "kernel", None), "cuLibraryGetModule": ("pMod", "library", None)}


def family_of(name: str) -> tuple[str | None, tuple[str, ...]]:
    if name.startswith("{"):
        return "driver_api", ()  # NVIDIA's internal export tables (cuGetExportTable)
    for prefix, family, keys in PREFIXES:
        if name.startswith(prefix):
            return family, keys
    return None, ()


def _ok(status: str | None) -> bool:
    return bool(status) and str(status).endswith("SUCCESS")


def _harmless(call: Entry) -> bool:
    name, status = call.name or "", call.status or ""
    return (name.startswith("cuGetProcAddress") and status == "CUDA_ERROR_NOT_FOUND") or \
        status.endswith("_DEINITIALIZED")


def _state(release: ZludaRelease | None, keys: tuple[str, ...], name: str) -> str:
    if not keys:
        return "internal"
    if release is None:
        return "unknown"
    for key in keys:
        state = (release.functions.get(key) or {}).get(name)
        if state:
            return state
    return "not exported"


def _importers(scan: Mapping[str, Any] | None, family: str | None, name: str) -> list[str]:
    if not scan:
        return []
    out = []
    for b in scan.get("binaries") or []:
        for d in b.get("dependencies") or []:
            if d.get("family") == family and any(name in (names or []) for names in (d.get("symbols") or {}).values()):
                out.append(str(b.get("path")))
                break
    return out


def _saved(entry: Entry) -> list[str]:
    out = []
    for child in entry.children:
        if not child.is_call and child.text.startswith("Saved module to "):
            out.append(child.text[len("Saved module to "):].strip())
    return out


def _failed_calls(calls: list[Entry], release: ZludaRelease | None, scan: Mapping[str, Any] | None
                  ) -> tuple[dict[tuple[str | None, str], dict[str, Any]], dict[tuple[str, str], int]]:
    """(the failed calls by (family, function): statuses, ZLUDA's state, importers;
    the usually harmless failures by (function, status): their count)."""
    failed: dict[tuple[str | None, str], dict[str, Any]] = {}
    harmless: dict[tuple[str, str], int] = {}
    for call in calls:
        if _ok(call.status):
            continue
        assert call.name is not None
        if call.status != "UNKNOWN" and _harmless(call):
            harmless[(call.name, str(call.status))] = harmless.get((call.name, str(call.status)), 0) + 1
            continue
        family, keys = family_of(call.name)
        row = failed.setdefault((family, call.name), {
            "family": family, "function": call.name, "statuses": {}, "count": 0, "first_line": call.line,
            "state": _state(release, keys, call.name), "imported_by": _importers(scan, family, call.name)})
        row["count"] += 1
        row["statuses"][str(call.status)] = row["statuses"].get(str(call.status), 0) + 1
    return failed, harmless


#: the calls that look a kernel up by name: (its name argument, its parent handle argument)
KERNEL_LOOKUPS = {"cuModuleGetFunction": ("name", "hmod"), "cuLibraryGetKernel": ("name", "library")}
#: the status of a lookup of a name the module does not have (the dropped kernel's symptom)
NOT_FOUND = "CUDA_ERROR_NOT_FOUND"
#: scanned binaries checked again per run for the kernels not found (each is read from disk)
MAX_BINARIES_CHECKED = 8


def _missing_kernels(run: TraceRun, calls: list[Entry], modules: dict[str, dict[str, Any]],
                     release: ZludaRelease | None, scan: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Each kernel a lookup did not find, with what ZLUDA's PTX check says of it: in the module's PTX the
    trace saved (complete only up to the 4 KiB trace.read keeps), and in the scanned binaries."""
    rules = _ptx_rules(release)
    out: dict[str, dict[str, Any]] = {}
    for call in calls:
        if call.name not in KERNEL_LOOKUPS or call.status != NOT_FOUND:
            continue
        name_arg, parent_arg = KERNEL_LOOKUPS[call.name]
        name = (call.arg(name_arg) or "").strip('"')
        if not name or name in out:
            continue
        module = modules.get(call.arg(parent_arg) or "")
        files = module["files"] if module else []
        row: dict[str, Any] = {"kernel": name, "demangled": demangle(name), "call": call.name, "line": call.line,
                               "module": files, "in_trace": None, "in_scan": []}
        for file in files:
            text = run.side.get(file)
            if rules is not None and text is not None and file.endswith(".ptx") and run.files.get(file, -1) == len(
                    text.encode("utf-8")):
                row["in_trace"] = {"file": file, **_fate(_check_module(text.encode("utf-8"), rules), name)}
                break
        row["in_scan"] = _scanned(scan, name, release, rules)
        out[name] = row
    return list(out.values())


def _ptx_rules(release: ZludaRelease | None) -> PtxRules | None:
    if release is None:
        return None
    from cuda4amd.rules.ptx_rules import load_ptx_rules  # here: only a trace with a kernel not found needs it

    return load_ptx_rules().get(release.tag)


def _check_module(text: bytes, rules: PtxRules) -> ModuleResult:
    from cuda4amd.scan.read.ptx import check_ptx_module

    return check_ptx_module(text, rules)


def _fate(result: ModuleResult, name: str) -> dict[str, Any]:
    """What one module's check says of kernel ``name``: dropped (with the module's first refusal), kept,
    or not in it."""
    if name in result.dropped_kernels or (result.outcome in ("empty_module", "no_ptx") and name in result.kernels):
        fate = "dropped"
    elif result.outcome == "load_fails" and name in result.kernels:
        fate = "module fails to load"
    elif name in result.kernels:
        fate = "kept"
    else:
        fate = "not in the module"
    return {"fate": fate, "outcome": result.outcome, "construct": result.construct or None,
            "source": result.source or None}


def _scanned(scan: Mapping[str, Any] | None, name: str, release: ZludaRelease | None,
             rules: PtxRules | None) -> list[dict[str, Any]]:
    """The scanned binaries whose PTX check (at the report's release) drops ``name``; each one on disk is
    checked again, container by container, for the refusal that drops it."""
    if not scan:
        return []
    target = Path(str((scan.get("target") or {}).get("path") or ""))
    out: list[dict[str, Any]] = []
    for binary in scan.get("binaries") or []:
        check = (binary.get("kernels") or {}).get("ptx_check") or {}
        if name not in (check.get("dropped_kernels") or []):
            continue
        row: dict[str, Any] = {"path": binary.get("path"), "release": check.get("release"),
                               "first_refusal": check.get("first_refusal"), "container": None}
        if rules is not None and release is not None and check.get("release") == release.tag \
                and len(out) < MAX_BINARIES_CHECKED:
            row["container"] = _container_fate(_on_disk(target, str(binary.get("path") or "")), name, rules)
        out.append(row)
    return out


def _on_disk(target: Path, path: str) -> Path | None:
    """The scanned binary's file, where the report's target still holds it (a single-file target is it)."""
    for candidate in (target / path, target):
        if candidate.is_file() and (candidate != target or target.name == Path(path).name):
            return candidate
    return None


def _container_fate(path: Path | None, name: str, rules: PtxRules) -> dict[str, Any] | None:
    """The registered container of ``path`` whose module drops ``name``: its offset and the refusal; None
    when the file is gone or unreadable, or none drops it (the file changed since the scan)."""
    if path is None:
        return None
    from cuda4amd.scan.read.binview import MalformedBinary
    from cuda4amd.scan.read.engine import mapped, read_buffer
    from cuda4amd.scan.read.fatbin import analyse_kernels
    from cuda4amd.scan.read.ptx import check_container
    from cuda4amd.scan.read.ptx.entries import ptx_texts

    try:
        with mapped(path) as buf:
            registered: list[int] = []
            analyse_kernels(buf, read_buffer(buf, "fast", path), ptx_registered=registered)
            for offset in registered:
                fate = _fate(check_container(ptx_texts(buf, offset), rules), name)
                if fate["fate"] not in ("kept", "not in the module"):
                    return {"offset": offset, **fate}
    except (OSError, ValueError, MalformedBinary):
        return None
    return None


def _last_launch(calls: list[Entry], modules: dict[str, dict[str, Any]],
                 functions: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The last kernel launch: its function, the kernel and module it came from (followed through the
    handles the function and module calls returned), how many launches there were; None without one."""
    launch = None
    launches = [c for c in calls if c.name in LAUNCHES]
    if launches:
        last = launches[-1]
        assert last.name is not None
        handle = last.arg(LAUNCHES[last.name])
        kernel, module, chain = None, None, handle
        for _ in range(4):  # function -> kernel -> library / module, at most a few hops
            info = functions.get(chain or "")
            if info is None:
                break
            kernel = kernel or info["name"]
            chain = info["parent"]
            if chain in modules:
                break
        if chain in modules:
            module = modules[chain]
        launch = {"line": last.line, "call": last.name, "status": last.status, "function": handle,
                  "kernel": kernel, "module": module["files"] if module else [],
                  "module_call": module["call"] if module else None, "launches": len(launches),
                  "last_line": calls[-1].line if calls else None, "last_call": calls[-1].name if calls else None}
    return launch


def explain_run(run: TraceRun, *, release: ZludaRelease | None = None,
                scan: Mapping[str, Any] | None = None) -> dict[str, Any]:
    entries = list(run.walk())
    calls = [e for e in entries if e.is_call]
    missing: list[str] = []
    for e in entries:
        if not e.is_call and e.text.startswith("No function ") and e.text.endswith(" in the underlying library"):
            missing.append(e.text[len("No function "):-len(" in the underlying library")])
    failed, harmless = _failed_calls(calls, release, scan)
    modules: dict[str, dict[str, Any]] = {}  # handle -> {call, files, ok}
    functions: dict[str, dict[str, Any]] = {}  # handle -> {name, parent}
    load_failures = []
    for call in calls:
        assert call.name is not None
        if call.name in MODULE_LOADS:
            handle = call.arg(MODULE_LOADS[call.name])
            record = {"call": call.name, "line": call.line, "files": _saved(call), "status": call.status,
                      "handle": handle}
            if handle and _ok(call.status):
                modules[handle] = record
            if not _ok(call.status):
                load_failures.append(record)
        elif call.name in FUNCTION_GETS and _ok(call.status):
            out, parent, name_arg = FUNCTION_GETS[call.name]
            handle = call.arg(out)
            if handle:
                name = call.arg(name_arg) if name_arg else None
                functions[handle] = {"name": name.strip('"') if name else None, "parent": call.arg(parent)}
    launch = _last_launch(calls, modules, functions)
    missing_kernels = _missing_kernels(run, calls, modules, release, scan)
    ptx_errors = []
    for name, text in sorted(run.side.items()):
        match = MODULE_FILE.match(name)
        if match and match.group(4) == "log":
            ptx = name[:-4] + ".ptx"
            header = ptx_header(run.side.get(ptx, ""))
            ptx_errors.append({"log": name, "ptx": ptx if ptx in run.files else None,
                               "errors": [line for line in text.splitlines() if line.strip()][:20],
                               "target": header.get("target"), "version": header.get("version")})
    ptx_modules = sorted(n for n in run.files if n.endswith(".ptx") and MODULE_FILE.match(n))
    report = {
        "run": run.name,
        "where": run.where,
        "lines": run.lines,
        "calls": len(calls),
        "notes": run.unparsed,
        "failed": sorted(failed.values(), key=lambda r: (r["family"] or "~", r["first_line"])),
        "harmless": [{"function": f, "status": s, "count": n} for (f, s), n in sorted(harmless.items())],
        "missing_in_library": sorted(set(missing)),
        "last_launch": launch,
        "kernels_not_found": missing_kernels,
        "module_load_failures": load_failures,
        "ptx_errors": ptx_errors,
        "modules": {"ptx": len(ptx_modules), "ptx_bytes": sum(run.files[n] for n in ptx_modules),
                    "other": len([n for n in run.files if MODULE_FILE.match(n) and not n.endswith((".ptx", ".log"))])},
    }
    report["advice"] = _advice(report, release)
    return report


def _advice(report: dict[str, Any], release: ZludaRelease | None) -> list[str]:
    tag = release.tag if release is not None else "this ZLUDA release"
    out = []
    stubs = [r["function"] for r in report["failed"] if r["state"] == "stub"]
    absent = [r["function"] for r in report["failed"] if r["state"] == "not exported"]
    other = [r for r in report["failed"] if r["state"] == "implemented"]
    if stubs:
        out.append(f"{_few(stubs)}: ZLUDA {tag} has these only as stubs that refuse (NOT_SUPPORTED); the program "
                   f"needs another code path (a setting that avoids the library) or a ZLUDA release that "
                   f"implements them")
    if absent:
        out.append(f"{_few(absent)}: not exported by ZLUDA {tag}'s library: the program asks for a function ZLUDA "
                   f"does not have (newer than ZLUDA's CUDA headers)")
    if report["missing_in_library"]:
        out.append(f"{_few(report['missing_in_library'])}: the library the trace forwarded to (ZLUDA_CUDA_LIB, or "
                   f"NVIDIA's driver) does not export it; the call returned no status")
    loads = {f["call"] for f in report["module_load_failures"]}
    other = [r for r in other if r["function"] not in loads]  # said below, with the module
    if other:
        out.append(f"{_few([r['function'] for r in other])}: implemented by ZLUDA but failed here: check the GPU and "
                   f"HIP SDK (`cuda4amd doctor`), then report it to ZLUDA with this trace")
    if report["ptx_errors"]:
        out.append(f"ZLUDA's PTX parser rejected {len(report['ptx_errors'])} module(s) "
                   f"({', '.join(e['log'] for e in report['ptx_errors'][:3])}): report them to ZLUDA with the .ptx and "
                   f".log files; no setting fixes this")
    for row in report.get("kernels_not_found") or []:
        out.append(_not_found_advice(row, tag))
    if report["module_load_failures"]:
        out.append(f"{len(report['module_load_failures'])} module load(s) failed: the GPU code of that module did not "
                   f"compile for the AMD GPU")
    launch = report["last_launch"]
    if launch:
        where = ", ".join(launch["module"]) or "an unknown module"
        out.append(f"the last kernel launch was {launch.get('kernel') or launch['function']} from {where}: if the "
                   f"program crashed or hung after it, start there (the trace has no line for a call that never "
                   f"returned)")
    if not out:
        out.append("no failed call, no rejected PTX: if the program still misbehaves, the problem is after the last "
                   "logged call or outside CUDA")
    return out


def _not_found_advice(row: dict[str, Any], tag: str) -> str:
    """One kernel a lookup did not find, in words: which check drops it and why, or what is known."""
    kernel = row["demangled"] or row["kernel"]
    head = f"{row['call']} found no kernel {kernel} (line {row['line']})"
    said = []
    trace = row["in_trace"]
    if trace is not None:
        what = {"dropped": "ZLUDA's PTX parser drops it", "module fails to load": "the module fails to load",
                "kept": "ZLUDA's PTX parser keeps it", "not in the module": "the module has no kernel of that name"}
        first = f" (the module's first refusal: {trace['construct']}, {trace['source']})" \
            if trace["fate"] != "kept" and trace["construct"] else ""
        said.append(f"in {trace['file']}, {what[trace['fate']]} at {tag}{first}")
    for binary in row["in_scan"][:3]:
        container = binary["container"]
        refusal = container or binary["first_refusal"] or {}
        where = f" (container at {container['offset']:#x})" if container else ""
        said.append(f"the scan's PTX check of {binary['path']} drops it at {binary['release']}{where}: "
                    f"{refusal.get('construct') or '?'} ({refusal.get('source') or '?'})")
    if not said:
        module = f"its module ({', '.join(row['module'])}) is not fully in the trace" if row["module"] else \
            "the trace does not hold its module's PTX"
        said.append(f"{module}, and no scanned binary's PTX check drops it: pass a scan report of the program's "
                    f"binaries (`cuda4amd scan --format json`, then `--report`) to see whether ZLUDA's PTX parser "
                    f"drops it; a kernel in no scan report may be named wrongly or live in a module the program "
                    f"built at run time")
    return f"{head}: " + "; ".join(said)


def _few(names: Iterable[str], limit: int = 6) -> str:
    names = list(dict.fromkeys(names))
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def explain(runs: list[TraceRun], *, release: ZludaRelease | None = None, scan: Mapping[str, Any] | None = None,
            path: str = "") -> dict[str, Any]:
    return {"schema": SCHEMA, "path": path, "zluda_release": release.tag if release is not None else None,
            "runs": [explain_run(r, release=release, scan=scan) for r in runs]}
