"""Acceptance (issue 29): ZLUDA's PTX check on real wheels from PyPI (tests/wheelcache.py).

Per binary, what the check reports at each release: containers by outcome, the kernels of the modules
ZLUDA picks, the kernels dropped, the first refusal with its source. The numbers are what the checker
reports (pinned so a change of them is seen); the first constructs were read in vosen/ZLUDA's
ptx_parser/src/lib.rs at each tag (git show TAG:ptx_parser/src/lib.rs):

* ``fma.rn.bf16`` (ctranslate2.dll): fma's patterns are ``.f32``/``.f64``, ``.rn .f16`` and
  ``.type_x2``; ``//fma.rnd{.relu}.bf16 d, a, b, c;`` is commented out (lib.rs:2997@v6-preview.69,
  3021@v6, 3027@v7-preview.9), so the statement does not parse and ``fn directive`` drops its function
  (lib.rs:563-600@v6-preview.69: an error while parsing a directive returns ``Ok(None)``).
* ``bfind.shiftamt.u32`` (curand64_10.dll): no ``bfind`` rule at v5 or v6-preview.69; v6 adds
  ``bfind.shiftamt.u32 d, a`` (lib.rs:4433@v6), so curand's kernels are all kept from v6 on.
* ``cp.async.cg.shared.global.L2::128B`` (cusparseLt.dll): the rule parses it, then pushes
  ``PtxError::Todo("cp.async instruction with cache policy/cache hints/prefetch size")`` when a cache
  hint or prefetch size is given (lib.rs:3981-3984@v6-preview.69): the function is dropped.

And over every binary of these wheels, at every release: none is ``ready`` with a registered container
that ZLUDA refuses (drops functions of, fails to load, loads empty, or finds no PTX in).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from wheelcache import LINUX, Unavailable, unpacked

from cuda4amd.scan.verdict import LEAST_RUNNABLE_SHARE

pytestmark = pytest.mark.acceptance

TAGS = ("v5", "v6-preview.69", "v6", "v7-preview.9")
WHEELS = {
    "ctranslate2": ("ctranslate2==4.8.5", "win_amd64"),
    "cupy": ("cupy-cuda12x==14.2.0", "win_amd64"),
    "curand": ("nvidia-curand-cu12==10.3.5.147", "win_amd64"),
    "cusparselt": ("nvidia-cusparselt-cu12==0.6.2", "win_amd64"),
    "jax-pjrt": ("jax-cuda12-pjrt==0.7.0", LINUX),
    "jax-plugin": ("jax-cuda12-plugin==0.7.0", LINUX),
    "nccl": ("nvidia-nccl-cu12==2.19.3", LINUX),
}
REFUSED = ("functions_dropped", "load_fails", "empty_module", "no_ptx")
LIB = "ptx_parser/src/lib.rs"

#: (wheel, binary, tag) -> ([ok, functions_dropped, load_fails, empty_module, no_ptx], kernels, dropped,
#: first construct (its start), first source); tags not listed for a binary: the same as the tag before
PINS = {
    ("ctranslate2", "ctranslate2/ctranslate2.dll", "v5"): ([25, 9, 0, 0, 0], 539, 52, "fma.rn.bf16", f"{LIB}:2737@v5"),
    ("ctranslate2", "ctranslate2/ctranslate2.dll", "v6-preview.69"):
        ([27, 7, 0, 0, 0], 539, 41, "fma.rn.bf16", f"{LIB}:2953@v6-preview.69"),
    ("ctranslate2", "ctranslate2/ctranslate2.dll", "v6"): ([27, 7, 0, 0, 0], 539, 41, "fma.rn.bf16", f"{LIB}:2977@v6"),
    ("ctranslate2", "ctranslate2/ctranslate2.dll", "v7-preview.9"):
        ([27, 7, 0, 0, 0], 539, 41, "fma.rn.bf16", f"{LIB}:2983@v7-preview.9"),
    ("cupy", "cupy/cuda/cub.cp312-win_amd64.pyd", "v6-preview.69"):
        ([0, 1, 0, 0, 0], 383, 14, "set.nan.f16.f16", f"{LIB}:2543@v6-preview.69"),
    ("cupy", "cupy/cuda/thrust.cp312-win_amd64.pyd", "v5"):
        ([0, 1, 0, 0, 0], 548, 178, "set.nan.f16.f16", f"{LIB}:2356@v5"),
    ("cupy", "cupy/cuda/thrust.cp312-win_amd64.pyd", "v6-preview.69"):
        ([0, 1, 0, 0, 0], 548, 58, "set.nan.f16.f16", f"{LIB}:2543@v6-preview.69"),
    ("cupy", "cupy/cuda/thrust.cp312-win_amd64.pyd", "v6"):
        ([0, 1, 0, 0, 0], 548, 26, "set.nan.f16.f16", f"{LIB}:2561@v6"),
    ("cupy", "cupy/random/_generator_api.cp312-win_amd64.pyd", "v6"): ([1, 0, 0, 0, 0], 48, 0, None, None),
    ("curand", "nvidia/curand/bin/curand64_10.dll", "v6-preview.69"):
        ([4, 6, 0, 0, 0], 296, 24, "bfind.shiftamt.u32", f"{LIB}:563-600@v6-preview.69"),
    ("curand", "nvidia/curand/bin/curand64_10.dll", "v6"): ([10, 0, 0, 0, 0], 296, 0, None, None),
    ("curand", "nvidia/curand/bin/curand64_10.dll", "v7-preview.9"): ([10, 0, 0, 0, 0], 296, 0, None, None),
    ("cusparselt", "cusparselt/bin/cusparseLt.dll", "v6-preview.69"):
        ([1, 1, 0, 0, 0], 318, 288, "cp.async.cg.shared.global.L2::128B", f"{LIB}:3983@v6-preview.69"),
    ("cusparselt", "cusparselt/bin/cusparseLt.dll", "v7-preview.9"):
        ([1, 1, 0, 0, 0], 318, 288, "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", f"{LIB}:4196@v7-preview.9"),
    ("jax-pjrt", "jax_plugins/xla_cuda12/xla_cuda_plugin.so", "v6-preview.69"):
        ([9, 31, 0, 0, 0], 617, 62, "ld.global.L2::128B.u16", f"{LIB}:2166@v6-preview.69"),
}


def tree(key: str) -> Path:
    spec, platform = WHEELS[key]
    try:
        return unpacked(spec, platform)
    except Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def reports(rules):
    """The JSON report of each wheel's tree at each release, made once."""
    from cuda4amd.report.document import build
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    made: dict[tuple[str, str], dict] = {}

    def report(key: str, tag: str) -> dict:
        if (key, tag) not in made:
            made[key, tag] = build(run_scan(ScanOptions(target=str(tree(key)), zluda_release=tag), rules=rules))
        return made[key, tag]

    return report


