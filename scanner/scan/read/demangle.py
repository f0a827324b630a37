"""Kernel names as a C++ programmer wrote them: Itanium (``_Z…``) and MSVC (``?…@@…``) names demangled.

    demangle("_Z6kernelPfi")   # "kernel(float*, int)" where LIEF can, else None

LIEF's ``lief.demangle`` does both schemes, but only in LIEF's extended
build (``lief.__extended__``); the PyPI build's function prints "This
function requires the extended version of LIEF" and returns None (checked:
lief 1.0.0, for ``_Z6kernelPfi`` and ``?kern@@YAXPEAM@Z``). It is asked only
where it can answer (a LIEF already loaded, extended), so a scan prints nothing; without it a name stays as
it is written (None here), and the report keeps the mangled name either way.
"""
from __future__ import annotations

import sys

__all__ = ["demangle", "demangled_names", "looks_mangled", "shown"]


def _can_demangle() -> bool:
    # only a LIEF the scan has loaded already (--engine lief): importing it costs a fast scan 0.3 s (a third of a
    # re-scan of CUDA wheels), for a demangler the PyPI build does not have
    lief = sys.modules.get("lief")
    # a LIEF without the attribute predates the extended build (its demangler, if any, is its own)
    return lief is not None and hasattr(lief, "demangle") and getattr(lief, "__extended__", None) is not False


def looks_mangled(name: str) -> bool:
    """An Itanium (``_Z``) or MSVC (``?``) mangled name."""
    return name.startswith(("_Z", "?"))


def demangle(name: str) -> str | None:
    """``name`` demangled, or None where it is not mangled or cannot be demangled here."""
    if not looks_mangled(name) or not _can_demangle():
        return None
    text = sys.modules["lief"].demangle(name)
    return text if isinstance(text, str) and text and text != name else None


def demangled_names(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """mangled -> demangled for those of ``names`` that demangle (report field ptx_check.demangled)."""
    if not any(looks_mangled(n) for n in names) or not _can_demangle():
        return {}
    out = {}
    for name in names:
        text = demangle(name)
        if text is not None:
            out[name] = text
    return out


def shown(name: str, demangled: dict[str, str]) -> str:
    """A kernel's name for people: the demangled one where known, else as written."""
    return demangled.get(name, name)
