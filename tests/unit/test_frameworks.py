from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from cuda4amd.rules.frameworks import (
    SASS_ONLY,
    Framework,
    advice_for,
    framework_for,
    load_frameworks,
)
from cuda4amd.rules.validate import RulesError, shipped_rules_dir

SHIPPED = shipped_rules_dir() / "frameworks"
EXPECTED = {"bitsandbytes", "ctranslate2", "cuda_python", "cupy", "jax", "llama_cpp_python", "onnxruntime",
            "paddlepaddle", "tensorflow", "torch", "triton", "xformers"}


@pytest.fixture(scope="module")
def frameworks(rules):
    return load_frameworks(rules=rules)


def fw(frameworks, fid: str) -> Framework:
    return next(f for f in frameworks if f.id == fid)


# ---------------------------------------------------------------------------
# the shipped files
# ---------------------------------------------------------------------------

def test_all_shipped_framework_files_validate(frameworks):
    assert {f.id for f in frameworks} == EXPECTED
    assert sorted(p.stem for p in SHIPPED.glob("*.toml")) == sorted(EXPECTED)
    for f in frameworks:
        assert f.provenance.sources, f.id
        assert f.distributions, f.id
        assert f.source is not None and f.source.stem == f.id


def test_default_folder_is_the_shipped_one(frameworks, rules):
    assert load_frameworks(rules=rules) == frameworks
    assert rules.frameworks == frameworks  # what the scan uses: every rules folder's, shipped only here


def test_every_cited_family_exists(frameworks, rules):
    ids = {fam.id for fam in rules.families}
    for f in frameworks:
        for load in f.loads:
            assert load.family in ids, (f.id, load.family)
        for sw in f.switches:
            assert set(sw.avoids) <= ids | {SASS_ONLY}, (f.id, sw.avoids)
        for alt in f.instead:
            assert alt.when in ids | {SASS_ONLY}, (f.id, alt.when)
        assert {fid for fid, _ in f.family_names} <= ids


def test_concrete_names_match_their_family_patterns(frameworks, rules):
    """Every example file name (not a glob) is recognised by the family it is filed under."""
    for f in frameworks:
        for load in f.loads:
            for name in load.names:
                if re.search(r"[*?\[<]", name):
                    continue
                platform = "windows" if name.lower().endswith(".dll") else "linux"
                family = rules.family_for(name, platform)
                assert family is not None and family.id == load.family, (f.id, name, load.family)


def test_shipped_values_are_well_formed(frameworks):
    for f in frameworks:
        for load in f.loads:
            assert re.match(r"^(always|optional|feature: \S)", load.when)
            assert load.confidence in ("verified", "unverified")
        for sw in f.switches:
            assert sw.kind in ("env", "python", "config")


def test_framework_for_normalises_names(frameworks):
    assert framework_for("Torch", frameworks).id == "torch"
    assert framework_for("cupy_cuda12x", frameworks).id == "cupy"
    assert framework_for("CuPy-CUDA11x", frameworks).id == "cupy"
    assert framework_for("cupy-cuda102", frameworks).id == "cupy"  # glob cupy-cuda*
    assert framework_for("onnxruntime_gpu", frameworks).id == "onnxruntime"
    assert framework_for("paddlepaddle-gpu", frameworks).id == "paddlepaddle"
    assert framework_for("llama_cpp_python", frameworks).id == "llama_cpp_python"
    assert framework_for("Llama.CPP.Python", frameworks).id == "llama_cpp_python"
    assert framework_for("cuda-bindings", frameworks).id == "cuda_python"
    assert framework_for("cuda_pathfinder", frameworks).id == "cuda_python"
    assert framework_for("triton-windows", frameworks).id == "triton"
    assert framework_for("numpy", frameworks) is None
    assert framework_for("cupy-rocm-5-0", frameworks) is None
    assert framework_for("torchvision", frameworks) is None


def test_torch_advice_for_blocked_dnn_blaslt_and_sass_only(frameworks):
    lines = advice_for(fw(frameworks, "torch"), {"dnn", "blaslt"}, "sass-only")
    assert "set DISABLE_ADDMM_CUDA_LT=1 so PyTorch avoids cuBLASLt" in lines
    assert "PyTorch: run `torch.backends.cudnn.enabled = False` before the work starts, so it avoids cuDNN" in lines
    assert any("enable_flash_sdp(False)" in line and "enable_math_sdp(True)" in line for line in lines)
    assert any("cu118" in line and "PTX" in line for line in lines)
    assert any("MIOpen" in line for line in lines)
    # nothing about families that are fine
    assert not any("gloo" in line for line in lines)
    assert len(lines) == len(set(lines))
    # switches come before [[instead]] lines
    assert lines.index("set DISABLE_ADDMM_CUDA_LT=1 so PyTorch avoids cuBLASLt") < \
        next(i for i, line in enumerate(lines) if "cu118" in line)


