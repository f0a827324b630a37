"""Rule data: the code that loads and validates the TOML in `rules/` (see docs/rules.md).

    from cuda4amd.rules import load_rules, RuleSet, RulesError
    rules = load_rules(extra_dirs)   # every kind, every folder, once
    rules.families, rules.system, rules.release(tag), rules.gpus, rules.frameworks

`loader` builds the RuleSet (families, system libraries, ZLUDA releases and
pins, and through `gpus` and `frameworks` the GPU profiles and the framework
files); `validate` is the kit each rule kind's parser uses (read_toml,
check, read_provenance, RulesError). This package re-exports their public
names, so `cuda4amd.rules.load_rules` stays where it always was.
"""
from __future__ import annotations

from cuda4amd.rules.loader import (
    ROUTES,
    SYMBOL_STATES,
    SYSTEM_KINDS,
    Family,
    Pin,
    Redirect,
    RuleSet,
    SystemGroup,
    UnknownPattern,
    ZludaFile,
    ZludaRelease,
    load_release,
    load_rules,
)
from cuda4amd.rules.validate import PLATFORMS, Provenance, RulesError, shipped_rules_dir

__all__ = [
    "PLATFORMS", "ROUTES", "SYSTEM_KINDS", "SYMBOL_STATES",
    "RulesError", "Provenance", "Family", "UnknownPattern", "SystemGroup", "Pin",
    "ZludaFile", "Redirect", "ZludaRelease", "RuleSet",
    "load_rules", "load_release", "shipped_rules_dir",
]
