"""Rules for what happens at run time: how loaders assemble library names, which code generators run.

    rules.names                                     # NameRules of every rules folder's runtime/names.toml
    heads = name_heads(rules.names, rules, "linux") # {"cublas": ({"libcublas.so.{version}", ...}, False), ...}
    rules.generators                                # every rules folder's runtime/generators.toml
    generators_for("jax-cuda12-pjrt", rules.generators)  # -> (Generator(id="xla", emits="sass", ...),)

Both files live in ``runtime/`` of a rules folder; the RuleSet parses them
on first use of ``RuleSet.names`` / ``RuleSet.generators`` (an extra
folder's at load time, so that its errors show at once). An extra folder's
names.toml adds templates, fragments, version templates and loader
functions; its generators.toml adds generators, and one with the id of an
earlier generator replaces it. Invalid data raises RulesError naming the file.
"""
from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cuda4amd.project_names import canonical_name
from cuda4amd.rules.frameworks import CONFIDENCE, SWITCH_KINDS
from cuda4amd.rules.validate import (
    ID_RE,
    Provenance,
    RulesError,
    Schema,
    check,
    check_platform,
    choice,
    is_nonempty_str,
    is_str,
    is_str_list,
    read_provenance,
    read_toml,
    rows,
    shipped_rules_dir,
    top_level,
)

__all__ = [
    "BACKEND_EMITS",
    "EMITS",
    "GENERATORS_FILE",
    "NAMES_FILE",
    "NEEDED",
    "RUNTIME_DIR",
    "SWITCH_EMITS",
    "Generator",
    "GeneratorBackend",
    "GeneratorSwitch",
    "NameRules",
    "NameTemplate",
    "family_stems",
    "generators_for",
    "literal_prefixes",
    "load_generator_files",
    "load_generators",
    "load_name_files",
    "load_name_rules",
    "name_heads",
]

RUNTIME_DIR = "runtime"
NAMES_FILE = "names.toml"
GENERATORS_FILE = "generators.toml"
#: what a generator hands the driver: PTX (ZLUDA can take it), SASS (it cannot)
EMITS: tuple[str, ...] = ("ptx", "sass")
#: what a switch makes it do: emit PTX, or generate nothing at all
SWITCH_EMITS: tuple[str, ...] = ("ptx", "sass", "none")
NEEDED: tuple[str, ...] = ("always", "optional")
#: what a backend of a generator makes instead: AMD code objects that the HIP runtime loads (not through ZLUDA)
BACKEND_EMITS: tuple[str, ...] = ("hsaco",)
#: what a backend needs on the host (cuda4amd.host: the HIP SDK, Linux: ROCm)
BACKEND_NEEDS: tuple[str, ...] = ("hip-sdk",)
_STEM_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{2,39}$")
#: a version inside a would-be stem ("cufft64_10", "nvinfer_10"): not a stem
_VERSIONED = re.compile(r"64_|_\d")
#: shortest stem searched for (shorter words are everywhere)
MIN_STEM = 4


@dataclass(frozen=True)
class NameTemplate:
    platform: str
    name: str  # "lib{stem}.so.{version}"
    source: str

    @property
    def head(self) -> str:
        """The part before {version} (the whole name when it has none)."""
        return self.name.split("{version}", 1)[0]


@dataclass(frozen=True)
class NameRules:
    templates: tuple[NameTemplate, ...]
    fragments: dict[str, tuple[str, ...]]  # platform -> whole strings that show composition
    provenance: tuple[Provenance, ...]
    #: platform -> (printf templates that append a version to a base name, what they append)
    versioners: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    #: functions that load a library by name (dlopen, LoadLibraryExW, ...)
    loader_functions: frozenset[str] = frozenset()


class _HasPatterns(Protocol):
    @property
    def windows_patterns(self) -> tuple[str, ...]: ...

    @property
    def linux_patterns(self) -> tuple[str, ...]: ...

    @property
    def id(self) -> str: ...


class _HasFamilies(Protocol):
    """Where stems come from (a RuleSet: its family table)."""

    @property
    def families(self) -> Sequence[_HasPatterns]: ...


# ---------------------------------------------------------------------------
# names.toml
# ---------------------------------------------------------------------------

_TEMPLATE_REQUIRED: Schema = {"platform": is_str, "name": is_nonempty_str, "source": is_nonempty_str}
_FRAGMENT_REQUIRED: Schema = {"platform": is_str, "strings": is_str_list, "source": is_nonempty_str}
_VERSIONER_REQUIRED: Schema = {"platform": is_str, "strings": is_str_list, "appends": is_nonempty_str,
                               "source": is_nonempty_str}
