"""Rule data: the code that loads and validates the TOML in `rules/` (see docs/rules.md).

    from cuda4amd.rules import load_rules, RuleSet, RulesError

The loader (`loader`), the framework rules (`frameworks`) and the GPU
profiles (`gpus`) are submodules; this package re-exports the loader's public
names, so `cuda4amd.rules.load_rules` stays where it always was.
"""
from __future__ import annotations

from cuda4amd.rules.loader import (
    PLATFORMS,
    ROUTES,
    SYMBOL_STATES,
    SYSTEM_KINDS,
    Family,
    Pin,
    Provenance,
    Redirect,
    RulesError,
    RuleSet,
    SystemGroup,
    UnknownPattern,
    ZludaFile,
    ZludaRelease,
    load_release,
    load_rules,
    shipped_rules_dir,
)

__all__ = [
    "PLATFORMS", "ROUTES", "SYSTEM_KINDS", "SYMBOL_STATES",
    "RulesError", "Provenance", "Family", "UnknownPattern", "SystemGroup", "Pin",
    "ZludaFile", "Redirect", "ZludaRelease", "RuleSet",
    "load_rules", "load_release", "shipped_rules_dir",
]