def binaries(doc: dict) -> dict[str, dict]:
    return {b["path"]: b for b in doc["binaries"]}


@pytest.mark.parametrize(("key", "path", "tag"), sorted(PINS))
def test_pinned_counts_and_first_construct(reports, key, path, tag):
    counts, kernels, dropped, construct, source = PINS[key, path, tag]
    binary = binaries(reports(key, tag))[path]
    check = binary["kernels"]["ptx_check"]
    assert check["release"] == tag
    assert [check["containers"][k] for k in ("ok", *REFUSED)] == counts
    assert check["kernels"] == kernels and len(check["dropped_kernels"]) == dropped
    refusal = check["first_refusal"]
    if construct is None:
        assert refusal is None and binary["verdict"] != "blocked"
    else:
        assert refusal["construct"].startswith(construct + ":") and refusal["source"].startswith(source)
        modules = binary["kernels"]["modules"]
        # PTX in fewer than half of its modules (cuSPARSELt: 2 of 2511) blocks it whatever the parser drops
        mostly_sass = modules["with_ptx"] / modules["total"] < LEAST_RUNNABLE_SHARE
        assert binary["verdict"] == ("blocked" if mostly_sass else "degraded")
        said = [r for r in binary["reasons"] if "kernels are dropped by ZLUDA" in r]
        assert said and f"{dropped} of {kernels} kernels" in said[0] and construct in said[0]