_LOADERS_REQUIRED: Schema = {"functions": is_str_list, "source": is_nonempty_str}


def load_name_rules(rules_dir: str | os.PathLike[str] | None = None) -> NameRules:
    """Load and validate one rules folder's ``runtime/names.toml`` (default: the shipped one)."""
    return load_name_files([_runtime_folder(rules_dir) / NAMES_FILE])


def load_name_files(paths: Sequence[Path]) -> NameRules:
    """Every names.toml of ``paths`` (shipped first), combined: templates,
    fragments, version templates and loader functions add up. Together they
    must name at least one template and one loader function."""
    templates: list[NameTemplate] = []
    fragments: dict[str, set[str]] = {}
    versioners: dict[str, tuple[tuple[str, ...], str]] = {}
    functions: set[str] = set()
    provenance = []
    for path in paths:
        names = _load_names_file(path)
        provenance.append(names.provenance[0])
        templates += [t for t in names.templates
                      if all((t.platform, t.name) != (o.platform, o.name) for o in templates)]
        for platform, strings in names.fragments.items():
            fragments.setdefault(platform, set()).update(strings)
        for platform, (strings, appends) in names.versioners.items():
            known, known_appends = versioners.get(platform, ((), appends))
            if known_appends != appends:
                raise RulesError(path, f"[[versioner]] for {platform} appends {appends!r}; "
                                       f"an earlier rules folder's appends {known_appends!r}")
            versioners[platform] = (tuple(dict.fromkeys((*known, *strings))), appends)
        functions |= names.loader_functions
    where = paths[-1] if paths else shipped_rules_dir() / RUNTIME_DIR / NAMES_FILE
    if not functions:
        raise RulesError(where, "missing the [loaders] table: no function that loads a library by name is named")
    if not templates:
        raise RulesError(where, "no [[template]] rows")
    return NameRules(tuple(templates), {p: tuple(sorted(v)) for p, v in fragments.items()}, tuple(provenance),
                     versioners, frozenset(functions))


def _load_names_file(path: Path) -> NameRules:
    doc = read_toml(path)
    prov = read_provenance(path, doc)
    top_level(path, doc, ("provenance", "loaders", "template", "fragment", "versioner"))
    functions: frozenset[str] = frozenset()
    if "loaders" in doc:
        loaders = check(path, "[loaders]", doc["loaders"], _LOADERS_REQUIRED)
        if not loaders["functions"] or not all(f.strip() for f in loaders["functions"]):
            raise RulesError(path, "[loaders]: 'functions' must list at least one function")
        functions = frozenset(loaders["functions"])
    templates = []
    for i, row in enumerate(rows(path, doc, "template")):
        where = f"template #{i + 1}"
        t = check(path, where, row, _TEMPLATE_REQUIRED)
        check_platform(path, where, t["platform"])
        name = t["name"]
        if name.count("{stem}") != 1 or name.count("{version}") > 1:
            raise RulesError(path, f"{where}: name must hold {{stem}} once and {{version}} at most once, got {name!r}")
        if name.find("{stem}") > name.find("{version}") >= 0:
            raise RulesError(path, f"{where}: {{version}} must come after {{stem}} in {name!r}")
        templates.append(NameTemplate(t["platform"], name, t["source"]))
    fragments: dict[str, list[str]] = {}
    for i, row in enumerate(rows(path, doc, "fragment")):
        where = f"fragment #{i + 1}"
        f = check(path, where, row, _FRAGMENT_REQUIRED)
        check_platform(path, where, f["platform"])
        if not f["strings"] or not all(f["strings"]):
            raise RulesError(path, f"{where}: 'strings' must list non-empty strings")
        fragments.setdefault(f["platform"], []).extend(f["strings"])
    versioners: dict[str, tuple[tuple[str, ...], str]] = {}
    for i, row in enumerate(rows(path, doc, "versioner")):
        where = f"versioner #{i + 1}"
        v = check(path, where, row, _VERSIONER_REQUIRED)
        check_platform(path, where, v["platform"])
        if v["platform"] in versioners:
            raise RulesError(path, f"{where}: a second [[versioner]] for {v['platform']}")
        if "{version}" not in v["appends"] or not v["strings"] or not all(v["strings"]):
            raise RulesError(path, f"{where}: 'appends' must hold {{version}} and 'strings' non-empty strings")
        versioners[v["platform"]] = (tuple(v["strings"]), v["appends"])
    return NameRules(tuple(templates), {p: tuple(v) for p, v in fragments.items()}, (prov,), versioners, functions)


