"""ZLUDA's PTX check beyond the registered sections (issue 29, items 1 and 4): which containers are
registered, the check of those nothing registers, and the dropped kernels' demangled names."""
from __future__ import annotations

import struct
import sys

import pytest
from conftest import FIXTURES

from cuda4amd.report.document import ptx_check_line, unregistered_ptx_line
from cuda4amd.scan.read import demangle as demangling
from cuda4amd.scan.read.engine import read_path
from cuda4amd.scan.read.fatbin import WRAPPER_MAGIC, analyse_kernels
from cuda4amd.scan.read.ptx.stage import PtxStage

KERNELS = FIXTURES / "kernels"


def containers(rel: str, data: bytes | None = None, deep: bool = True) -> tuple[list[int], list[tuple[int, str]]]:
    path = KERNELS / rel
    info = read_path(path)
    registered: list[int] = []
    unregistered: list[tuple[int, str]] = []
    analyse_kernels(data if data is not None else path.read_bytes(), info, deep=deep, ptx_registered=registered,
                    ptx_unregistered=unregistered)
    return registered, unregistered


def test_a_registered_section_is_registered():
    registered, unregistered = containers("pe/axpy_fatb.dll")
    assert registered and not unregistered


def test_a_container_a_wrapper_points_at_is_registered_wherever_it_lies():
    """axpy_rdata.dll: nvcc's container in .rdata, its .nvFatBi wrapper pointing at it: the runtime is
    handed the wrapper (__cudaRegisterFatBinary), so it is registered, and found without the deep search."""
    assert containers("pe/axpy_rdata.dll", deep=False) == containers("pe/axpy_rdata.dll") == ([0x1C00], [])


def test_a_data_section_container_without_a_wrapper_is_never_registered():
    """The same file with the wrapper's data pointer zeroed: the container is only found by the deep
    search of .rdata (as in NVIDIA's libraries, which load such blobs with cuModuleLoadData)."""
    data = bytearray((KERNELS / "pe/axpy_rdata.dll").read_bytes())
    at = data.find(struct.pack("<I", WRAPPER_MAGIC))
    assert at > 0
    data[at + 8:at + 16] = bytes(8)
    assert containers("pe/axpy_rdata.dll", bytes(data)) == ([], [(0x1C00, ".rdata")])
    assert containers("pe/axpy_rdata.dll", bytes(data), deep=False) == ([], [])  # not searched: not found


def test_relocatable_device_code_is_never_registered():
    registered, unregistered = containers("pe/axpy_rel.dll")
    assert not registered and [section for _, section in unregistered] == ["__nv_rel"]
    facts = PtxStage.for_rules().check((KERNELS / "pe/axpy_rel.dll").read_bytes(), [unregistered[0][0]])
    assert facts.tags and all(counts[0] == 1 for counts in facts.counts)  # its PTX is ok at every release


def test_unregistered_line():
    check = {"release": "v6", "sections": [".data"], "kernels": 9, "dropped_kernels": 3,
             "containers": {"ok": 1, "functions_dropped": 1, "load_fails": 0, "empty_module": 0, "no_ptx": 0},
             "first_refusal": {"construct": "red.add", "source": "ptx_parser/src/lib.rs:1@v6"}}
    line = unregistered_ptx_line(check)
    assert "(.data; not in the verdict)" in line and "1 ok, 1 functions dropped of 2 container(s)" in line
    assert "3 kernels dropped" in line and "red.add (ptx_parser/src/lib.rs:1@v6)" in line
    assert unregistered_ptx_line(None) == ""


def test_itanium_and_msvc_names_are_demangled_by_the_demangle_package():
    pytest.importorskip("demangle", reason="the demangle package (Python 3.11+) is not installed")
    assert demangling.demangle("_Z6kernelPfi") == "kernel(float*, int)"
    assert demangling.demangle("?kern@@YAXPEAM@Z") == "void __cdecl kern(float *)"
    assert demangling.demangled_names(["_Z6kernelPfi", "plain_kernel", "_Zbroken"]) == {
        "_Z6kernelPfi": "kernel(float*, int)"}  # not mangled, or not read: left out (shown as written)
    assert demangling.demangle("plain_kernel") is None
    assert demangling.demangle("_Z" + "A" * demangling.LONGEST) is None  # a hostile text's name: not read