@pytest.mark.parametrize("tag", TAGS)
@pytest.mark.parametrize("key", sorted(WHEELS))
def test_no_binary_is_ready_with_a_container_zluda_refuses(reports, key, tag):
    checked = 0
    for binary in reports(key, tag)["binaries"]:
        check = binary["kernels"]["ptx_check"]
        if check is None:
            continue
        checked += 1
        refused = {k: check["containers"][k] for k in REFUSED if check["containers"][k]}
        if refused:
            assert binary["verdict"] != "ready", (binary["path"], refused)
        if check["containers"]["load_fails"]:
            assert binary["verdict"] == "blocked", binary["path"]
    assert checked or key in ("nccl",)  # NCCL's PTX is all relocatable: nothing registered to check


def test_nccl_relocatable_ptx_is_checked_apart(reports):
    """libnccl.so.2 keeps its PTX in __nv_relfatbin (device link input, never registered): checked and
    reported apart (kernels.unregistered_ptx_check), outside ptx_check and the verdict."""
    binary = binaries(reports("nccl", "v6-preview.69"))["nvidia/nccl/lib/libnccl.so.2"]
    kernels = binary["kernels"]
    assert kernels["ptx_check"] is None and kernels["state"] == "relocatable-ptx-only"
    other = kernels["unregistered_ptx_check"]
    assert other["sections"] == ["__nv_relfatbin"]
    assert [other["containers"][k] for k in ("ok", *REFUSED)] == [2, 85, 0, 25, 0]
    assert other["kernels"] == 42 and other["dropped_kernels"] == 32
    assert other["first_refusal"]["construct"].startswith("lexer:")  # the sink operand `_`


def test_trace_explain_names_a_dropped_kernel_of_a_real_binary(reports, tmp_path):
    """A trace whose cuModuleGetFunction answers NOT_FOUND for one of ctranslate2.dll's dropped kernels,
    with the scan report: the binary is checked again and the container that drops it named."""
    from cuda4amd.rules.ruleset import load_rules
    from cuda4amd.trace.explain import explain
    from cuda4amd.trace.read import open_trace

    doc = reports("ctranslate2", "v6-preview.69")
    dll = binaries(doc)["ctranslate2/ctranslate2.dll"]
    kernel = dll["kernels"]["ptx_check"]["dropped_kernels"][0]
    run = tmp_path / "zluda" / "app"
    run.mkdir(parents=True)
    (run / "log.txt").write_text("cuModuleLoadData(module: 0x10, image: 0x20) -> CUDA_SUCCESS\n"
                                 f'cuModuleGetFunction(hfunc: 0x0, hmod: 0x10, name: "{kernel}") '
                                 "-> CUDA_ERROR_NOT_FOUND\n")
    explained = explain(open_trace(tmp_path / "zluda"), release=load_rules().release("v6-preview.69"), scan=doc)
    [row] = explained["runs"][0]["kernels_not_found"]
    [found] = row["in_scan"]
    assert found["path"] == "ctranslate2/ctranslate2.dll" and found["container"]["fate"] == "dropped"
    assert found["container"]["outcome"] == "functions_dropped" and "@v6-preview.69" in found["container"]["source"]
    shown = row["demangled"] or kernel  # as a C++ programmer wrote it, where a demangler is at hand
    assert any(f"found no kernel {shown}" in a and "ctranslate2.dll drops it" in a
               for a in explained["runs"][0]["advice"])
