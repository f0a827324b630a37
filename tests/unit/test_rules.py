"""Tests of the rule files (rules/**) and their loader (cuda4amd.rules: ruleset, families, releases, ...).

The agreement tests compare the shipped TOML with the reference tables in
fixtures/reference (a copy of the workplace's reference data, with its
provenance in fixtures/reference/PROVENANCE.md).
"""
from __future__ import annotations

import csv
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda4amd import rules as rules_pkg
from cuda4amd.rules.families import Family
from cuda4amd.rules.releases import ZludaRelease, load_release
from cuda4amd.rules.ruleset import RuleSet, load_rules
from cuda4amd.rules.validate import RulesError, shipped_rules_dir

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "fixtures" / "reference"
SKIPPED_TSV_FAMILIES = {"driver_api_32bit", "cub_thrust_cucomplex"}
BORING_DETAILS = {
    "implemented",
    "unimplemented -> NOT_SUPPORTED",
    "unimplemented_fn -> NOT_SUPPORTED",
    "not_implemented -> NOT_SUPPORTED",
}


# ---------------------------------------------------------------------------
# fixtures and helpers
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules()


@pytest.fixture(scope="module")
def data() -> Path:
    if not (DATA / "nvidia-libraries.tsv").is_file():
        pytest.skip(f"shared reference data not found at {DATA} (fixtures/reference)")
    return DATA