def test_without_the_package_only_an_extended_lief_answers(monkeypatch, capfd):
    """The PyPI build of LIEF has no demangler (lief.demangle prints a notice and returns None): without the
    demangle package it is not asked, nothing is printed, the names stay as written."""
    import lief

    monkeypatch.setitem(sys.modules, "demangle", None)  # import demangle raises ImportError
    if getattr(lief, "__extended__", False):
        assert demangling.demangle("_Z6kernelPfi") == "kernel(float*, int)"
    else:
        assert demangling.demangle("_Z6kernelPfi") is None
        assert demangling.demangled_names(["_Z6kernelPfi", "?kern@@YAXPEAM@Z"]) == {}
        assert capfd.readouterr().err == ""


@pytest.fixture
def extended(monkeypatch):
    """No demangle package; LIEF as its extended build answers (its demangler stood in for)."""
    import lief

    names = {"_Z6kernelPfi": "kernel(float*, int)", "?kern@@YAXPEAM@Z": "void __cdecl kern(float *)"}
    monkeypatch.setitem(sys.modules, "demangle", None)
    monkeypatch.setattr(lief, "__extended__", True, raising=False)
    monkeypatch.setattr(lief, "demangle", names.get, raising=False)
    return names


def test_dropped_kernels_shown_demangled(extended):
    dropped = ["_Z6kernelPfi", "?kern@@YAXPEAM@Z", "plain", "_Zbroken"]
    demangled = demangling.demangled_names(dropped)
    assert demangled == extended  # Itanium and MSVC; not mangled or not demangled: left out
    check = {"release": "v6", "kernels": 5, "dropped_kernels": dropped, "demangled": demangled,
             "containers": {"ok": 0, "functions_dropped": 1, "load_fails": 0, "empty_module": 0, "no_ptx": 0},
             "first_refusal": {"construct": "red.add", "source": "ptx_parser/src/lib.rs:1@v6"}}
    line = ptx_check_line(check)
    assert "dropped kernels: kernel(float*, int), void __cdecl kern(float *), plain, _Zbroken;" in line


def test_the_verdict_reason_shows_demangled_names(extended):
    from types import SimpleNamespace

    from cuda4amd.model import KernelReport
    from cuda4amd.rules.kernels import PtxAcceptance
    from cuda4amd.scan.classify import Identity
    from cuda4amd.scan.verdict import decide

    kernels = KernelReport(state="ptx-available", modules=1, modules_with_ptx=1, ptx_tags=("v6",),
                           ptx_counts=((0, 1, 0, 0, 0, 2),), ptx_dropped=(("_Z6kernelPfi",),),
                           ptx_refusal=(("red.add", "ptx_parser/src/lib.rs:1@v6"),))
    binary = SimpleNamespace(path="k.dll", kernels=kernels, info=SimpleNamespace(bind_now=False))
    ptx = PtxAcceptance("v6", True, "", True, "")
    [result] = decide([binary], [], {"k.dll": Identity(None, None, None, None, None, None)},  # type: ignore[list-item]
                      ptx=ptx)
    assert result.verdict == "degraded"
    assert result.reasons == ["1 of 2 kernels are dropped by ZLUDA v6's PTX parser (kernel(float*, int)): first "
                              "construct red.add (ptx_parser/src/lib.rs:1@v6)"]


def test_demangling_never_imports_lief_for_a_fast_scan():
    # importing LIEF costs 0.3 s: a re-scan of CUDA wheels spent a third of its time on it, for no demangler
    import subprocess
    import sys

    code = ("import sys; sys.modules['demangle'] = None; from cuda4amd.scan.read.demangle import demangled_names; "
            "assert demangled_names(['_Z6kernelPfi']) == {}; print('lief' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