def family_stems(rules: _HasFamilies, template: NameTemplate) -> dict[str, str]:
    """Stem -> family id, for the families whose file-name patterns start with
    ``template``'s head (its literal start, alternatives expanded).

    ``^libcublas\\.so\\.(11|12)$`` against ``lib{stem}.so.`` gives "cublas";
    ``^cudnn_(ops|cnn)64_9\\.dll$`` against ``{stem}64_`` gives "cudnn_ops" and
    "cudnn_cnn". Windows names compare case-insensitively, so stems are kept
    as the patterns spell them.
    """
    before, _, after = template.head.partition("{stem}")
    flags = re.IGNORECASE if template.platform == "windows" else 0
    if after:
        shape = re.compile(re.escape(before) + r"([A-Za-z][A-Za-z0-9_]*?)" + re.escape(after), flags)
    else:
        shape = re.compile(re.escape(before) + r"([A-Za-z][A-Za-z0-9_]*?)(?:64_|_\d|\d|\.dll|\.so|$)", flags)
    out: dict[str, str] = {}
    for family in rules.families:
        patterns = family.windows_patterns if template.platform == "windows" else family.linux_patterns
        for pattern in patterns:
            for prefix in literal_prefixes(pattern):
                m = shape.match(prefix)
                if (m and _STEM_RE.match(m.group(1)) and len(m.group(1)) >= MIN_STEM
                        and not _VERSIONED.search(m.group(1))):
                    out.setdefault(m.group(1), family.id)
    return out


def name_heads(names: NameRules, rules: _HasFamilies, platform: str) -> dict[str, tuple[frozenset[str], bool]]:
    """Whole strings worth finding -> (names they assemble, strong).

    For every template of ``platform`` and every stem the families give it:
    the bare stem ("cublas", weak: counts only next to a composition
    fragment) and the head up to each joining fragment ("libcublas",
    "libcublas.so", "libcublas.so." / "cublas64_"; strong when it reaches a
    fragment). The names keep the ``{version}`` placeholder.
    """
    heads: dict[str, tuple[set[str], bool]] = {}
    for template in names.templates:
        if template.platform != platform:
            continue
        before, _, after = template.head.partition("{stem}")
        for stem in family_stems(rules, template):
            name = template.name.replace("{stem}", stem)
            cuts = {stem, before + stem, before + stem + after}
            cuts |= {before + stem + after[:k] for k in range(2, len(after)) if after[k - 1] in "._"}
            for cut in cuts:
                strong = cut != stem
                got, was_strong = heads.get(cut, (set(), False))
                got.add(name)
                heads[cut] = (got, was_strong or strong)
    return {k: (frozenset(v), s) for k, (v, s) in heads.items()}


def literal_prefixes(pattern: str, limit: int = 64) -> list[str]:
    """The literal starts of an anchored regex, with groups of alternatives
    expanded: ``^libcudnn_(ops|cnn)\\.so\\.9`` -> ["libcudnn_ops.so.9",
    "libcudnn_cnn.so.9"]; ``^lib(cufftMp\\.so\\.1[12]|nvshmem_host\\.so\\.3)``
    -> ["libcufftMp.so.1", "libnvshmem_host.so.3"]. An optional group gives
    both; anything else (a class, a repeat) ends the prefix."""
    return _literal(pattern[1:] if pattern.startswith("^") else pattern, limit)[0]


def _literal(src: str, limit: int) -> tuple[list[str], bool]:
    """(prefixes, whether all of ``src`` was literal)."""
    outs = [""]
    i = 0
    while i < len(src):
        if len(outs) > limit:
            return outs, False
        c = src[i]
        if c == "\\" and i + 1 < len(src) and not src[i + 1].isalnum():
            if i + 2 < len(src) and src[i + 2] in "?*+{":
                return outs, False
            outs = [o + src[i + 1] for o in outs]
            i += 2
        elif c == "(":
            end = _group_end(src, i)
            if end < 0:
                return outs, False
            body = src[i + 1:end]
            if body.startswith("?:"):
                body = body[2:]
            elif body.startswith("?"):
                return outs, False
            parts = [_literal(alt, limit) for alt in _split_alternatives(body)]
            alts = [p for prefixes, _ in parts for p in prefixes]
            complete = all(done for _, done in parts)
            i = end + 1
            if i < len(src) and src[i] == "?":
                alts = ["", *alts]
                i += 1
            elif i < len(src) and src[i] in "*+{":
                return outs, False
            outs = [o + a for o in outs for a in alts]
            if not complete:
                return outs, False
        elif c.isalnum() or c in "_-":
            if i + 1 < len(src) and src[i + 1] in "?*{+":
                return outs, False
            outs = [o + c for o in outs]
            i += 1
        elif c == "$":
            return outs, i == len(src) - 1
        else:
            return outs, False
    return outs, True