def read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return [{k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(f, delimiter="\t")]


def data_tags(data: Path) -> list[str]:
    return sorted(p.name[len("zluda-"):-len("-functions.tsv")]
                  for p in (data / "zluda").glob("zluda-*-functions.tsv"))


TAGS = ["v5", "v6-preview.69", "v6", "v7-preview.9"]


def tsv_patterns(cell: str) -> list[str]:
    return re.findall(r"\^[^\s;]+", cell)


# ---------------------------------------------------------------------------
# shipped rules validate
# ---------------------------------------------------------------------------

def test_shipped_rules_validate(rules: RuleSet) -> None:
    # everything load_rules leaves for first use: name/symbol regexes, releases
    load_rules().validate()
    assert rules.families
    assert rules.default_release == "v6-preview.69"
    assert rules.release_tags == ("v5", "v6-preview.69", "v6", "v7-preview.9")
    for tag in rules.release_tags:
        rel = rules.release(tag)
        assert isinstance(rel, ZludaRelease)
        assert rel.tag == tag
        assert rel.provenance is not None and rel.provenance.sources
        assert rel.provenance.generated_by == "tools/convert_rules.py"
    names = {p.path.name for p in rules.provenance}
    assert {"families.toml", "system.toml", "releases.toml"} <= names
    for prov in rules.provenance:
        assert prov.generated_by and prov.sources


def test_every_shipped_toml_starts_with_provenance() -> None:
    root = shipped_rules_dir()
    files = sorted(root.rglob("*.toml"))
    assert len(files) >= 7
    for path in files:
        first_table = next(line for line in path.read_text(encoding="utf-8").splitlines()
                           if line.startswith("["))
        assert first_table == "[provenance]", path


def test_family_ids_and_routes(rules: RuleSet) -> None:
    ids = [f.id for f in rules.families]
    assert len(ids) == len(set(ids))
    routes = {f.id: f.default_route for f in rules.families}
    for fid in ("runtime_api", "nvrtc", "nvjitlink", "nvfatbin", "nvvm", "nvtx"):
        assert routes[fid] == "passthrough", fid
    for fid in ("rand", "solver", "solver_mg", "tensorrt", "nccl", "cupti", "nvjpeg", "npp",
                "video_decode", "video_encode", "optical_flow", "optix", "cutensor", "cudss",
                "cufile", "multi_node_math", "sparselt", "fftw", "nvblas",
                "driver_api", "blas", "blaslt", "sparse", "fft", "dnn", "nvml", "nvapi"):
        assert routes[fid] == "blocked", fid
    assert rules.family("dnn").zluda_libraries == ("dnn8", "dnn9")
    assert rules.family("driver_api").zluda_libraries == ("driver",)
    assert rules.family("tensorrt").advice.startswith("needs TensorRT")
    assert all(f.advice and f.name for f in rules.families)


def test_family_zluda_libraries_exist_in_releases(rules: RuleSet) -> None:
    all_libs = set()
    file_libs = set()
    for tag in rules.release_tags:
        rel = rules.release(tag)
        all_libs |= set(rel.functions)
        file_libs |= {f.library for f in rel.files if f.library}
    claimed = {lib for f in rules.families for lib in f.zluda_libraries}
    assert claimed <= all_libs
    # every function table a release file implements belongs to a family
    # (driver32 is the 32-bit nvcuda.dll, folded into driver_api by name)
    assert file_libs - claimed == {"driver32"}


def test_windows_patterns_are_case_insensitive_linux_not(rules: RuleSet) -> None:
    blas = rules.family("blas")
    assert all(p.flags & re.IGNORECASE for p in blas.windows)
    assert not any(p.flags & re.IGNORECASE for p in blas.linux)
    assert blas.matches("CUBLAS64_12.DLL", "windows")
    assert not blas.matches("libCUBLAS.so.12", "linux")


# ---------------------------------------------------------------------------
# agreement with the shared tables
# ---------------------------------------------------------------------------

def test_release_tags_agree(rules: RuleSet, data: Path) -> None:
    assert sorted(rules.release_tags) == data_tags(data)
    readme = (data / "README.md").read_text(encoding="utf-8")
    for tag in rules.release_tags:
        rel = rules.release(tag)
        m = re.search(re.escape(tag) + r" \(([0-9a-f]+), (\d{4}-\d{2}-\d{2})\)", readme)
        assert m, tag
        assert rel.commit.startswith(m.group(1)) and rel.date == m.group(2)
    assert rules.release("v6-preview.69").commit == "87531d399676772ae0b00dca01b52524951e21dc"


@pytest.mark.parametrize("tag", TAGS)
def test_functions_agree(rules: RuleSet, data: Path, tag: str) -> None:
    rel = rules.release(tag)
    rows = read_tsv(data / "zluda" / f"zluda-{tag}-functions.tsv")
    assert rows
    table: dict[str, set[str]] = {}
    for row in rows:
        lib, fn, status, detail = row["library"], row["function"], row["status"], row["detail"]
        assert rel.symbol_state(lib, fn) == status, (lib, fn)
        table.setdefault(lib, set()).add(fn)
        expected_detail = None if detail in BORING_DETAILS else detail
        assert rel.symbol_detail(lib, fn) == expected_detail, (lib, fn)
    # nothing more than the table: every other name is "missing"
    assert set(rel.functions) == set(table)
    for lib, names in table.items():
        assert set(rel.functions[lib]) == names, lib
        assert rel.symbol_state(lib, "cuda4amdNoSuchFunction") == "missing"
    assert rel.symbol_state("no_such_library", "cuInit") == "missing"


@pytest.mark.parametrize("tag", TAGS)
def test_files_agree(rules: RuleSet, data: Path, tag: str) -> None:
    rel = rules.release(tag)
    rows = read_tsv(data / "zluda" / f"zluda-{tag}-files.tsv")
    by_key = {(f.platform, f.path): f for f in rel.files}
    assert len(by_key) == len(rows) == len(rel.files)
    for row in rows:
        f = by_key.get((row["platform"], row["file"]))
        assert f is not None, row
        assert (f.replaces, f.backend, f.notes) == (row["replaces"], row["backend"], row["notes"])
        link = re.match(r"symlink -> (\S+)", row["notes"])
        assert f.link_to == (link.group(1) if link else None)
        if f.link_to:
            real = rel.resolve_link(f)
            assert real is not None and real.link_to is None


@pytest.mark.parametrize("tag", TAGS)
def test_redirects_agree(rules: RuleSet, data: Path, tag: str) -> None:
    rel = rules.release(tag)
    rows = [r for r in read_tsv(data / "zluda" / "zluda-redirect-names.tsv") if r["tag"] == tag]
    got = sorted((r.mechanism, r.bits, r.name) for r in rel.redirects)
    assert got == sorted((r["mechanism"], int(r["bits"]), r["name"]) for r in rows)
    for r in rows:
        platform = "linux" if r["mechanism"].startswith("LD_AUDIT") else "windows"
        assert rel.is_redirected(r["name"], platform, int(r["bits"]))


def test_family_rows_agree(rules: RuleSet, data: Path) -> None:
    rows = read_tsv(data / "nvidia-libraries.tsv")
    assert {r["family"] for r in rows} - SKIPPED_TSV_FAMILIES == {f.id for f in rules.families}
    for row in rows:
        fid = row["family"]
        if fid == "cub_thrust_cucomplex":
            continue
        fam = rules.family("driver_api" if fid == "driver_api_32bit" else fid)
        assert fam is not None, fid
        for p in tsv_patterns(row["windows_name_pattern"]):
            assert p in fam.windows_patterns, (fid, p)
        for p in tsv_patterns(row["linux_name_pattern"]):
            assert p in fam.linux_patterns, (fid, p)
        if fid != "driver_api_32bit":
            assert (fam.amd_equivalent, fam.zluda_status, fam.evidence, fam.cuda_versions) == (
                row["amd_equivalent"], row["zluda_status"], row["evidence"], row["cuda_versions"])


# expected family of each real NVIDIA DLL name, by name prefix (longest first)
EXPORT_PREFIXES = [
    ("cublasLt", "blaslt"), ("cublas", "blas"), ("cufftw", "fftw"), ("cufft", "fft"),
    ("cusolverMg", "solver_mg"), ("cusolver", "solver"), ("cusparseLt", "sparselt"),
    ("cusparse", "sparse"), ("cudart", "runtime_api"), ("cupti", "cupti"), ("checkpoint", "cupti"),
    ("nvperf_", "cupti"), ("pcsamplingutil", "cupti"), ("curand", "rand"), ("nvrtc", "nvrtc"),
    ("npp", "npp"), ("nvJitLink", "nvjitlink"), ("nvjpeg", "nvjpeg"), ("nvblas", "nvblas"),
    ("cudss", "cudss"), ("cutensor", "cutensor"),
]


def test_real_nvidia_dll_names_map_to_their_family(rules: RuleSet, data: Path) -> None:
    files = sorted((data / "nvidia-exports").glob("win_*__*.txt"))
    assert len(files) >= 70
    for path in files:
        dll = path.name.split("__", 1)[1][: -len(".txt")]
        expected = next((fam for prefix, fam in EXPORT_PREFIXES if dll.startswith(prefix)), None)
        assert expected is not None, f"add an expectation for {dll}"
        fam = rules.family_for(dll, "windows")
        assert fam is not None and fam.id == expected, (dll, fam and fam.id)
        # exactly one family claims it, and it is neither system nor unknown
        assert [f.id for f in rules.families if f.matches(dll, "windows")] == [expected], dll
        assert rules.system_kind(dll, "windows") is None
        assert not rules.is_unknown_cuda(dll, "windows")


# export lists that are not C APIs an app imports: nvrtc-builtins (internal
# entry points) and nvblas (the standard BLAS names, sgemm_ etc.)
NO_SYMBOL_PATTERN_CHECK = ("nvrtc-builtins", "nvblas")


def test_symbol_patterns_agree_with_real_exports(rules: RuleSet, data: Path) -> None:
    for path in sorted((data / "nvidia-exports").glob("win_*__*.txt")):
        dll = path.name.split("__", 1)[1][: -len(".txt")]
        expected = rules.family_for(dll, "windows").id
        # C names only: MSVC-mangled C++ internals (?...) are not imported by apps
        names = [n.strip() for n in path.read_text(encoding="utf-8").splitlines()
                 if n.strip() and not n.startswith("?")]
        claimed = 0
        for name in names:
            fam = rules.family_for_symbol(name)
            assert fam is None or fam.id == expected, (dll, name, fam and fam.id)
            claimed += fam is not None
        if not dll.startswith(NO_SYMBOL_PATTERN_CHECK):
            assert claimed >= 0.75 * len(names), (dll, claimed, len(names))


def test_symbol_patterns_claim_every_zluda_function(rules: RuleSet) -> None:
    owner = {lib: f.id for f in rules.families for lib in f.zluda_libraries}
    owner["driver32"] = "driver_api"
    for tag in rules.release_tags:
        for lib, table in rules.release(tag).functions.items():
            for fn in table:
                fam = rules.family_for_symbol(fn)
                assert fam is not None and fam.id == owner[lib], (tag, lib, fn)


def test_symbol_spot_checks(rules: RuleSet) -> None:
    for symbol, fid in [("cuInit", "driver_api"), ("cuMemAlloc_v2", "driver_api"), ("cudaMalloc", "runtime_api"),
                        ("__cudaRegisterFatBinary", "runtime_api"), ("cublasSgemm_v2", "blas"),
                        ("cublasLtMatmul", "blaslt"), ("cuFileDriverOpen", "cufile"), ("cudnnCreate", "dnn"),
                        ("cublasMpGemm", "multi_node_math"), ("nvrtcCompileProgram", "nvrtc")]:
        assert rules.family_for_symbol(symbol).id == fid, symbol
    assert rules.family_for_symbol("sgemm_") is None
    assert rules.family_for_symbol("malloc") is None
    assert rules.family("blas").symbol_pattern.match("cublasCreate_v2")
    assert rules.family("nvblas").symbol_pattern is None


def test_pins_agree(rules: RuleSet, data: Path) -> None:
    shipped = {(p.tag, p.platform, p.asset): p for p in rules.pins}
    for row in read_tsv(data / "zluda-releases.tsv"):
        complete = row["bytes"].isdigit() and re.fullmatch(r"[0-9A-Fa-f]{64}", row["sha256"])
        key = (row["tag"], row["platform"], row["asset"])
        if complete:
            pin = shipped[key]
            assert pin.size == int(row["bytes"]) and pin.sha256 == row["sha256"].lower()
        else:
            assert key not in shipped
    pin = rules.pin_for("v6-preview.69", "windows")
    assert pin is not None and pin.asset == "zluda-windows-87531d3.zip" and pin.size == 32_944_552
    assert pin.sha256 == "e2959ed17c8ddae6bf2bf76cf3a7348f577a2548754685d776389df2220e5d9a"


# ---------------------------------------------------------------------------
# spot checks
# ---------------------------------------------------------------------------

def test_spot_checks(rules: RuleSet) -> None:
    rel = rules.release("v6-preview.69")
    # cuBLAS 12: redirected; legacy name missing, _v2 implemented
    assert rules.family_for("cublas64_12.dll", "windows").id == "blas"
    row = rel.replacement_for("cublas64_12.dll", "windows")
    assert row is not None and row.library == "blas" and row.path == "cublas64_12.dll"
    assert rel.is_redirected("cublas64_12.dll", "windows")
    assert rel.symbol_state("blas", "cublasSgemm") == "missing"
    assert rel.symbol_state("blas", "cublasSgemm_v2") == "implemented"
    # cuSOLVER: a family ZLUDA does not replace -> blocked
    solver = rules.family_for("cusolver64_11.dll", "windows")
    assert solver.id == "solver" and solver.default_route == "blocked"
    assert rel.replacement_for("cusolver64_11.dll", "windows") is None
    # TensorRT
    assert rules.family_for("nvinfer_10.dll", "windows").id == "tensorrt"
    assert rules.family_for("libnvinfer_builder_resource.so.10.3.0", "linux").id == "tensorrt"
    # cuDNN 9 sub-library: dnn, but not replaced; the front DLLs are
    assert rules.family_for("cudnn_ops64_9.dll", "windows").id == "dnn"
    assert rel.replacement_for("cudnn_ops64_9.dll", "windows") is None
    assert rel.replacement_for("cudnn64_9.dll", "windows").library == "dnn9"
    assert rel.replacement_for("cudnn64_8.dll", "windows").library == "dnn8"
    # case: Windows names are case-insensitive, Linux names are not
    assert rules.family_for("CUBLAS64_12.DLL", "windows").id == "blas"
    assert rel.replacement_for("CUBLAS64_12.DLL", "windows") is not None
    assert rules.family_for("libCUBLAS.so.12", "linux") is None
    assert rel.replacement_for("libCUBLAS.so.12", "linux") is None
    # system and API sets
    assert rules.system_kind("api-ms-win-crt-runtime-l1-1-0.dll", "windows") == "api-set"
    assert rules.system_kind("KERNEL32.dll", "windows") == "system"
    # paths: the basename is what counts
    assert rules.family_for(r"C:\Apps\Tool\bin\cublasLt64_12.dll", "windows").id == "blaslt"
    assert rules.family_for("/opt/app/lib/libcudnn.so.9", "linux").id == "dnn"
    assert rules.system_kind(r"C:\Windows\System32\ntdll.dll", "windows") == "system"


def test_passthrough_families(rules: RuleSet) -> None:
    rel = rules.release(rules.default_release)
    for name, fid in [("cudart64_12.dll", "runtime_api"), ("nvrtc64_120_0.dll", "nvrtc"),
                      ("nvrtc-builtins64_129.dll", "nvrtc"), ("nvJitLink_120_0.dll", "nvjitlink"),
                      ("nvToolsExt64_1.dll", "nvtx")]:
        fam = rules.family_for(name, "windows")
        assert fam.id == fid and fam.default_route == "passthrough"
        assert rel.replacement_for(name, "windows") is None


def test_linux_symlink_rows(rules: RuleSet) -> None:
    rel = rules.release("v6-preview.69")
    row = rel.replacement_for("libcublas.so.12", "linux")
    assert row is not None and row.path == "libcublas.so.12" and row.link_to == "libcublas.so"
    assert row.library == "blas"
    assert rel.resolve_link(row).path == "libcublas.so"
    assert rel.replacement_for("/usr/lib/libcuda.so.1", "linux").library == "driver"
    assert rel.replacement_for("libcudnn.so.8", "linux").library == "dnn8"
    assert rel.replacement_for("libnvidia-ml.so.1", "linux").library == "nvml"


def test_only_top_level_runtime_files_are_replacements(rules: RuleSet) -> None:
    for tag in rules.release_tags:
        rel = rules.release(tag)
        for f in rel.files:
            got = rel.replacement_for(f.path, f.platform)
            if got is not None:
                assert "/" not in got.path and not got.replaces.startswith("none")
        assert rel.replacement_for("zluda.exe", "windows") is None
        assert rel.replacement_for("zluda_redirect.dll", "windows") is None
        assert rel.replacement_for("libzluda_ld.so", "linux") is None


def test_v5_windows_ships_no_versioned_cublas(rules: RuleSet) -> None:
    v5 = rules.release("v5")
    assert v5.replacement_for("cublas64_12.dll", "windows") is None
    assert v5.replacement_for("nvcuda.dll", "windows").library == "driver"
    assert v5.replacement_for("libcublas.so.12", "linux").library == "blas"
    assert "dnn8" not in v5.functions and v5.symbol_state("dnn8", "cudnnCreate") == "missing"


def test_system_kinds(rules: RuleSet) -> None:
    w = "windows"
    assert rules.system_kind("kernel32.dll", w) == "system"
    assert rules.system_kind("ext-ms-win-ntuser-window-l1-1-0.dll", w) == "api-set"
    assert rules.system_kind("API-MS-WIN-CORE-SYNCH-L1-2-0.DLL", w) == "api-set"
    assert rules.system_kind("vcruntime140_1.dll", w) == "redistributable"
    assert rules.system_kind("MSVCP140_ATOMIC_WAIT.dll", w) == "redistributable"
    assert rules.system_kind("vcomp140.dll", w) == "redistributable"
    assert rules.system_kind("python3.dll", w) == "host"
    assert rules.system_kind("python312.dll", w) == "host"
    assert rules.system_kind("nvcuda.dll", w) is None
    assert rules.system_kind("amdhip64_6.dll", w) is None
    assert rules.system_kind("libc.so.6", "linux") == "system"
    assert rules.system_kind("libstdc++.so.6", "linux") == "system"
    assert rules.system_kind("libpython3.11.so.1.0", "linux") == "host"
    assert rules.system_kind("LIBC.so.6", "linux") is None
    assert rules.system_kind("libc.so.6", w) is None
    assert len({n for g in rules.system if g.platform == w and g.kind == "system" for n in g.names}) >= 80


def test_no_family_matches_a_system_name(rules: RuleSet) -> None:
    for g in rules.system:
        for n in g.names:
            assert rules.family_for(n, g.platform) is None, n
            assert not rules.is_unknown_cuda(n, g.platform), n


def test_unknown_cuda_names(rules: RuleSet) -> None:
    for name in ("cublas64_14.dll", "cudnn_graph64_10.dll", "cudnn64_10.dll", "nvrtc64_140_0.dll",
                 "curand64_11.dll", "cupti64_14.dll", "nvinfer_11.dll", "nppc64_14.dll"):
        assert rules.family_for(name, "windows") is None, name
        assert rules.is_unknown_cuda(name, "windows"), name
    for name in ("libcublas.so.14", "libcudnn.so.10", "libnvrtc.so.14", "libcuda.so.2", "libnccl.so.3"):
        assert rules.is_unknown_cuda(name, "linux"), name
    for name, platform in [("libcurl.so.4", "linux"), ("libcups.so.2", "linux"), ("kernel32.dll", "windows"),
                           ("cublas64_12.dll", "windows"), ("libcublas.so.12", "linux"),
                           ("nvapi64.dll", "windows"), ("curl.dll", "windows")]:
        assert not rules.is_unknown_cuda(name, platform), name


def test_bad_platform_is_a_value_error(rules: RuleSet) -> None:
    with pytest.raises(ValueError):
        rules.family_for("cublas64_12.dll", "macos")
    with pytest.raises(ValueError):
        rules.system_kind("kernel32.dll", "Windows")


# ---------------------------------------------------------------------------
# lazy releases, per-instance cache, speed
# ---------------------------------------------------------------------------

def test_release_is_lazy_and_cached_per_ruleset(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda4amd.rules import ruleset

    calls: list[Path] = []
    real = ruleset.load_release

    def counting(path):
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(ruleset, "load_release", counting)
    a = load_rules()
    assert calls == []  # nothing parsed until asked
    rel = a.release("v6")
    assert a.release("v6") is rel and len(calls) == 1
    b = load_rules()
    assert b.release("v6") is not rel and len(calls) == 2  # no global cache


def test_unknown_release_tag_lists_known_tags(rules: RuleSet) -> None:
    with pytest.raises(RulesError) as e:
        rules.release("v99")
    assert "v99" in e.value.message and "v6-preview.69" in e.value.message


def test_load_rules_is_fast() -> None:
    best = min(_timed(load_rules) for _ in range(5))
    # budget is 20 ms on an idle machine (see docs/rules.md); generous here for busy CI machines
    assert best < 0.1, f"load_rules() took {best * 1000:.1f} ms"


def test_the_speed_figures_are_made_by_a_tool() -> None:
    """docs/rules.md "Speed" comes from tools/rules_speed.py: one run prints every step."""
    done = subprocess.run([sys.executable, str(REPO / "tools" / "rules_speed.py"), "--runs", "1"],
                          capture_output=True, text=True, check=True, timeout=120)
    steps = [line.strip().split("  ", 1)[1] for line in done.stdout.splitlines()]
    assert steps[:2] == ["import cuda4amd.rules", "load_rules()"]
    assert "release('v6'), first use" in steps and "later system_kind" in steps
    assert any(step.startswith("per look-up, the goldens' ") for step in steps)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# ---------------------------------------------------------------------------
# converter regenerates the shipped files byte for byte
# ---------------------------------------------------------------------------

def test_converter_is_reproducible(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "rules"
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "convert_rules.py"), "--data", str(data), "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    generated = sorted(p.relative_to(out) for p in out.rglob("*.toml"))
    shipped_dir = shipped_rules_dir()
    # the converter owns families.toml and zluda/; system.toml, frameworks/ and
    # gpus.toml are written by hand or by their own converters
    shipped = sorted(p.relative_to(shipped_dir) for p in shipped_dir.rglob("*.toml")
                     if p.name == "families.toml" or p.parent.name == "zluda")
    assert generated == shipped
    assert not (out / "system.toml").exists()  # hand-maintained, never generated
    for rel in generated:
        assert (out / rel).read_bytes() == (shipped_dir / rel).read_bytes(), (
            f"{rel} differs from a fresh conversion: run tools/convert_rules.py")
    # a second run changes nothing
    again = subprocess.run(
        [sys.executable, str(REPO / "tools" / "convert_rules.py"), "--data", str(data), "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert again.returncode == 0 and "up to date" in again.stdout


# ---------------------------------------------------------------------------
# validation: broken rule folders
# ---------------------------------------------------------------------------

PROV = '[provenance]\ngenerated_by = "test"\nsources = ["test"]\n'

FAMILY = """
[[family]]
id = "acme"
name = "ACME CUDA library"
windows = ['^acmecuda64_\\d+\\.dll$']
linux = ['^libacmecuda\\.so\\.\\d+$']
zluda_libraries = []
default_route = "blocked"
amd_equivalent = "none"
zluda_status = "not replaced"
advice = "needs ACME, which has no AMD route"
evidence = "test"
"""

RELEASE = """
[release]
tag = "v9"
commit = "0123456789abcdef"
date = "2030-01-01"

[[file]]
platform = "linux"
path = "libcuda.so.1"
replaces = "CUDA driver API"
backend = "HIP"
library = "driver"
link_to = "libnvcuda.so"

[[file]]
platform = "linux"
path = "libnvcuda.so"
replaces = "CUDA driver API"
backend = "HIP"
library = "driver"

[[file]]
platform = "windows"
path = "nvcuda.dll"
replaces = "CUDA driver API"
backend = "HIP"
library = "driver"

[functions.driver]
implemented = ["cuInit"]
stub = ["cuGetErrorName"]

[[redirect]]
mechanism = "zluda.exe"
platform = "windows"
bits = 64
name = "nvcuda.dll"
"""


def _write(folder: Path, rel: str, text: str) -> Path:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _expect_error(folder: Path, file: Path, *words: str, release: str | None = None) -> RulesError:
    with pytest.raises(RulesError) as e:
        r = load_rules([folder])
        if release:
            r.release(release)
    err = e.value
    assert err.path == file, (err.path, file)
    for w in words:
        assert w in err.message, (w, err.message)
    assert str(file) in str(err)
    return err


def test_valid_extra_folder_adds_rules(tmp_path: Path) -> None:
    _write(tmp_path, "families.toml", PROV + FAMILY + """
[[unknown]]
platform = "windows"
pattern = '^acme[a-z]+64_\\d+\\.dll$'
""")
    _write(tmp_path, "system.toml", PROV + """
[[group]]
platform = "windows"
kind = "system"
names = ["AcmeSys.dll"]
""")
    _write(tmp_path, "zluda/v9.toml", PROV + RELEASE)
    _write(tmp_path, "zluda/releases.toml", PROV + '[releases]\ndefault = "v9"\n')
    r = load_rules([tmp_path])
    assert r.family_for("ACMECUDA64_3.dll", "windows").id == "acme"
    assert r.family_for("cublas64_12.dll", "windows").id == "blas"  # shipped rules still there
    assert r.is_unknown_cuda("acmeblas64_1.dll", "windows")
    assert r.system_kind("acmesys.DLL", "windows") == "system"
    assert r.default_release == "v9" and "v9" in r.release_tags
    rel = r.release("v9")
    assert rel.replacement_for("libcuda.so.1", "linux").path == "libcuda.so.1"
    assert rel.symbol_state("driver", "cuInit") == "implemented"
    assert rel.symbol_state("driver", "cuGetErrorName") == "stub"
    assert rel.symbol_state("driver", "cuMemAlloc_v2") == "missing"
    assert rel.is_redirected("NVCUDA.DLL", "windows")


def test_extra_family_with_backreference_falls_back_to_separate_patterns(tmp_path: Path) -> None:
    _write(tmp_path, "families.toml", PROV + FAMILY.replace(
        "windows = ['^acmecuda64_\\d+\\.dll$']",
        "windows = ['^(?P<x>acme)cuda(?P=x)?64_\\d+\\.dll$', '^(a)\\1cme\\.dll$']"))
    r = load_rules([tmp_path])
    assert r.family_for("acmecuda64_1.dll", "windows").id == "acme"
    assert r.family_for("AAcme.dll", "windows").id == "acme"
    assert r.family_for("cublas64_12.dll", "windows").id == "blas"
    assert r.family_for("libcublas.so.12", "linux").id == "blas"


def test_missing_provenance(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", FAMILY)
    _expect_error(tmp_path, f, "provenance")


def test_provenance_without_sources(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", '[provenance]\ngenerated_by = "x"\nsources = []\n' + FAMILY)
    _expect_error(tmp_path, f, "sources")


def test_unknown_key(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + FAMILY.replace('evidence = "test"', 'evidance = "test"'))
    _expect_error(tmp_path, f, "acme", "unknown key 'evidance'")


def test_missing_key(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + FAMILY.replace('advice = "needs ACME, which has no AMD route"', ""))
    _expect_error(tmp_path, f, "missing key 'advice'")


def test_bad_symbol_pattern(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml",
               PROV + FAMILY.replace('evidence = "test"', "evidence = \"test\"\nsymbol_pattern = '^acme['"))
    _expect_error(tmp_path, f, "acme", "symbol_pattern", "bad regex")


def test_bad_regex(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + FAMILY.replace("'^libacmecuda\\.so\\.\\d+$'", "'^libacme(cuda\\.so'"))
    _expect_error(tmp_path, f, "acme", "bad regex", "libacme(cuda")


def test_unbalanced_regex_cannot_escape_its_group(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + FAMILY.replace("'^libacmecuda\\.so\\.\\d+$'", "'^a)|(b'"))
    _expect_error(tmp_path, f, "bad regex")


def test_unanchored_regex(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + FAMILY.replace("'^libacmecuda\\.so\\.\\d+$'", "'libacmecuda'"))
    _expect_error(tmp_path, f, "anchored")


def test_bad_route(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + FAMILY.replace('default_route = "blocked"', 'default_route = "maybe"'))
    _expect_error(tmp_path, f, "default_route", "maybe")


def test_duplicate_family_id_in_file(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + FAMILY + FAMILY)
    _expect_error(tmp_path, f, "duplicate family id 'acme'")


def test_duplicate_family_id_with_shipped(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + FAMILY.replace('id = "acme"', 'id = "blas"'))
    err = _expect_error(tmp_path, f, "duplicate family id 'blas'")
    assert "families.toml" in err.message


def test_invalid_toml(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + "[[family]\n")
    _expect_error(tmp_path, f, "not valid TOML")


def test_unknown_rules_file(tmp_path: Path) -> None:
    f = _write(tmp_path, "famlies.toml", PROV)
    _expect_error(tmp_path, f, "unknown rules file")


def test_missing_folder(tmp_path: Path) -> None:
    _expect_error(tmp_path / "nope", tmp_path / "nope", "does not exist")


def test_bad_system_kind(tmp_path: Path) -> None:
    f = _write(tmp_path, "system.toml", PROV + '[[group]]\nplatform = "windows"\nkind = "os"\nnames = ["a.dll"]\n')
    _expect_error(tmp_path, f, "kind", "os")


def test_system_name_with_conflicting_kind(tmp_path: Path) -> None:
    f = _write(tmp_path, "system.toml",
               PROV + '[[group]]\nplatform = "windows"\nkind = "host"\nnames = ["KERNEL32.dll"]\n')
    _expect_error(tmp_path, f, "kernel32.dll", "system")


def test_bad_platform_value(tmp_path: Path) -> None:
    f = _write(tmp_path, "families.toml", PROV + FAMILY + "\n[[unknown]]\nplatform = \"macos\"\npattern = '^x'\n")
    _expect_error(tmp_path, f, "platform", "macos")


def test_function_in_both_lists(tmp_path: Path) -> None:
    f = _write(tmp_path, "zluda/v9.toml", PROV + RELEASE.replace('stub = ["cuGetErrorName"]', 'stub = ["cuInit"]'))
    _expect_error(tmp_path, f, "cuInit", "both implemented and stub", release="v9")


def test_release_tag_must_match_file_name(tmp_path: Path) -> None:
    f = _write(tmp_path, "zluda/v10.toml", PROV + RELEASE)
    _expect_error(tmp_path, f, "v9", "v10.toml", release="v10")


def test_dangling_link(tmp_path: Path) -> None:
    f = _write(tmp_path, "zluda/v9.toml", PROV + RELEASE.replace('link_to = "libnvcuda.so"', 'link_to = "libnope.so"'))
    _expect_error(tmp_path, f, "libnope.so", release="v9")


def test_file_library_without_table(tmp_path: Path) -> None:
    f = _write(tmp_path, "zluda/v9.toml", PROV + RELEASE.replace('library = "driver"\n\n[[file]]\nplatform = "windows"',
                                                                 'library = "blas"\n\n[[file]]\nplatform = "windows"'))
    _expect_error(tmp_path, f, "blas", release="v9")


def test_release_missing_provenance(tmp_path: Path) -> None:
    f = _write(tmp_path, "zluda/v9.toml", RELEASE)
    _expect_error(tmp_path, f, "provenance", release="v9")


def test_duplicate_release_tag_with_shipped(tmp_path: Path) -> None:
    f = _write(tmp_path, "zluda/v6.toml", PROV + RELEASE.replace('tag = "v9"', 'tag = "v6"'))
    _expect_error(tmp_path, f, "v6", "already defined")


def test_incomplete_pin(tmp_path: Path) -> None:
    f = _write(tmp_path, "zluda/releases.toml", PROV + """
[[pin]]
flavour = "upstream"
tag = "v6-preview.65"
platform = "windows"
asset = "zluda-windows-5c75a54.zip"
bytes = 32880554
sha256 = "4a8d04f5"
""")
    _expect_error(tmp_path, f, "sha256")


def test_default_release_must_exist(tmp_path: Path) -> None:
    f = _write(tmp_path, "zluda/releases.toml", PROV + '[releases]\ndefault = "v42"\n')
    _expect_error(tmp_path, f, "v42", "v6-preview.69")


def test_load_release_directly(tmp_path: Path) -> None:
    f = _write(tmp_path, "v9.toml", PROV + RELEASE)
    rel = load_release(f)
    assert rel.tag == "v9" and rel.provenance.generated_by == "test"


def test_rules_error_is_picklable() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(RulesError("a/b.toml", "boom")))
    assert err.path == Path("a/b.toml") and err.message == "boom"


def test_public_api() -> None:
    for name in ("load_rules", "RuleSet", "Family", "ZludaFile", "ZludaRelease", "RulesError", "Pin"):
        assert hasattr(rules_pkg, name)
    assert Family.__dataclass_params__.frozen and RuleSet.__dataclass_params__.frozen
