"""Framework knowledge: what a Python framework loads, and how a user avoids a blocked path.

    frameworks = load_frameworks()                  # rules/frameworks/*.toml, validated
    fw = framework_for("cupy_cuda12x", frameworks)  # PEP 503 name compare -> Framework | None
    advice_for(fw, {"dnn", "blaslt"}, "sass-only")  # -> ["set DISABLE_ADDMM_CUDA_LT=1 so ...", ...]

One TOML file per framework (file name = framework id); see docs/frameworks.md.
Invalid data raises cuda4amd.rules.RulesError naming the file and the problem.
"""
from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cuda4amd.project_names import canonical_name
from cuda4amd.rules.validate import (
    ID_RE,
    PLATFORMS,
    Provenance,
    RulesError,
    check,
    choice,
    is_bool,
    is_nonempty_str,
    is_str,
    is_str_list,
    read_provenance,
    read_toml,
    rows,
    shipped_rules_dir,
    top_level,
)
from cuda4amd.words import said_once

__all__ = [
    "CONFIDENCE",
    "FRAMEWORKS_DIR",
    "LOAD_KINDS",
    "SASS_ONLY",
    "SWITCH_KINDS",
    "Framework",
    "Instead",
    "LibraryLoad",
    "SearchFolders",
    "Switch",
    "advice_for",
    "framework_for",
    "load_frameworks",
]

FRAMEWORKS_DIR = "frameworks"
#: the kernel state a switch or an [[instead]] can name besides a family id
SASS_ONLY = "sass-only"
SWITCH_KINDS: tuple[str, ...] = ("env", "python", "config")
#: how the framework reaches the library (the report's `load` values)
LOAD_KINDS: tuple[str, ...] = ("static", "delay", "by-name")
CONFIDENCE: tuple[str, ...] = ("verified", "unverified")
_WHEN_RE = re.compile(r"^(always|optional|feature: \S.*)$")


@dataclass(frozen=True)
class LibraryLoad:
    """A library family the framework loads, with example file names."""

    family: str  # id from families.toml
    names: tuple[str, ...]  # concrete file names or glob patterns
    when: str  # "always" | "optional" | "feature: <what uses it>"
    load: str | None = None  # "static" | "delay" | "by-name", when known
    platform: str | None = None  # "windows" | "linux" | None (both)
    note: str = ""
    confidence: str = "verified"

    @property
    def feature(self) -> str | None:
        """What uses the library when `when` is "feature: ...", else None."""
        return self.when[len("feature: "):] if self.when.startswith("feature: ") else None


@dataclass(frozen=True)
class Switch:
    """Something a user sets so the framework avoids a blocked/stubbed family
    (or its SASS-only kernels: "sass-only" in `avoids`)."""

    avoids: tuple[str, ...]
    kind: str  # "env" | "python" | "config"
    setting: str
    note: str = ""
    advice: str = ""  # a full sentence replacing the generated advice line
    platform: str | None = None
    recommended: bool = False  # worth doing under ZLUDA whatever the scan found
    confidence: str = "verified"
    #: file-name globs of the package's binaries it steers to (what must run under ZLUDA for it to help);
    #: empty: the package as a whole
    uses: tuple[str, ...] = ()


@dataclass(frozen=True)
class Instead:
    """What to install instead when `when` (a family id, or "sass-only") blocks."""

    when: str
    advice: str
    note: str = ""
    platform: str | None = None
    confidence: str = "verified"
    #: file-name globs of the package's own binaries it recommends ("use the CUDA execution provider");
    #: empty: a replacement (another package or build), which relies on nothing of this one
    uses: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchFolders:
    """Folders of other distributions the framework puts on its library
    search path (or preloads from), as globs relative to the site-packages
    folder that holds it ('nvidia/*/lib'), with the loader code that does it."""

    folders: tuple[str, ...]
    source: str
    platform: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Framework:
    id: str
    name: str
    distributions: tuple[str, ...]  # PyPI names (PEP 503 normalised on compare; may hold globs)
    loads: tuple[LibraryLoad, ...]
    switches: tuple[Switch, ...]
    instead: tuple[Instead, ...]
    provenance: Provenance
    notes: tuple[str, ...] = ()
    search_folders: tuple[SearchFolders, ...] = ()
    #: family id -> display name ("blaslt" -> "cuBLASLt"), for the families this file cites
    family_names: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    source: Path | None = field(default=None, compare=False)

    def matches(self, distribution_name: str) -> bool:
        name = canonical_name(distribution_name)
        return any(fnmatch.fnmatchcase(name, canonical_name(p)) for p in self.distributions)

    def family_name(self, family_id: str) -> str:
        if family_id == SASS_ONLY:
            return "SASS-only kernels"
        return dict(self.family_names).get(family_id, family_id)

    def loads_of(self, family_id: str) -> tuple[LibraryLoad, ...]:
        return tuple(entry for entry in self.loads if entry.family == family_id)


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------

