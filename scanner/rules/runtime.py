"""Rules for what happens at run time: how loaders assemble library names, which code generators run.

    names = load_name_rules()                       # rules/runtime/names.toml
    heads = name_heads(names, rules, "linux")       # {"cublas": {"libcublas.so.{version}", ...}, "libnvrtc.so.": ...}
    gens = load_generators()                        # rules/runtime/generators.toml
    generators_for("jax-cuda12-pjrt", gens)         # -> (Generator(id="xla", emits="sass", ...),)

Both files live in ``rules/runtime/`` (the rules loader admits only its own
files at the top of ``rules/``). Invalid data raises RulesError naming the file.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from cuda4amd.rules.loader import (
    PLATFORMS,
    Provenance,
    RulesError,
    RuleSet,
    _check,
    _is_nonempty_str,
    _is_str,
    _is_str_list,
    _provenance,
    _read_toml,
    _rows,
    _top_level,
    shipped_rules_dir,
)
from cuda4amd.scan.distributions import canonical_name

__all__ = [
    "RUNTIME_DIR", "EMITS", "SWITCH_EMITS", "NEEDED", "NameTemplate", "NameRules", "Generator", "GeneratorSwitch",
    "load_name_rules", "name_heads", "family_stems", "load_generators", "generators_for",
]

RUNTIME_DIR = "runtime"
#: what a generator hands the driver: PTX (ZLUDA can take it), SASS (it cannot)
EMITS: tuple[str, ...] = ("ptx", "sass")
#: what a switch makes it do: emit PTX, or generate nothing at all
SWITCH_EMITS: tuple[str, ...] = ("ptx", "sass", "none")
NEEDED: tuple[str, ...] = ("always", "optional")
_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
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
    provenance: Provenance
    #: platform -> (printf templates that append a version to a base name, what they append)
    versioners: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    #: functions that load a library by name (dlopen, LoadLibraryExW, ...)
    loader_functions: frozenset[str] = frozenset()


# ---------------------------------------------------------------------------
# names.toml
# ---------------------------------------------------------------------------

_TEMPLATE_REQUIRED = {"platform": _is_str, "name": _is_nonempty_str, "source": _is_nonempty_str}
_FRAGMENT_REQUIRED = {"platform": _is_str, "strings": _is_str_list, "source": _is_nonempty_str}
_VERSIONER_REQUIRED = {"platform": _is_str, "strings": _is_str_list, "appends": _is_nonempty_str,
                       "source": _is_nonempty_str}


def load_name_rules(rules_dir: str | Path | None = None) -> NameRules:
    """Load and validate ``runtime/names.toml`` (default: the shipped one)."""
    path = _folder(rules_dir) / "names.toml"
    doc = _read_toml(path)
    prov = _provenance(path, doc)
    _top_level(path, doc, ("provenance", "loaders", "template", "fragment", "versioner"))
    loaders = _check(path, "[loaders]", doc.get("loaders", {}), {"functions": _is_str_list, "source": _is_nonempty_str})
    if not loaders["functions"]:
        raise RulesError(path, "[loaders]: 'functions' must list at least one function")
    templates = []
    for i, row in enumerate(_rows(path, doc, "template")):
        where = f"template #{i + 1}"
        t = _check(path, where, row, _TEMPLATE_REQUIRED)
        _platform(path, where, t["platform"])
        name = t["name"]
        if name.count("{stem}") != 1 or name.count("{version}") > 1:
            raise RulesError(path, f"{where}: name must hold {{stem}} once and {{version}} at most once, got {name!r}")
        if name.find("{stem}") > name.find("{version}") >= 0:
            raise RulesError(path, f"{where}: {{version}} must come after {{stem}} in {name!r}")
        templates.append(NameTemplate(t["platform"], name, t["source"]))
    fragments: dict[str, list[str]] = {}
    for i, row in enumerate(_rows(path, doc, "fragment")):
        where = f"fragment #{i + 1}"
        f = _check(path, where, row, _FRAGMENT_REQUIRED)
        _platform(path, where, f["platform"])
        if not f["strings"] or not all(f["strings"]):
            raise RulesError(path, f"{where}: 'strings' must list non-empty strings")
        fragments.setdefault(f["platform"], []).extend(f["strings"])
    versioners: dict[str, tuple[tuple[str, ...], str]] = {}
    for i, row in enumerate(_rows(path, doc, "versioner")):
        where = f"versioner #{i + 1}"
        v = _check(path, where, row, _VERSIONER_REQUIRED)
        _platform(path, where, v["platform"])
        if v["platform"] in versioners:
            raise RulesError(path, f"{where}: a second [[versioner]] for {v['platform']}")
        if "{version}" not in v["appends"] or not v["strings"] or not all(v["strings"]):
            raise RulesError(path, f"{where}: 'appends' must hold {{version}} and 'strings' non-empty strings")
        versioners[v["platform"]] = (tuple(v["strings"]), v["appends"])
    if not templates:
        raise RulesError(path, "no [[template]] rows")
    return NameRules(tuple(templates), {p: tuple(sorted(set(v))) for p, v in fragments.items()}, prov, versioners,
                     frozenset(loaders["functions"]))


def family_stems(rules: RuleSet, template: NameTemplate) -> dict[str, str]:
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
                if m and _STEM_RE.match(m.group(1)) and len(m.group(1)) >= MIN_STEM and not _VERSIONED.search(m.group(1)):
                    out.setdefault(m.group(1), family.id)
    return out


def name_heads(names: NameRules, rules: RuleSet, platform: str) -> dict[str, tuple[frozenset[str], bool]]:
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

    def matches(self, distribution_name: str, has_cuda: bool = True) -> bool:
        name = canonical_name(distribution_name)
        names = self.distributions + (self.with_cuda if has_cuda else ())
        return any(fnmatch.fnmatchcase(name, canonical_name(p)) for p in names)

    @property
    def ptx_switches(self) -> tuple[GeneratorSwitch, ...]:
        """Settings after which it hands the driver PTX, or nothing."""
        return tuple(s for s in self.switches if s.emits in ("ptx", "none"))


_GEN_REQUIRED = {"id": _is_nonempty_str, "name": _is_nonempty_str, "distributions": _is_str_list,
                 "emits": _is_str, "needed": _is_str, "how": _is_nonempty_str}
_GEN_OPTIONAL = {"zluda": _is_str, "confidence": _is_str, "with_cuda": _is_str_list,
                 "switch": lambda v: isinstance(v, list)}
_SWITCH_REQUIRED = {"setting": _is_nonempty_str, "kind": _is_str, "emits": _is_str}
_SWITCH_OPTIONAL = {"note": _is_str, "confidence": _is_str}
_KINDS = ("env", "python", "config")
_CONFIDENCE = ("verified", "unverified")


def load_generators(rules_dir: str | Path | None = None) -> tuple[Generator, ...]:
    """Load and validate ``runtime/generators.toml`` (default: the shipped one)."""
    path = _folder(rules_dir) / "generators.toml"
    doc = _read_toml(path)
    prov = _provenance(path, doc)
    _top_level(path, doc, ("provenance", "generator"))
    out: list[Generator] = []
    for i, row in enumerate(_rows(path, doc, "generator")):
        where = f"generator #{i + 1}"
        g = _check(path, where, row, _GEN_REQUIRED, _GEN_OPTIONAL)
        if not _ID_RE.match(g["id"]):
            raise RulesError(path, f"{where}: id must match {_ID_RE.pattern}, got {g['id']!r}")
        if any(o.id == g["id"] for o in out):
            raise RulesError(path, f"{where}: duplicate generator id {g['id']!r}")
        _one_of(path, where, "emits", g["emits"], EMITS)
        _one_of(path, where, "confidence", g.get("confidence", "verified"), _CONFIDENCE)
        _one_of(path, where, "needed", g["needed"], NEEDED)
        names = [*g["distributions"], *g.get("with_cuda", [])]
        if not names or not all(d.strip() for d in names):
            raise RulesError(path, f"{where}: 'distributions' / 'with_cuda' must list PyPI names")
        switches = []
        for k, srow in enumerate(g.get("switch", [])):
            swhere = f"{where} switch #{k + 1}"
            s = _check(path, swhere, srow, _SWITCH_REQUIRED, _SWITCH_OPTIONAL)
            _one_of(path, swhere, "kind", s["kind"], _KINDS)
            _one_of(path, swhere, "emits", s["emits"], SWITCH_EMITS)
            _one_of(path, swhere, "confidence", s.get("confidence", "verified"), _CONFIDENCE)
            switches.append(GeneratorSwitch(s["setting"], s["kind"], s["emits"], s.get("note", ""),
                                            s.get("confidence", "verified")))
        out.append(Generator(g["id"], g["name"], tuple(g["distributions"]), g["emits"], g["needed"], g["how"],
                             prov.sources, tuple(switches), g.get("zluda", ""),
                             g.get("confidence", "verified"), tuple(g.get("with_cuda", ()))))
    return tuple(out)


def generators_for(distribution_name: str, generators: Iterable[Generator],
                   has_cuda: bool = True) -> tuple[Generator, ...]:
    """The generators a distribution carries (``has_cuda``: it holds CUDA binaries)."""
    return tuple(g for g in generators if g.matches(distribution_name, has_cuda))


# ---------------------------------------------------------------------------

def _folder(rules_dir: str | Path | None) -> Path:
    base = shipped_rules_dir() if rules_dir is None else Path(rules_dir)
    return base / RUNTIME_DIR if (base / RUNTIME_DIR).is_dir() else base


def _platform(path: Path, where: str, value: str) -> None:
    _one_of(path, where, "platform", value, PLATFORMS)


def _one_of(path: Path, where: str, key: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise RulesError(path, f"{where}: {key} must be one of {', '.join(allowed)}, got {value!r}")