def test_torch_advice_depends_on_what_is_blocked(frameworks):
    torch = fw(frameworks, "torch")
    assert advice_for(torch, set(), None) == []
    assert advice_for(torch, set(), "ptx-available") == []
    only_lt = advice_for(torch, {"blaslt"}, None)
    assert only_lt and all("cuBLASLt" in line for line in only_lt)
    sass = advice_for(torch, set(), "sass-only")
    assert any("cu118" in line for line in sass)
    assert not any("cuDNN" in line for line in sass)
    assert any("gloo" in line for line in advice_for(torch, {"nccl"}, None))


def test_onnxruntime_advice_for_blocked_tensorrt(frameworks):
    lines = advice_for(fw(frameworks, "onnxruntime"), {"tensorrt"}, None)
    assert lines[0].startswith("ONNX Runtime: create sessions with providers=")
    assert '"TensorrtExecutionProvider"' in lines[0]
    # the replacement for each platform, once (the same line for TensorRT, cuDNN and SASS-only kernels)
    assert sum("onnxruntime-directml" in line and line.endswith("[Windows only]") for line in lines) == 1
    assert sum("MIGraphXExecutionProvider" in line and line.endswith("[Linux only]") for line in lines) == 1
    assert not any("DmlExecutionProvider\"]" in line and "cuDNN" in line for line in lines)


def test_recommended_switches_are_always_given(frameworks):
    cupy = advice_for(fw(frameworks, "cupy"), set(), None)
    assert cupy == [next(s for s in fw(frameworks, "cupy").switches if s.recommended).advice]
    assert any("TORCHDYNAMO_DISABLE=1" in line for line in advice_for(fw(frameworks, "triton"), set(), None))


def test_platform_and_unverified_marks(frameworks):
    lines = advice_for(fw(frameworks, "llama_cpp_python"), set(), "sass-only")
    assert any(line.endswith("(unverified)") for line in lines)
    torch_lines = advice_for(fw(frameworks, "torch"), set(), "sass-only")
    assert any(line.endswith("[Linux only]") for line in torch_lines)


def test_generated_lines_for_each_kind(tmp_path, rules):
    write(tmp_path, "demo", """
        [[switch]]
        avoids = ['fft', 'rand']
        kind = 'config'
        setting = 'use_fft = false'

        [[switch]]
        avoids = ['fft']
        kind = 'env'
        setting = 'DEMO_NO_FFT=1'
        platform = 'windows'
        confidence = 'unverified'
    """)
    (demo,) = load_frameworks(tmp_path, rules=rules)
    assert advice_for(demo, {"rand"}, None) == ["Demo: use_fft = false (avoids cuRAND)"]
    assert advice_for(demo, ["fft", "rand"], None) == [
        "Demo: use_fft = false (avoids cuFFT and cuRAND)",
        "set DEMO_NO_FFT=1 so Demo avoids cuFFT [Windows only] (unverified)",
    ]


# ---------------------------------------------------------------------------
# invalid files
# ---------------------------------------------------------------------------

HEAD = """
[provenance]
generated_by = 'hand'
sources = ['a test']

[framework]
id = '{id}'
name = 'Demo'
distributions = ['demo-dist']
"""


def write(folder: Path, fid: str, body: str, head: str | None = None) -> Path:
    path = folder / f"{fid}.toml"
    text = (HEAD.format(id=fid) if head is None else head) + textwrap.dedent(body)
    path.write_text(text)
    return path


def expect_error(folder: Path, rules, *fragments: str) -> RulesError:
    with pytest.raises(RulesError) as info:
        load_frameworks(folder, rules=rules)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return info.value