def _group_end(src: str, start: int) -> int:
    depth = 0
    i = start
    while i < len(src):
        if src[i] == "\\":
            i += 2
            continue
        if src[i] == "(":
            depth += 1
        elif src[i] == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _split_alternatives(body: str) -> list[str]:
    out, depth, cur, i = [], 0, "", 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            cur += body[i:i + 2]
            i += 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(cur)
            cur = ""
            i += 1
            continue
        cur += c
        i += 1
    out.append(cur)
    return out


# ---------------------------------------------------------------------------
# generators.toml
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class GeneratorSwitch:
    setting: str  # what the user sets
    kind: str  # "env" | "python" | "config"
    emits: str  # what the generator then hands the driver ("none": it generates nothing)
    note: str = ""
    confidence: str = "verified"


@dataclass(frozen=True)
class GeneratorBackend:
    """A backend a generator's distribution may ship that compiles for AMD GPUs itself (Triton's AMD backend)."""

    id: str
    name: str
    files: tuple[str, ...]  # distribution files (RECORD paths) that show it ships
    #: files of another GPU backend: when one ships too, that one is taken under ZLUDA's CUDA build
    unless: tuple[str, ...]
    emits: str  # "hsaco"
    needs: str  # "hip-sdk": the HIP SDK (ROCm) on the host
    how: str
    taken: str  # when it is taken under ZLUDA, and what it takes (one sentence, with sources)
    not_taken: str  # why it is not when another backend ships too
    instead: str = ""  # advice when it ships but is not taken
    confidence: str = "verified"

    def ships(self, files: frozenset[str]) -> bool:
        return any(f in files for f in self.files)

    def is_taken(self, files: frozenset[str]) -> bool:
        return self.ships(files) and not any(f in files for f in self.unless)


@dataclass(frozen=True)
class Generator:
    """A framework component that makes GPU code while the program runs."""

    id: str
    name: str
    distributions: tuple[str, ...]  # PyPI names of CUDA builds (PEP 503 compare; may hold globs)
    emits: str  # by default: "ptx" or "sass"
    needed: str  # "always" (every GPU operation goes through it) or "optional"
    how: str  # one sentence: from what to what, through which compiler
    sources: tuple[str, ...]  # the file's provenance sources
    switches: tuple[GeneratorSwitch, ...] = ()
    zluda: str = ""  # why no setting gives ZLUDA code it can run ("" when a switch does)
    confidence: str = "verified"
    #: names that count only when the package holds CUDA binaries (CPU builds share the name)
    with_cuda: tuple[str, ...] = ()
    #: backends its distribution may ship that make AMD code instead ([[generator.backend]])
    backends: tuple[GeneratorBackend, ...] = ()

    def backend_in(self, files: frozenset[str]) -> GeneratorBackend | None:
        """The first of its backends that the distribution with these files ships, or None."""
        return next((b for b in self.backends if b.ships(files)), None)

    def matches(self, distribution_name: str, has_cuda: bool = True) -> bool:
        name = canonical_name(distribution_name)
        names = self.distributions + (self.with_cuda if has_cuda else ())
        return any(fnmatch.fnmatchcase(name, canonical_name(p)) for p in names)

    @property
    def ptx_switches(self) -> tuple[GeneratorSwitch, ...]:
        """Settings after which it hands the driver PTX, or nothing."""
        return tuple(s for s in self.switches if s.emits in ("ptx", "none"))


_GEN_REQUIRED: Schema = {"id": is_nonempty_str, "name": is_nonempty_str, "distributions": is_str_list,
                         "emits": is_str, "needed": is_str, "how": is_nonempty_str}
_GEN_OPTIONAL: Schema = {"zluda": is_str, "confidence": is_str, "with_cuda": is_str_list,
                         "switch": lambda v: isinstance(v, list), "backend": lambda v: isinstance(v, list)}
_BACKEND_REQUIRED: Schema = {"id": is_nonempty_str, "name": is_nonempty_str, "files": is_str_list,
                             "unless": is_str_list, "emits": is_str, "needs": is_str, "how": is_nonempty_str,
                             "taken": is_nonempty_str, "not_taken": is_nonempty_str}
_BACKEND_OPTIONAL: Schema = {"instead": is_str, "confidence": is_str}
_SWITCH_REQUIRED: Schema = {"setting": is_nonempty_str, "kind": is_str, "emits": is_str}
_SWITCH_OPTIONAL: Schema = {"note": is_str, "confidence": is_str}