_FRAMEWORK_REQUIRED = {"id": is_nonempty_str, "name": is_nonempty_str, "distributions": is_str_list}
_FRAMEWORK_OPTIONAL = {"notes": is_str_list}
_LOAD_REQUIRED = {"family": is_nonempty_str, "names": is_str_list, "when": is_str}
_LOAD_OPTIONAL = {"load": is_str, "platform": is_str, "note": is_str, "confidence": is_str}
_SWITCH_REQUIRED = {"avoids": is_str_list, "kind": is_str, "setting": is_nonempty_str}
_SWITCH_OPTIONAL = {"note": is_str, "advice": is_str, "platform": is_str, "recommended": is_bool,
                    "confidence": is_str, "uses": is_str_list}
_INSTEAD_REQUIRED = {"when": is_nonempty_str, "advice": is_nonempty_str}
_INSTEAD_OPTIONAL = {"note": is_str, "platform": is_str, "confidence": is_str, "uses": is_str_list}
_FOLDERS_REQUIRED = {"folders": is_str_list, "source": is_nonempty_str}
_FOLDERS_OPTIONAL = {"platform": is_str, "note": is_str}


class _NamedFamily(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...


class _HasFamilies(Protocol):
    """What a framework file's family ids are checked against (a RuleSet)."""

    @property
    def families(self) -> Sequence[_NamedFamily]: ...


def load_frameworks(
    rules_dir: str | os.PathLike[str] | None = None,
    *,
    rules: _HasFamilies,
) -> tuple[Framework, ...]:
    """Load and validate every `*.toml` of a frameworks folder.

    `rules_dir` is a rules folder holding `frameworks/`, or the frameworks
    folder itself; default: the shipped `cuda4amd.ruledata/frameworks`.
    `rules` (a RuleSet) supplies the family ids files may cite. Sorted by
    framework id. `RuleSet.frameworks` is what the scan uses: every rules
    folder's frameworks, loaded once.
    """
    folder = _frameworks_folder(rules_dir)
    families = {f.id: f.name for f in rules.families}
    frameworks: list[Framework] = []
    claimed: dict[str, str] = {}  # normalised distribution name -> framework id
    for path in sorted(folder.glob("*.toml")):
        fw = _load_file(path, families)
        other = next((f for f in frameworks if f.id == fw.id), None)
        if other is not None:
            raise RulesError(path, f"framework id {fw.id!r} is also defined in {other.source}")
        for dist in fw.distributions:
            key = canonical_name(dist)
            if key in claimed:
                raise RulesError(path, f"distribution {dist!r} is already claimed by framework {claimed[key]!r}")
            claimed[key] = fw.id
        frameworks.append(fw)
    return tuple(sorted(frameworks, key=lambda f: f.id))


def _frameworks_folder(rules_dir: str | os.PathLike[str] | None) -> Path:
    if rules_dir is None:
        folder = shipped_rules_dir() / FRAMEWORKS_DIR
    else:
        base = Path(rules_dir)
        folder = base / FRAMEWORKS_DIR if (base / FRAMEWORKS_DIR).is_dir() else base
    if not folder.is_dir():
        raise RulesError(folder, "no such frameworks folder")
    return folder


def _framework_head(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """The [framework] table: an id that is the file's name, distributions each listed once."""
    if "framework" not in doc:
        raise RulesError(path, "missing the [framework] table (id, name, distributions)")
    head = check(path, "[framework]", doc["framework"], _FRAMEWORK_REQUIRED, _FRAMEWORK_OPTIONAL)
    fid = head["id"]
    if not ID_RE.match(fid):
        raise RulesError(path, f"[framework]: id must match {ID_RE.pattern}, got {fid!r}")
    if fid != path.stem:
        raise RulesError(path, f"[framework]: id {fid!r} does not match the file name {path.name!r}")
    if not head["distributions"] or not all(d.strip() for d in head["distributions"]):
        raise RulesError(path, "[framework]: 'distributions' must list at least one PyPI name")
    seen_dists: set[str] = set()
    for dist in head["distributions"]:
        if canonical_name(dist) in seen_dists:
            raise RulesError(path, f"[framework]: distribution {dist!r} is listed twice")
        seen_dists.add(canonical_name(dist))
    return head


def _search_folders(path: Path, doc: dict[str, Any]) -> list[SearchFolders]:
    search_folders: list[SearchFolders] = []
    for i, row in enumerate(rows(path, doc, "search_folders")):
        where = f"search_folders #{i + 1}"
        check(path, where, row, _FOLDERS_REQUIRED, _FOLDERS_OPTIONAL)
        if not row["folders"] or not all(f.strip() and not f.startswith(("/", "..")) for f in row["folders"]):
            raise RulesError(path, f"{where}: 'folders' must list relative folder globs (no leading / or ..)")
        search_folders.append(SearchFolders(
            folders=tuple(f.strip("/") for f in row["folders"]),
            source=row["source"],
            platform=choice(path, where, "platform", row.get("platform"), PLATFORMS),
            note=row.get("note", ""),
        ))
    return search_folders


def _load_file(path: Path, families: dict[str, str]) -> Framework:
    doc = read_toml(path)
    prov = read_provenance(path, doc)
    top_level(path, doc, ("provenance", "framework", "loads_by_name", "switch", "instead", "search_folders"))
    head = _framework_head(path, doc)
    cited: set[str] = set()

    def family(where: str, value: str, allow_sass: bool) -> str:
        if allow_sass and value == SASS_ONLY:
            return value
        if value not in families:
            extra = f" or {SASS_ONLY!r}" if allow_sass else ""
            raise RulesError(path, f"{where}: unknown library family {value!r} (a families.toml id{extra})")
        cited.add(value)
        return value

    loads: list[LibraryLoad] = []
    for i, row in enumerate(rows(path, doc, "loads_by_name")):
        where = f"loads_by_name #{i + 1}"
        check(path, where, row, _LOAD_REQUIRED, _LOAD_OPTIONAL)
        fam = family(where, row["family"], allow_sass=False)
        if not row["names"] or not all(n.strip() for n in row["names"]):
            raise RulesError(path, f"{where}: 'names' must list at least one file name")
        if not _WHEN_RE.match(row["when"]):
            raise RulesError(path, f"{where}: when must be \"always\", \"optional\" or \"feature: <what>\", "
                                   f"got {row['when']!r}")
        loads.append(LibraryLoad(
            family=fam,
            names=tuple(row["names"]),
            when=row["when"],
            load=choice(path, where, "load", row.get("load"), LOAD_KINDS),
            platform=choice(path, where, "platform", row.get("platform"), PLATFORMS),
            note=row.get("note", ""),
            confidence=choice(path, where, "confidence", row.get("confidence"), CONFIDENCE) or "verified",
        ))

    switches: list[Switch] = []
    for i, row in enumerate(rows(path, doc, "switch")):
        where = f"switch #{i + 1}"
        check(path, where, row, _SWITCH_REQUIRED, _SWITCH_OPTIONAL)
        if not row["avoids"]:
            raise RulesError(path, f"{where}: 'avoids' must name at least one family id or {SASS_ONLY!r}")
        avoids = tuple(family(where, a, allow_sass=True) for a in row["avoids"])
        kind = choice(path, where, "kind", row["kind"], SWITCH_KINDS)
        switches.append(Switch(
            avoids=avoids,
            kind=kind or "",
            setting=row["setting"],
            note=row.get("note", ""),
            advice=row.get("advice", ""),
            platform=choice(path, where, "platform", row.get("platform"), PLATFORMS),
            recommended=row.get("recommended", False),
            confidence=choice(path, where, "confidence", row.get("confidence"), CONFIDENCE) or "verified",
            uses=tuple(row.get("uses", ())),
        ))

    instead: list[Instead] = []
    for i, row in enumerate(rows(path, doc, "instead")):
        where = f"instead #{i + 1}"
        check(path, where, row, _INSTEAD_REQUIRED, _INSTEAD_OPTIONAL)
        instead.append(Instead(
            when=family(where, row["when"], allow_sass=True),
            advice=row["advice"],
            note=row.get("note", ""),
            platform=choice(path, where, "platform", row.get("platform"), PLATFORMS),
            confidence=choice(path, where, "confidence", row.get("confidence"), CONFIDENCE) or "verified",
            uses=tuple(row.get("uses", ())),
        ))

    return Framework(
        id=head["id"],
        name=head["name"],
        distributions=tuple(head["distributions"]),
        loads=tuple(loads),
        switches=tuple(switches),
        instead=tuple(instead),
        provenance=prov,
        notes=tuple(head.get("notes", ())),
        search_folders=tuple(_search_folders(path, doc)),
        family_names=tuple(sorted((f, families[f]) for f in cited)),
        source=path,
    )


# ---------------------------------------------------------------------------
# queries
# ---------------------------------------------------------------------------

def framework_for(distribution_name: str, frameworks: Iterable[Framework]) -> Framework | None:
    """The framework a distribution belongs to ("Torch", "cupy_cuda12x", …),
    comparing PEP 503 normalised names; None if no framework file claims it."""
    for fw in frameworks:
        if fw.matches(distribution_name):
            return fw
    return None


def advice_for(framework: Framework, blocked_families: Iterable[str], kernel_state: str | None, *,
               platforms: Collection[str] = (), can_run: Callable[[tuple[str, ...]], bool] | None = None
               ) -> list[str]:
    """Advice lines for the families that are blocked or stubbed and, when
    `kernel_state` is "sass-only", for SASS-only kernels: the switches that
    avoid them (and those marked `recommended`), then the [[instead]] entries.
    File order; no line twice, nor a line whose settings an earlier one said
    (cuda4amd.words.said_once).

    `platforms`: the target's ("windows", "linux"; empty: not known): a line
    for another platform is left out, and "[Windows only]" is said only when
    the target has more than one. `can_run(uses)`: whether the part of the
    package a line steers to can run (some of it is not blocked; `uses` are
    file-name globs, empty for the package as a whole): a switch, a setting
    of the package, needs its `uses` or the package to run; an [[instead]]
    needs its `uses`, when it has any (else it is a replacement). None: every
    part can run."""
    hit = set(blocked_families)
    if kernel_state == SASS_ONLY:
        hit.add(SASS_ONLY)
    shown = set(platforms)

    def fits(platform: str | None) -> bool:
        return platform is None or not shown or platform in shown

    mark = len(shown) != 1  # one platform: every line kept is for it
    lines: list[str] = []
    for sw in framework.switches:
        avoided = [a for a in sw.avoids if a in hit]
        if (avoided or sw.recommended) and fits(sw.platform) and (can_run is None or can_run(sw.uses)):
            lines.append(_switch_line(framework, sw, avoided or list(sw.avoids), mark))
    for alt in framework.instead:
        if alt.when in hit and fits(alt.platform) and (not alt.uses or can_run is None or can_run(alt.uses)):
            lines.append(_finish(f"{framework.name}: {alt.advice}", alt.platform if mark else None, alt.confidence))
    return said_once(lines)


def _switch_line(fw: Framework, sw: Switch, avoided: list[str], mark: bool = True) -> str:
    what = _join([fw.family_name(a) for a in avoided])
    if sw.advice:
        text = sw.advice
    elif sw.kind == "env":
        text = f"set {sw.setting} so {fw.name} avoids {what}"
    elif sw.kind == "python":
        text = f"{fw.name}: run `{sw.setting}` before the work starts, so it avoids {what}"
    else:
        text = f"{fw.name}: {sw.setting} (avoids {what})"
    return _finish(text, sw.platform if mark else None, sw.confidence)


def _finish(text: str, platform: str | None, confidence: str) -> str:
    if platform:
        text = f"{text} [{platform.capitalize()} only]"
    if confidence == "unverified":
        text = f"{text} (unverified)"
    return text


def _join(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]
