"""Rule data: the code that loads and validates the TOML in `rules/` (see docs/rules.md).

    from cuda4amd.rules import load_rules, RuleSet, RulesError
    rules = load_rules(extra_dirs)   # every kind, every folder, once
    rules.families, rules.system, rules.release(tag), rules.gpus, rules.frameworks

`ruleset` builds the RuleSet from every rules folder; one module parses each
rule kind: `families` (families.toml, and the name look-ups), `system`
(system.toml), `releases` (zluda/: releases, pins), `gpus`, `frameworks`,
`kernels`, `runtime`; `validate` is the kit each of them uses (read_toml,
check, read_provenance, RulesError). This package re-exports the public
names most callers need, so `cuda4amd.rules.load_rules` stays where it
always was.
"""
from __future__ import annotations

from cuda4amd.model import SYMBOL_STATES
from cuda4amd.rules.families import ROUTES, Family, UnknownPattern
from cuda4amd.rules.releases import Pin, Redirect, ZludaFile, ZludaRelease, load_release
from cuda4amd.rules.ruleset import RuleSet, load_rules
from cuda4amd.rules.system import SYSTEM_KINDS, SystemGroup
from cuda4amd.rules.validate import PLATFORMS, Provenance, RulesError, shipped_rules_dir

__all__ = [
    "PLATFORMS",
    "ROUTES",
    "SYMBOL_STATES",
    "SYSTEM_KINDS",
    "Family",
    "Pin",
    "Provenance",
    "Redirect",
    "RuleSet",
    "RulesError",
    "SystemGroup",
    "UnknownPattern",
    "ZludaFile",
    "ZludaRelease",
    "load_release",
    "load_rules",
    "shipped_rules_dir",
]
