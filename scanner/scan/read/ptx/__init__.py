"""PTX as ZLUDA reads it: a lexer and statement reader (lexer, module) and the judge (judge) that applies
one release's rules (cuda4amd.rules.ptx_rules) to a module and to a fat binary container's entries."""
from cuda4amd.scan.read.ptx.judge import OUTCOMES, ModuleResult, PtxChecker, check_container, check_ptx_module

__all__ = ["OUTCOMES", "ModuleResult", "PtxChecker", "check_container", "check_ptx_module"]
