"""Binaries that share a deciding reason, said once: "7 binaries of bitsandbytes: a.so, b.so, c.so +4 more".

Used by the console and Markdown reports, so a reason that decides many
near-identical files (one per CUDA version or Python ABI of a package) is one
row, not seven.
"""
from __future__ import annotations

from collections.abc import Iterable

ORDER = {"blocked": 0, "degraded": 1, "ready": 2}


def reason_groups(binaries: Iterable[dict]) -> list[tuple[str, str, list[dict]]]:
    """(verdict, deciding reason, binaries) with that reason, worst verdict first, larger groups first.

    One reason is said once, however many files it decides (seven DLLs of
    one package blocked by the same missing function are one row).
    """
    order = ORDER
    groups: dict[tuple[str, str], list[dict]] = {}
    for binary in binaries:
        reason = binary["reasons"][0] if binary.get("reasons") else ""
        groups.setdefault((binary["verdict"], reason), []).append(binary)
    ordered = sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), -len(kv[1]), kv[1][0]["path"]))
    return [(verdict, reason, sorted(members, key=lambda b: b["path"])) for (verdict, reason), members in ordered]


def group_label(members: list[dict]) -> str:
    """'plugins/a.dll' for one file; '7 binaries of bitsandbytes: a.so, b.so, c.so +4 more' for several
    (a name several of them share is said once, with its count after a multiplication sign: 'a.dll' and 300)."""
    if len(members) == 1:
        return members[0]["path"]
    owners = {b.get("distribution") for b in members}
    if len(owners) == 1 and None not in owners:
        owner = f" of {next(iter(owners))}"
    elif None not in owners:
        owner = f" of {len(owners)} packages"
    else:
        owner = ""
    names: dict[str, int] = {}
    for binary in members:
        name = binary["path"].rsplit("/", 1)[-1]
        names[name] = names.get(name, 0) + 1
    listed = [name + (f" \N{MULTIPLICATION SIGN}{n}" if n > 1 else "") for name, n in names.items()]
    shown = ", ".join(listed[:3]) + (f" +{len(listed) - 3} more" if len(listed) > 3 else "")
    return f"{len(members)} binaries{owner}: {shown}"


def without_repeats(reason: str, said: set[str]) -> str:
    """A reason that carries another binary's reason ("loads x.dll (static), which is degraded: <its
    reason>", as scan/verdict.py words it) with that part cut when it is already said in `said`."""
    for marker in (", which is blocked: ", ", which is degraded: "):
        head, found, inner = reason.partition(marker)
        if found and inner in said:
            return f"{head}{found[:-2]} (see its row)"
    return reason


def binary_counts(package: dict, by_path: dict[str, dict]) -> str:
    """'3 blocked, 2 degraded, 8 ready CUDA binaries' of a package (its reasons are the binaries' own)."""
    counts: dict[str, int] = {}
    for path in package.get("binaries") or []:
        verdict = (by_path.get(path) or {}).get("verdict")
        if verdict in ORDER:
            counts[verdict] = counts.get(verdict, 0) + 1
    parts = [f"{counts[v]} {v}" for v in ORDER if counts.get(v)]
    total = sum(counts.values())
    if not parts:
        return "no CUDA binaries"
    said = ", ".join(parts) + (" CUDA binary" if total == 1 else " CUDA binaries")
    cpu_only = (package.get("counts") or {}).get("cpu_only", 0)
    if cpu_only:  # ready, yet not part of the package verdict (scan/packages.py gpu_paths)
        what = "is a CPU part: it only loads" if cpu_only == 1 else "are CPU parts: they only load"
        said += f"; {cpu_only} of them {what} the CUDA driver by name, not counted in the verdict"
    return said


def own_reasons(package: dict) -> list[str]:
    """A package's reasons that are not one of its binaries' (scan/packages.py words those "<file>: <reason>",
    or "<file>, <file>: <reason>" for a reason several share), e.g. what a framework rule says it loads by name."""
    files = {path.rsplit("/", 1)[-1] for path in package.get("binaries") or []}
    return [r for r in package.get("reasons") or []
            if not set(r.split(": ", 1)[0].split(", ")) <= files and not r.startswith("… and ")]
