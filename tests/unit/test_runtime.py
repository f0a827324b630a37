"""Run-time rules: names assembled from stems (rules/runtime/names.toml), code
generators (rules/runtime/generators.toml), binaries with no visible CUDA loader.

The binaries are built here with gcc / mingw-w64 from a few lines of C, the
way real loaders keep their pieces: TSL's table of stems plus ".so.",
PyTorch's "libnvrtc.so." prefix, cuDNN 9's "%s.%d" templates.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuda4amd.rules.runtime import (
    family_stems,
    generators_for,
    literal_prefixes,
    load_generators,
    load_name_rules,
    name_heads,
)
from cuda4amd.rules.validate import RulesError
from cuda4amd.scan.read.byname import NamePatterns, find_library_names
from cuda4amd.scan.read.engine import read_path

GCC = shutil.which("gcc")
MINGW = shutil.which("x86_64-w64-mingw32-gcc")


def build(tmp_path: Path, source: str, name: str, compiler: str | None = GCC, libs: tuple[str, ...] = ()) -> Path:
    if compiler is None:
        pytest.skip("compiler not installed")
    src = tmp_path / (name + ".c")
    src.write_text(source)
    out = tmp_path / name
    subprocess.run([compiler, "-O0", "-shared", "-fPIC" if compiler == GCC else "-s", "-o", str(out), str(src), *libs],
                   check=True, capture_output=True)
    return out


def refs(path: Path, rules, nvidia: bool = False) -> set[tuple[str, str]]:
    data = path.read_bytes()
    return {(r.name, r.encoding) for r in find_library_names(data, read_path(path), rules, NamePatterns(rules), nvidia)}


TSL = r"""
#include <dlfcn.h>
#include <string.h>
/* the shape of xla/tsl/platform/default/dso_loader.cc + load_library.cc */
const char *const stems[] = {"cudart", "cublas", "cufft", "cudnn", "nccl"};
const char *const pieces[] = {"lib", ".so."};
void *load(int i, const char *version) {
    char name[256];
    strcpy(name, pieces[0]); strcat(name, stems[i]); strcat(name, pieces[1]); strcat(name, version);
    return dlopen(name, RTLD_NOW);
}
"""

NO_LOADER = TSL.replace("return dlopen(name, RTLD_NOW);", "return (void *)strlen(name);")

TORCH_NVRTC = r"""
#include <string.h>
/* aten/src/ATen/cuda/detail/LazyNVRTC.cpp getLibName(): std::string("libnvrtc.so.") + version */
const char *const prefix = "libnvrtc.so.";
unsigned long name_length(const char *version) { return strlen(prefix) + strlen(version); }
"""

CUDNN9 = r"""
#include <dlfcn.h>
#include <stdio.h>
/* what libcudnn.so.9 holds: "%s.%d.%d.%d\0%s.%d.%d\0%s.%d\0libcudnn_graph.so" */
const char *const formats[] = {"%s.%d.%d.%d", "%s.%d.%d", "%s.%d"};
const char *const base = "libcudnn_graph.so";
void *load(int major) {
    char name[256];
    snprintf(name, sizeof name, formats[2], base, major);
    return dlopen(name, RTLD_NOW);
}
"""

WINDOWS = r"""
#include <windows.h>
/* TF's Windows FormatLibraryFileName: name + version + ".dll"; wide strings for LoadLibraryW */
const wchar_t *const stem = L"cufft64_";
const wchar_t *const tail = L".dll";
const char *const nvrtc = "nvrtc64_";
HMODULE load(const wchar_t *version) {
    wchar_t name[256];
    lstrcpyW(name, stem); lstrcatW(name, version); lstrcatW(name, tail);
    return LoadLibraryW(name);
}
"""


WINDOWS_PIECES = r"""
#include <windows.h>
#include <string.h>
/* "cublas" + "64_" + "11" + ".dll", each piece its own string */
const char *const pieces[] = {"cublas", "curand", "64_", "11", ".dll"};
HMODULE load(int i) {
    char name[64];
    strcpy(name, pieces[i]); strcat(name, pieces[2]); strcat(name, pieces[3]); strcat(name, pieces[4]);
    return LoadLibraryA(name);
}
"""


def test_windows_pieces(tmp_path, rules):
    found = refs(build(tmp_path, WINDOWS_PIECES, "pieces.dll", MINGW), rules)
    assert {("cublas64_{version}.dll", "assembled"), ("curand64_{version}.dll", "assembled")} <= found


def test_tsl_style_stems_give_templates(tmp_path, rules):
    found = refs(build(tmp_path, TSL, "libloader.so"), rules)
    assembled = {name for name, encoding in found if encoding == "assembled"}
    assert {"libcudart.so.{version}", "libcublas.so.{version}", "libcufft.so.{version}",
            "libcudnn.so.{version}", "libnccl.so.{version}"} <= assembled


def test_bare_stems_count_only_in_a_binary_that_loads_libraries(tmp_path, rules):
    found = refs(build(tmp_path, NO_LOADER, "libnoloader.so"), rules)
    assert not {name for name, encoding in found if encoding == "assembled"}


def test_a_name_prefix_is_enough_on_its_own(tmp_path, rules):
    # no dlopen import here (PyTorch calls it from another library): the head ends in ".so."
    found = refs(build(tmp_path, TORCH_NVRTC, "libtorch_like.so"), rules)
    assert ("libnvrtc.so.{version}", "assembled") in found


def test_cudnn9_version_templates_version_the_base_names(tmp_path, rules):
    path = build(tmp_path, CUDNN9, "libcudnn_front.so")
    for nvidia in (False, True):  # also as an NVIDIA library (no stem search)
        found = refs(path, rules, nvidia)
        assert ("libcudnn_graph.so.{version}", "assembled") in found
        assert ("libcudnn_graph.so", "ascii") not in found  # replaced by the versioned file


def test_windows_wide_and_ascii_heads(tmp_path, rules):
    found = refs(build(tmp_path, WINDOWS, "loader.dll", MINGW), rules)
    assert ("cufft64_{version}.dll", "assembled") in found
    assert ("nvrtc64_{version}_0.dll", "assembled") in found


def test_expansions_of_assembled_names(rules):
    from cuda4amd.scan.read.byname import expand_template

    assert "libnccl.so.2" in expand_template("libnccl.so.{version}", rules, "linux")
    assert "cufft64_11.dll" in expand_template("cufft64_{version}.dll", rules, "windows")
    assert expand_template("nvrtc64_{version}_0.dll", rules, "windows")[-1] == "nvrtc64_130_0.dll"


# ---------------------------------------------------------------------------
# the rules themselves
# ---------------------------------------------------------------------------

def test_literal_prefixes():
    assert literal_prefixes(r"^libcublas\.so\.(10(\.0)?|11|12|13)$") == [
        "libcublas.so.10", "libcublas.so.10.0", "libcublas.so.11", "libcublas.so.12", "libcublas.so.13"]
    assert literal_prefixes(r"^libnvrtc(\.alt)?\.so\.(12|13)$") == [
        "libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.alt.so.12", "libnvrtc.alt.so.13"]
    assert literal_prefixes(r"^lib(cufftMp\.so\.1[12]|nvshmem_host\.so\.3)$") == [
        "libcufftMp.so.1", "libnvshmem_host.so.3"]
    assert literal_prefixes(r"^cupti64_\d+\.dll$") == ["cupti64_"]


def test_stems_come_from_the_family_table(rules):
    names = load_name_rules()
    linux = next(t for t in names.templates if t.name == "lib{stem}.so.{version}")
    stems = family_stems(rules, linux)
    assert stems["cublas"] == "blas" and stems["cublasLt"] == "blaslt" and stems["cuda"] == "driver_api"
    assert stems["cudnn_graph"] == "dnn" and stems["nvrtc"] == "nvrtc" and stems["nvshmem_host"] == "multi_node_math"
    windows = next(t for t in names.templates if t.name == "{stem}64_{version}.dll")
    assert family_stems(rules, windows)["cusolver"] == "solver"
    heads = name_heads(names, rules, "linux")
    assert heads["cublas"][1] is False and heads["libcublas.so."][1] is True
    assert "libcublas.so.{version}" in heads["cublas"][0]
    assert "dlopen" in names.loader_functions and "LoadLibraryExW" in names.loader_functions


def write(folder: Path, name: str, text: str) -> Path:
    (folder / "runtime").mkdir(exist_ok=True)
    path = folder / "runtime" / name
    path.write_text("[provenance]\ngenerated_by = 'hand'\nsources = ['test']\n" + text)
    return folder


@pytest.mark.parametrize("body, message", [
    ("[loaders]\nfunctions = ['dlopen']\nsource = 'x'\n"
     "[[template]]\nplatform = 'mac'\nname = 'lib{stem}.so'\nsource = 'x'\n",
     "platform must be one of"),
    ("[loaders]\nfunctions = ['dlopen']\nsource = 'x'\n"
     "[[template]]\nplatform = 'linux'\nname = 'libfoo.so'\nsource = 'x'\n",
     "must hold {stem} once"),
    ("[[template]]\nplatform = 'linux'\nname = 'lib{stem}.so'\nsource = 'x'\n", "missing"),
    ("[loaders]\nfunctions = ['dlopen']\nsource = 'x'\n[[templat]]\n", "unknown top-level key"),
])
def test_name_rules_are_validated(tmp_path, body, message):
    with pytest.raises(RulesError, match=message):
        load_name_rules(write(tmp_path, "names.toml", body))


def test_generators():
    generators = load_generators()
    ids = {g.id: g for g in generators}
    assert ids["xla"].emits == "sass" and ids["xla"].needed == "always" and ids["xla"].zluda
    assert ids["taichi"].emits == "ptx"
    assert [s.setting for s in ids["cupy_nvrtc"].ptx_switches] == ["CUPY_COMPILE_WITH_PTX=1"]
    assert [g.id for g in generators_for("jax-cuda13-pjrt", generators)] == ["xla"]
    assert [g.id for g in generators_for("cupy-cuda12x", generators)] == ["cupy_nvrtc"]
    # names shared with CPU builds count only where the package holds CUDA binaries
    assert generators_for("torch", generators, has_cuda=False) == ()
    assert [g.id for g in generators_for("torch", generators, has_cuda=True)] == ["inductor"]
    assert all(g.sources for g in generators)


def test_generator_rules_are_validated(tmp_path):
    body = ("[[generator]]\nid = 'x'\nname = 'X'\ndistributions = ['x']\nemits = 'cubin'\nneeded = 'always'\n"
            "how = 'h'\n")
    with pytest.raises(RulesError, match="emits must be one of"):
        load_generators(write(tmp_path, "generators.toml", body))


def test_package_verdicts_from_generators(rules):
    from cuda4amd.model import BinaryInfo, ScannedBinary
    from cuda4amd.scan.classify import NOT_CUDA
    from cuda4amd.scan.distributions import Distribution
    from cuda4amd.scan.packages import package_verdicts
    from cuda4amd.scan.verdict import BinaryVerdict

    def module(distribution: str, path: str, verdict: str) -> BinaryVerdict:
        binary = ScannedBinary(path, BinaryInfo("ELF", "x86_64", 64, "shared-library"), distribution=distribution)
        judged = BinaryVerdict(binary, NOT_CUDA, [])
        judged.worsen(verdict)
        return judged

    dists = [Distribution(n, "1.0", f"{n}-1.0.dist-info", frozenset()) for n in
             ("cupy-cuda12x", "jax-cuda12-pjrt", "numba-cuda", "taichi", "torch")]
    verdicts = [
        module("cupy-cuda12x", "cupy/_core/core.cpython-312-x86_64-linux-gnu.so", "ready"),
        module("jax-cuda12-pjrt", "jax_plugins/xla_cuda12/xla_cuda_plugin.so", "ready"),
        module("taichi", "taichi/_lib/core/taichi_python.cpython-312-x86_64-linux-gnu.so", "ready"),
        module("torch", "torch/_C.cpython-312-x86_64-linux-gnu.so", "no-cuda"),  # a CPU build
    ]
    result = {p.name: p for p in package_verdicts(verdicts, dists, (), rules, rules.release(rules.default_release))}
    cupy = result["cupy-cuda12x"]
    assert cupy.verdict == "partial"  # its module is ready, its NVRTC kernels are SASS unless a switch is set
    assert any("CUPY_COMPILE_WITH_PTX=1" in a for a in cupy.advice)
    # the counts say what is on disk; the summary says why that is not the verdict
    assert cupy.counts == {"basis": "extension-modules", "ready": 1, "degraded": 0, "blocked": 0}
    assert cupy.summary == ("its CUDA extension module is ready; run-time code generator: CuPy kernels (NVRTC) "
                            "(emits SASS, which ZLUDA cannot run)")
    assert result["jax-cuda12-pjrt"].verdict == "blocked"
    assert result["jax-cuda12-pjrt"].reasons[0].startswith("XLA GPU compiler")
    assert result["jax-cuda12-pjrt"].summary.endswith("run-time code generator: XLA GPU compiler (JAX, TensorFlow) "
                                                      "(emits SASS, which ZLUDA cannot run)")
    numba = result["numba-cuda"]  # pure Python, no binary: a package verdict all the same
    assert numba.verdict == "blocked" and numba.summary.startswith("no CUDA binary of it; ")
    assert result["taichi"].verdict == "ready" and result["taichi"].generators[0]["emits"] == "ptx"
    assert result["taichi"].summary == "its CUDA extension module is ready"  # a PTX generator changes nothing
    assert result["torch"].verdict == "no-cuda" and result["torch"].generators == []  # a CPU build


def test_assembled_names_resolve_in_the_tree(tmp_path, scan):
    tree = tmp_path / "tree"
    tree.mkdir()
    build(tree, TSL, "libloader.so")
    build(tree, "int cublasCreate_v2(void **h) { return 0; }\n", "libcublas.so.12")
    for source in tree.glob("*.c"):
        source.unlink()
    report = scan(tree, host="none")
    loader = next(b for b in report["binaries"] if b["path"] == "libloader.so")
    dep = next(d for d in loader["dependencies"] if d["name"] == "libcublas.so.{version}")
    assert (dep["load"], dep["resolved"], dep["family"]) == ("by-name", "libcublas.so.12", "blas")


def test_importers_of_a_binary_with_no_visible_loader_are_degraded_through_it(tmp_path, scan):
    # libuser.so calls cuInit but neither imports nor names a CUDA library; libapp.so imports libuser.so
    tree = tmp_path / "tree"
    tree.mkdir()
    build(tree, "int cuInit(unsigned flags);\nint start(void) { return cuInit(0); }\n", "libuser.so")
    build(tree, "int start(void);\nint run(void) { return start(); }\n", "libapp.so",
          libs=(f"-L{tree}", "-luser", "-Wl,-rpath,$ORIGIN"))
    for source in tree.glob("*.c"):
        source.unlink()
    report = scan(tree, host="none")
    binaries = {b["path"]: b for b in report["binaries"]}
    user, app = binaries["libuser.so"], binaries["libapp.so"]
    assert (user["verdict"], user["reasons"]) == (
        "degraded", ["calls CUDA functions but no CUDA loader seen: names may be built at run time"])
    # judged before verdicts flow: what imports it is degraded through it, like any importer of a degraded library
    assert app["verdict"] == "degraded"
    assert app["reasons"] == ["loads libuser.so (static), which is degraded: "
                              "calls CUDA functions but no CUDA loader seen: names may be built at run time"]


def test_routes_trust_the_readers_answer_and_work_it_out_without_one(tmp_path):
    """A binary's calls_cuda comes from its reader (and the facts cache); without one, routes.unseen_loaders
    works it out from the symbols, to the same result."""
    import dataclasses

    from cuda4amd.scan.pipeline import ScanOptions, run_scan
    from cuda4amd.scan.routes import NO_LOADER_API, unseen_loaders

    tree = tmp_path / "tree"
    tree.mkdir()
    build(tree, "int cuInit(unsigned flags);\nint start(void) { return cuInit(0); }\n", "libuser.so")
    build(tree, "int puts(const char *s);\nint hello(void) { return puts(\"hi\"); }\n", "libplain.so")
    result = run_scan(ScanOptions(target=str(tree), host="none", jobs=1, cache=False))
    answers = {b.path: b.calls_cuda for b in result.binaries}
    assert answers == {"libuser.so": True, "libplain.so": False}
    dependencies = [d for v in result.verdicts for d in v.dependencies]
    identities = {v.binary.path: v.identity for v in result.verdicts}
    given = unseen_loaders(result.binaries, dependencies, identities, result.rules)
    assert given == {"libuser.so": NO_LOADER_API}
    unanswered = [dataclasses.replace(b, calls_cuda=None) for b in result.binaries]
    assert unseen_loaders(unanswered, dependencies, identities, result.rules) == given
    told_otherwise = [dataclasses.replace(b, calls_cuda=False) for b in result.binaries]
    assert unseen_loaders(told_otherwise, dependencies, identities, result.rules) == {}


def test_an_extra_rules_folder_adds_to_the_run_time_rules(tmp_path, rules):
    from cuda4amd.rules import load_rules

    write(tmp_path, "names.toml", "[loaders]\nfunctions = ['my_dlopen']\nsource = 'x'\n"
                                  "[[fragment]]\nplatform = 'linux'\nstrings = ['.so.%u']\nsource = 'x'\n")
    write(tmp_path, "generators.toml", "[[generator]]\nid = 'mine'\nname = 'Mine'\ndistributions = ['my-gpu-pkg']\n"
                                       "emits = 'sass'\nneeded = 'optional'\nhow = 'h'\n"
                                       "[[generator]]\nid = 'taichi'\nname = 'Taichi'\ndistributions = ['taichi']\n"
                                       "emits = 'sass'\nneeded = 'always'\nhow = 'h'\n")
    extended = load_rules([tmp_path])
    assert {"my_dlopen", "dlopen"} <= extended.names.loader_functions
    assert ".so.%u" in extended.names.fragments["linux"] and ".so." in extended.names.fragments["linux"]
    assert len(extended.names.templates) == len(rules.names.templates)  # the shipped ones stay
    ids = {g.id: g for g in extended.generators}
    assert [g.id for g in generators_for("my-gpu-pkg", extended.generators)] == ["mine"]
    assert ids["taichi"].emits == "sass" and "xla" in ids  # a later folder's id replaces the shipped one


def test_an_extra_rules_folder_s_run_time_errors_show_at_load(tmp_path):
    from cuda4amd.rules import load_rules

    write(tmp_path, "generators.toml", "[[generator]]\nid = 'x'\nname = 'X'\ndistributions = ['x']\n"
                                       "emits = 'cubin'\nneeded = 'always'\nhow = 'h'\n")
    with pytest.raises(RulesError, match="emits must be one of"):
        load_rules([tmp_path])
    (tmp_path / "runtime" / "generators.toml").unlink()
    write(tmp_path, "name.toml", "")
    with pytest.raises(RulesError, match="unknown rules file"):
        load_rules([tmp_path])


CUPTI_LOADER = r"""
#include <dlfcn.h>
#include <string.h>
/* TSL's GetDsoHandle("cupti", version) in JAX's plugin: "lib" + stem + ".so." + version */
const char *const stems[] = {"cupti", "cublas"};
const char *const pieces[] = {"lib", ".so."};
void *load(int i, const char *version) {
    char name[256];
    strcpy(name, pieces[0]); strcat(name, stems[i]); strcat(name, pieces[1]); strcat(name, version);
    return dlopen(name, RTLD_NOW);
}
"""


def test_jax_s_assembled_names_find_the_nvidia_folders_it_preloads(tmp_path, scan):
    # the GPU truth run's JAX finding in miniature: the plugin's libcupti.so.{version} went to another
    # distribution's folder (Triton's CUPTI) while JAX really mapped nvidia/cu13/lib/libcupti.so.13
    from test_packages import install

    fixtures = Path(__file__).resolve().parents[2] / "fixtures"
    site = tmp_path / "site-packages"
    plugin = build(tmp_path, CUPTI_LOADER, "_mosaic_gpu_ext.so")
    cupti = fixtures / "kernels" / "elf" / "libaxpy_ptx86.so"  # an nvcc-built library standing for CUPTI
    install(site, "jax-cuda13-plugin", "0.11.2", {"jax_cuda13_plugin/_mosaic_gpu_ext.so": plugin})
    install(site, "triton", "3.6.0", {"triton/backends/nvidia/lib/cupti/libcupti.so.12": cupti})
    install(site, "nvidia-cuda-cupti", "13.0.85", {"nvidia/cu13/lib/libcupti.so.13": cupti})
    binary = next(b for b in scan(site)["binaries"] if b["path"] == "jax_cuda13_plugin/_mosaic_gpu_ext.so")
    dep = next(d for d in binary["dependencies"] if d["name"] == "libcupti.so.{version}")
    assert (dep["how"], dep["resolved"]) == ("framework-folder", "nvidia/cu13/lib/libcupti.so.13")
    assert dep["via"] == "framework rule jax: adds nvidia/*/lib"


def test_the_facts_cache_key_covers_the_run_time_name_rules(tmp_path, rules):
    # by-name facts depend on how loaders assemble names: another names.toml must not reuse old records
    from cuda4amd.rules import load_rules
    from cuda4amd.scan.read.cache import scan_context
    from cuda4amd.scan.read.payload import PayloadInspector

    write(tmp_path, "names.toml", "[[fragment]]\nplatform = 'linux'\nstrings = ['.so.%u']\nsource = 'x'\n")
    extended = load_rules([tmp_path])
    shipped = PayloadInspector(rules, rules.release(rules.default_release))
    more = PayloadInspector(extended, extended.release(extended.default_release))
    assert scan_context("fast", shipped) == scan_context("fast", PayloadInspector(rules, shipped.release))
    assert scan_context("fast", shipped) != scan_context("fast", more)