@pytest.mark.parametrize("body, fragments", [
    ("""
     [[loads_by_name]]
     family = 'cudnn'
     names = ['cudnn64_9.dll']
     when = 'always'
     """, ["loads_by_name #1", "unknown library family 'cudnn'"]),
    ("""
     [[loads_by_name]]
     family = 'dnn'
     names = ['cudnn64_9.dll']
     when = 'sometimes'
     """, ["loads_by_name #1", "when must be"]),
    ("""
     [[loads_by_name]]
     family = 'dnn'
     names = ['cudnn64_9.dll']
     when = 'feature:'
     """, ["when must be"]),
    ("""
     [[loads_by_name]]
     family = 'dnn'
     names = []
     when = 'always'
     """, ["'names' must list"]),
    ("""
     [[loads_by_name]]
     family = 'dnn'
     names = ['cudnn64_9.dll']
     when = 'always'
     how = 'by-name'
     """, ["unknown key 'how'"]),
    ("""
     [[loads_by_name]]
     family = 'dnn'
     names = ['cudnn64_9.dll']
     when = 'always'
     load = 'dlopen'
     """, ["load must be one of"]),
    ("""
     [[loads_by_name]]
     family = 'dnn'
     names = ['cudnn64_9.dll']
     when = 'always'
     platform = 'macos'
     """, ["platform must be one of"]),
    ("""
     [[loads_by_name]]
     family = 'dnn'
     names = ['cudnn64_9.dll']
     when = 'always'
     confidence = 'maybe'
     """, ["confidence must be one of"]),
    ("""
     [[switch]]
     avoids = ['dnn']
     kind = 'registry'
     setting = 'x'
     """, ["switch #1", "kind must be one of"]),
    ("""
     [[switch]]
     avoids = []
     kind = 'env'
     setting = 'X=1'
     """, ["'avoids' must name"]),
    ("""
     [[switch]]
     avoids = ['cuDNN']
     kind = 'env'
     setting = 'X=1'
     """, ["unknown library family 'cuDNN'"]),
    ("""
     [[switch]]
     avoids = ['dnn']
     kind = 'env'
     """, ["missing key 'setting'"]),
    ("""
     [[switch]]
     avoids = ['dnn']
     kind = 'env'
     setting = 'X=1'
     recommended = 'yes'
     """, ["'recommended' must be true or false"]),
    ("""
     [[instead]]
     when = 'ptx-only'
     advice = 'x'
     """, ["instead #1", "unknown library family 'ptx-only'"]),
    ("""
     [[instead]]
     when = 'dnn'
     """, ["missing key 'advice'"]),
    ("""
     [extras]
     x = 1
     """, ["unknown top-level key 'extras'"]),
    ("""
     [[loads_by_name]]
     family = 'dnn'
     names = 'cudnn64_9.dll'
     when = 'always'
     """, ["'names' must be a list of strings"]),
])
def test_invalid_entries_name_the_file_and_problem(tmp_path, rules, body, fragments):
    path = write(tmp_path, "demo", body)
    error = expect_error(tmp_path, rules, *fragments)
    assert error.path == path
    assert "demo.toml" in str(error)


def test_missing_provenance(tmp_path, rules):
    write(tmp_path, "demo", "", head="[framework]\nid = 'demo'\nname = 'Demo'\ndistributions = ['d']\n")
    expect_error(tmp_path, rules, "demo.toml", "[provenance]")


def test_empty_provenance_sources(tmp_path, rules):
    write(tmp_path, "demo", "", head=HEAD.format(id="demo").replace("['a test']", "[]"))
    expect_error(tmp_path, rules, "demo.toml", "sources")


def test_missing_framework_table(tmp_path, rules):
    write(tmp_path, "demo", "", head="[provenance]\ngenerated_by = 'hand'\nsources = ['x']\n")
    expect_error(tmp_path, rules, "demo.toml", "missing the [framework] table")


def test_id_must_match_file_name(tmp_path, rules):
    write(tmp_path, "demo", "", head=HEAD.format(id="other"))
    expect_error(tmp_path, rules, "demo.toml", "does not match the file name")


def test_bad_id(tmp_path, rules):
    (tmp_path / "Bad-Id.toml").write_text(HEAD.format(id="Bad-Id"))
    expect_error(tmp_path, rules, "Bad-Id.toml", "id must match")


def test_no_distributions(tmp_path, rules):
    write(tmp_path, "demo", "", head=HEAD.format(id="demo").replace("['demo-dist']", "[]"))
    expect_error(tmp_path, rules, "demo.toml", "'distributions' must list")


def test_distribution_listed_twice_or_claimed_twice(tmp_path, rules):
    write(tmp_path, "demo", "", head=HEAD.format(id="demo").replace("['demo-dist']", "['demo-dist', 'Demo_Dist']"))
    expect_error(tmp_path, rules, "demo.toml", "listed twice")
    (tmp_path / "demo.toml").unlink()
    write(tmp_path, "aaa", "")
    write(tmp_path, "bbb", "", head=HEAD.format(id="bbb").replace("['demo-dist']", "['demo_dist']"))
    expect_error(tmp_path, rules, "bbb.toml", "already claimed by framework 'aaa'")


def test_bad_toml(tmp_path, rules):
    (tmp_path / "demo.toml").write_text("[framework\nid = ")
    expect_error(tmp_path, rules, "demo.toml", "not valid TOML")


def test_missing_folder(tmp_path, rules):
    expect_error(tmp_path / "nope", rules, "no such frameworks folder")


def test_a_rules_folder_with_frameworks_inside(tmp_path, rules):
    (tmp_path / "frameworks").mkdir()
    write(tmp_path / "frameworks", "demo", "")
    (demo,) = load_frameworks(tmp_path, rules=rules)
    assert demo.id == "demo" and demo.loads == () and demo.switches == ()
    assert framework_for("DEMO.dist", [demo]) is demo


def test_an_empty_folder_gives_no_frameworks(tmp_path, rules):
    assert load_frameworks(tmp_path, rules=rules) == ()