def load_generators(rules_dir: str | os.PathLike[str] | None = None) -> tuple[Generator, ...]:
    """Load and validate one rules folder's ``runtime/generators.toml`` (default: the shipped one)."""
    return load_generator_files([_runtime_folder(rules_dir) / GENERATORS_FILE])


def load_generator_files(paths: Sequence[Path]) -> tuple[Generator, ...]:
    """Every generators.toml of ``paths`` (shipped first): a later file's
    generator replaces an earlier one of the same id, and comes first."""
    merged: dict[str, Generator] = {}
    for path in reversed(paths):
        for generator in _load_generators_file(path):
            merged.setdefault(generator.id, generator)
    return tuple(merged.values())


def _load_generators_file(path: Path) -> list[Generator]:
    doc = read_toml(path)
    prov = read_provenance(path, doc)
    top_level(path, doc, ("provenance", "generator"))
    out: list[Generator] = []
    for i, row in enumerate(rows(path, doc, "generator")):
        where = f"generator #{i + 1}"
        g = check(path, where, row, _GEN_REQUIRED, _GEN_OPTIONAL)
        if not ID_RE.match(g["id"]):
            raise RulesError(path, f"{where}: id must match {ID_RE.pattern}, got {g['id']!r}")
        if any(o.id == g["id"] for o in out):
            raise RulesError(path, f"{where}: duplicate generator id {g['id']!r}")
        choice(path, where, "emits", g["emits"], EMITS)
        choice(path, where, "confidence", g.get("confidence"), CONFIDENCE)
        choice(path, where, "needed", g["needed"], NEEDED)
        names = [*g["distributions"], *g.get("with_cuda", [])]
        if not names or not all(d.strip() for d in names):
            raise RulesError(path, f"{where}: 'distributions' / 'with_cuda' must list PyPI names")
        switches = []
        for k, srow in enumerate(g.get("switch", [])):
            swhere = f"{where} switch #{k + 1}"
            sw = check(path, swhere, srow, _SWITCH_REQUIRED, _SWITCH_OPTIONAL)
            choice(path, swhere, "kind", sw["kind"], SWITCH_KINDS)
            choice(path, swhere, "emits", sw["emits"], SWITCH_EMITS)
            choice(path, swhere, "confidence", sw.get("confidence"), CONFIDENCE)
            switches.append(GeneratorSwitch(sw["setting"], sw["kind"], sw["emits"], sw.get("note", ""),
                                            sw.get("confidence", "verified")))
        backends = [_backend(path, f"{where} backend #{k + 1}", brow) for k, brow in enumerate(g.get("backend", []))]
        out.append(Generator(g["id"], g["name"], tuple(g["distributions"]), g["emits"], g["needed"], g["how"],
                             prov.sources, tuple(switches), g.get("zluda", ""),
                             g.get("confidence", "verified"), tuple(g.get("with_cuda", ())), tuple(backends)))
    return out


def _backend(path: Path, where: str, row: object) -> GeneratorBackend:
    b = check(path, where, row, _BACKEND_REQUIRED, _BACKEND_OPTIONAL)
    if not ID_RE.match(b["id"]):
        raise RulesError(path, f"{where}: id must match {ID_RE.pattern}, got {b['id']!r}")
    choice(path, where, "emits", b["emits"], BACKEND_EMITS)
    choice(path, where, "needs", b["needs"], BACKEND_NEEDS)
    choice(path, where, "confidence", b.get("confidence"), CONFIDENCE)
    if not b["files"] or not all(f.strip() and not f.startswith("/") and "\\" not in f for f in b["files"]):
        raise RulesError(path, f"{where}: 'files' must list distribution paths ('pkg/sub/file.py')")
    return GeneratorBackend(b["id"], b["name"], tuple(b["files"]), tuple(b["unless"]), b["emits"], b["needs"],
                            b["how"], b["taken"], b["not_taken"], b.get("instead", ""),
                            b.get("confidence", "verified"))


def generators_for(distribution_name: str, generators: Iterable[Generator],
                   has_cuda: bool = True) -> tuple[Generator, ...]:
    """The generators a distribution carries (``has_cuda``: it holds CUDA binaries)."""
    return tuple(g for g in generators if g.matches(distribution_name, has_cuda))


# ---------------------------------------------------------------------------

def _runtime_folder(rules_dir: str | os.PathLike[str] | None) -> Path:
    """A rules folder's runtime/ folder (a runtime/ folder itself is taken as it is)."""
    base = shipped_rules_dir() if rules_dir is None else Path(rules_dir)
    return base / RUNTIME_DIR if (base / RUNTIME_DIR).is_dir() else base
