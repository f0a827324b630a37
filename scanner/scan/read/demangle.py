"""Kernel names as a C++ programmer wrote them: Itanium (``_Z…``) and MSVC (``?…@@…``) names demangled.

    demangle("_Z6kernelPfi")   # "kernel(float*, int)", or None where no demangler is at hand

The demangler is the PyPI package ``demangle`` (pure Python, no dependencies, MIT; Itanium and MSVC among
others; Python 3.11+, so a dependency only there: pyproject.toml): checked on 1,770 real kernel names of
CuPy's, cuFFT's, cuRAND's and CTranslate2's PTX, it read all of them as ``c++filt`` does but for blanks
(``itanium-demangler`` 1.1 failed 300 of them, Itanium only). It never raises over a name and bounds its own
work (``demangle.DEFAULT_LIMITS``); names longer than :data:`LONGEST` are not given to it. It is imported only
when a name to show is mangled (17 ms).

Without it (Python 3.10), LIEF's ``lief.demangle`` answers where LIEF is its extended build
(``lief.__extended__``) and already loaded: the PyPI build's function prints "This function requires the
extended version of LIEF" and returns None (checked: lief 1.0.0), and importing LIEF costs a fast scan 0.3 s.
Otherwise the report keeps the name as written.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["LONGEST", "demangle", "demangled_names", "looks_mangled", "shown"]

#: longer names stay as written (real kernel names run to a few hundred characters; a hostile PTX text's
#: names are bounded here, not only by the demangler's own limits)
LONGEST = 4096


def _demangler() -> Callable[[str], object] | None:
    try:
        import demangle as library  # the PyPI package (absolute import: not this module)
    except ImportError:
        pass
    else:
        return library.demangle
    lief = sys.modules.get("lief")
    # a LIEF without the attribute predates the extended build (its demangler, if any, is its own)
    if lief is not None and hasattr(lief, "demangle") and getattr(lief, "__extended__", None) is not False:
        return lief.demangle
    return None


def looks_mangled(name: str) -> bool:
    """An Itanium (``_Z``) or MSVC (``?``) mangled name."""
    return name.startswith(("_Z", "?"))


def demangle(name: str) -> str | None:
    """``name`` demangled, or None where it is not mangled or cannot be demangled here."""
    if not looks_mangled(name) or len(name) > LONGEST:
        return None
    demangler = _demangler()
    if demangler is None:
        return None
    text = demangler(name)
    return text if isinstance(text, str) and text and text != name else None


def demangled_names(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """mangled -> demangled for those of ``names`` that demangle (report field ptx_check.demangled)."""
    if not any(looks_mangled(n) for n in names):
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
