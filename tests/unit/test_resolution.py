"""Resolution as the loader does it: a single binary with its folder, input
errors, libraries found through --search-path, verdicts through in-tree
NVIDIA libraries, and other distributions' folders (issue 10, item 6)."""
from __future__ import annotations

import shutil
import zipfile

from click.testing import CliRunner
from conftest import FIXTURES, by_path, dependency

from cuda4amd.cli import main

TOOL = FIXTURES / "demo" / "Tool"


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def test_a_single_binary_is_scanned_with_its_folder(scan):
    report = scan(TOOL / "tool.exe")
    assert report["target"]["kind"] == "file"
    binaries = by_path(report)
    # what it loads from its folder is read and judged; the plugins it does not load are left out
    assert {path: b["verdict"] for path, b in binaries.items()} == {"render.dll": "degraded", "tool.exe": "degraded"}
    assert dependency(binaries["tool.exe"], "render.dll")["how"] == "same-folder"
    assert binaries["tool.exe"]["reasons"][0].startswith("loads render.dll (static), which is degraded")
    assert report["verdict"] == "partial"


def test_a_library_alone_is_judged_with_what_sits_next_to_it(scan):
    report = scan(TOOL / "render.dll")
    assert [b["path"] for b in report["binaries"]] == ["render.dll"]
    assert report["binaries"][0]["verdict"] == "degraded"


def test_unreadable_truncated_and_non_archive_targets_are_input_errors(tmp_path):
    text = run("scan", TOOL / "readme.txt")
    assert text.exit_code == 2 and "not a PE or ELF binary, nor a wheel or zip archive" in text.output
    truncated = run("scan", FIXTURES / "corrupt" / "truncated.so")
    assert truncated.exit_code == 2 and "not a readable binary" in truncated.output
    not_zip = tmp_path / "fake-1.0-py3-none-any.whl"
    not_zip.write_bytes(b"this is not a zip archive\n")
    assert run("scan", not_zip).exit_code == 2
    archive = tmp_path / "cut-1.0-py3-none-any.whl"
    with zipfile.ZipFile(archive, "w") as out:
        out.write(FIXTURES / "pe" / "app_ready.exe", "pkg/app_ready.exe")
    cut = tmp_path / "cut2-1.0-py3-none-any.whl"
    cut.write_bytes(archive.read_bytes()[:-40])  # the central directory's end is gone
    assert run("scan", cut).exit_code == 2
    # the working archive scans
    assert run("scan", archive).exit_code == 0


def test_in_tree_nvidia_libraries_pass_their_verdict_to_their_importers(tmp_path, scan):
    """A cuSOLVER that ZLUDA does not replace, here with PTX in only one of
    its two kernel modules (the nvcc-built axpy_fatb.dll under cuSOLVER's
    name): degraded, and so is solver_user.dll, which imports it."""
    shutil.copy(FIXTURES / "pe" / "solver_user.dll", tmp_path / "solver_user.dll")
    shutil.copy(FIXTURES / "kernels" / "pe" / "axpy_fatb.dll", tmp_path / "cusolver64_11.dll")
    binaries = by_path(scan(tmp_path))
    solver = binaries["cusolver64_11.dll"]
    assert solver["nvidia_library"]["basis"] == "in-tree" and solver["verdict"] == "degraded"
    user = binaries["solver_user.dll"]
    assert dependency(user, "cusolver64_11.dll")["route"] == "passthrough"
    assert user["verdict"] == "degraded"
    assert any(r.startswith("loads cusolver64_11.dll (static), which is degraded: NVIDIA cuSOLVER library")
               for r in user["reasons"])


def search_path_layout(tmp_path):
    app, libs = tmp_path / "app", tmp_path / "libs"
    app.mkdir()
    libs.mkdir()
    shutil.copy(TOOL / "tool.exe", app / "tool.exe")
    shutil.copy(TOOL / "render.dll", libs / "render.dll")
    return app, libs


def test_libraries_found_through_the_search_path_are_read_and_judged(tmp_path, scan):
    app, libs = search_path_layout(tmp_path)
    report = scan(app, search_paths=(libs,))
    binaries = by_path(report)
    render = binaries[str(libs / "render.dll")]
    assert render["verdict"] == "degraded"
    assert dependency(render, "cublas64_12.dll")["symbols"]["stub"] == ["cublasDgemm_v2"]
    tool = binaries["tool.exe"]
    assert dependency(tool, "render.dll")["how"] == "search-path"
    assert tool["verdict"] == "degraded"
    assert tool["reasons"][0].startswith(f"loads {libs / 'render.dll'} (static), which is degraded")
    # without the search path render.dll is merely unresolved
    alone = by_path(scan(app))["tool.exe"]
    assert dependency(alone, "render.dll")["how"] == "unresolved"


def test_the_fix_green_lights_what_a_search_path_library_needs(tmp_path):
    from test_fix_support import WIN_HOST, WIN_ZIP

    app, libs = search_path_layout(tmp_path)
    result = run("scan", app, "--search-path", libs, "--host", WIN_HOST, "--fix", "--dry-run", "--zluda", WIN_ZIP)
    assert f"cublas64_12.dll ← {libs / 'render.dll'} (static)" in " ".join(result.output.split())  # wrapped
    assert "copy   .cuda4amd/zluda/cublas64_12.dll" in result.output


def test_placement_puts_nothing_outside_the_target(tmp_path, rules):
    """A library read through --search-path lies outside the target: its
    imports go to the folder of the target's program that loads it (the
    Windows loader's first place to look), or are left out with a note to
    use the launcher; never next to the library (issue 11)."""
    from test_fix_support import WIN_HOST, WIN_ZIP

    from cuda4amd.fix.plan.make import make_plan
    from cuda4amd.fix.release import choose_source
    from cuda4amd.host import load_host_report
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    app, libs = search_path_layout(tmp_path)
    host = load_host_report(WIN_HOST)

    def place(target):
        result = run_scan(ScanOptions(target=str(target), search_paths=(libs,), host="none"), rules=rules)
        source = choose_source(rules, result.release.tag, "windows", WIN_ZIP)
        return make_plan(result, rules=rules, host=host, source=source, mode="place")

    plan = place(app)
    assert [(a.kind, a.path) for a in plan.actions] == [
        ("copy", "cublas64_12.dll"), ("copy", "nvcuda.dll"), ("copy", "nvcudart_hybrid64.dll")]
    assert "the program that loads" in next(a.why for a in plan.actions if a.path == "cublas64_12.dll")
    assert not plan.warnings

    # the same importer as a DLL (IMAGE_FILE_DLL set): no program of the target loads render.dll
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    data = bytearray((app / "tool.exe").read_bytes())
    characteristics = int.from_bytes(data[0x3C:0x40], "little") + 4 + 18  # PE signature, COFF header field
    data[characteristics + 1] |= 0x20  # IMAGE_FILE_DLL (0x2000): the field's high byte
    (plugins / "plugin.dll").write_bytes(bytes(data))
    plan = place(plugins)
    assert [a.path for a in plan.actions] == ["nvcuda.dll", "nvcudart_hybrid64.dll"]  # plugin.dll's own import
    assert all(not a.path.startswith(("/", "..")) for a in plan.actions)
    note = next(w for w in plan.warnings if "render.dll" in w)
    assert "outside the target" in note and "cublas64_12.dll" in note and "--mode launcher" in note


def test_another_distributions_folder_counts_only_where_a_framework_rule_adds_it(tmp_path, scan):
    from test_packages import install

    site = tmp_path / "site-packages"
    solver = FIXTURES / "kernels" / "elf" / "libaxpy_ptx86.so"  # an nvcc-built library with PTX, as cuSOLVER 11
    install(site, "nvidia-cusolver-cu11", "11.4.1", {"nvidia/cusolver/lib/libcusolver.so.11": solver})
    # libuser_rpath.so needs libcusolver.so.11, which its RPATH does not find
    install(site, "oldpkg", "1.0", {"oldpkg/libuser_rpath.so": FIXTURES / "elf" / "libuser_rpath.so"})
    install(site, "torch", "2.0.0", {"torch/lib/libuser_rpath.so": FIXTURES / "elf" / "libuser_rpath.so"})
    binaries = by_path(scan(site))
    # nothing puts nvidia/cusolver/lib on oldpkg's search path
    old = dependency(binaries["oldpkg/libuser_rpath.so"], "libcusolver.so.11")
    assert (old["how"], old["resolved"], old["via"]) == ("unresolved", None, None)
    # torch preloads nvidia/*/lib (torch/__init__.py _preload_cuda_deps; rules/frameworks/torch.toml)
    torch = dependency(binaries["torch/lib/libuser_rpath.so"], "libcusolver.so.11")
    assert (torch["how"], torch["resolved"]) == ("framework-folder", "nvidia/cusolver/lib/libcusolver.so.11")
    assert torch["via"] == "framework rule torch: adds nvidia/*/lib"
    assert torch["basis"] == "in-tree" and torch["route"] == "passthrough"


def test_within_one_distribution_elsewhere_in_tree_still_counts(tmp_path, scan):
    from test_packages import install

    site = tmp_path / "site-packages"
    install(site, "onepkg", "1.0", {
        "onepkg/libs/libcusolver.so.11": FIXTURES / "kernels" / "elf" / "libaxpy_ptx86.so",
        "onepkg/ext/libuser_rpath.so": FIXTURES / "elf" / "libuser_rpath.so",
    })
    dep = dependency(by_path(scan(site))["onepkg/ext/libuser_rpath.so"], "libcusolver.so.11")
    assert (dep["how"], dep["resolved"], dep["via"]) == ("elsewhere-in-tree", "onepkg/libs/libcusolver.so.11", None)


def test_a_folder_holding_wheels_and_zips_scans_them_too(tmp_path, scan):
    folder = tmp_path / "downloads"
    folder.mkdir()
    shutil.copy(FIXTURES / "pe" / "app_ready.exe", folder / "app_ready.exe")
    with zipfile.ZipFile(folder / "blaspkg-1.0-py3-none-win_amd64.whl", "w") as wheel:
        wheel.write(FIXTURES / "pe" / "blas_mixed.dll", "blaspkg/blas_mixed.dll")
        wheel.writestr("blaspkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: blaspkg\nVersion: 1.0\n")
        wheel.writestr("blaspkg-1.0.dist-info/RECORD", "blaspkg/blas_mixed.dll,,\nblaspkg-1.0.dist-info/METADATA,,\n")
    with zipfile.ZipFile(folder / "tool.zip", "w") as archive:
        for name in ("tool.exe", "render.dll"):
            archive.write(TOOL / name, f"Tool/{name}")
    (folder / "broken.zip").write_bytes(b"PK\x03\x04 not really")
    report = scan(folder)
    binaries = by_path(report)
    assert {path: b["verdict"] for path, b in binaries.items()} == {
        "app_ready.exe": "ready",
        "blaspkg-1.0-py3-none-win_amd64.whl/blaspkg/blas_mixed.dll": "degraded",
        "tool.zip/Tool/render.dll": "degraded",
        "tool.zip/Tool/tool.exe": "degraded",
    }
    assert [b["path"] for b in report["binaries"]] == sorted(binaries)
    assert dependency(binaries["tool.zip/Tool/tool.exe"], "render.dll")["resolved"] == "tool.zip/Tool/render.dll"
    assert binaries["blaspkg-1.0-py3-none-win_amd64.whl/blaspkg/blas_mixed.dll"]["distribution"] == "blaspkg"
    (package,) = report["packages"]
    assert (package["name"], package["verdict"]) == ("blaspkg", "partial")
    assert report["errors"] == [
        {"path": "broken.zip", "stage": "discover", "message": "not a readable zip archive (truncated or damaged?)"}
    ]


def test_the_graph_links_a_search_path_library_as_the_binary_it_is(tmp_path, rules):
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    app, libs = search_path_layout(tmp_path)
    graph = run_scan(ScanOptions(target=str(app), search_paths=(libs,), host="none"), rules=rules).graph
    render = str(libs / "render.dll")
    assert graph.nodes[render]["kind"] == "binary"
    assert graph.has_edge("tool.exe", render) and "lib:render.dll" not in graph


def _shared(tmp_path, name, soname, needed=(), runpath=None):
    """A gcc-built shared object with a soname, linked against `needed` (other outputs of this helper)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        import pytest

        pytest.skip("gcc not installed")
    import subprocess

    src = tmp_path / (name + ".c")
    src.write_text(f"int {name.replace('.', '_').replace('-', '_')}_entry(void) {{ return 1; }}\n")
    out = tmp_path / name
    args = [gcc, "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{soname}", "-Wl,--no-as-needed", *map(str, needed)]
    if runpath:
        args += [f"-Wl,-rpath,{runpath}", "-Wl,--enable-new-dtags"]
    subprocess.run(args, check=True, capture_output=True)
    return out


def test_cupy_finds_the_nvidia_wheels_that_cuda_pathfinder_loads(tmp_path, scan):
    # the layout of the H200 run's site-packages (benchmarks/gpu-truth/2026-12-01-merged.md): CuPy 14's
    # wrapper modules need libcublas.so.13 without a RUNPATH to it; cuda.pathfinder loads it from
    # nvidia/cu13/lib first (rules/frameworks/cupy.toml [[search_folders]]), and cuBLAS's own RUNPATH
    # $ORIGIN finds cuBLASLt beside it
    from test_packages import install

    build = tmp_path / "build"
    build.mkdir()
    lt = _shared(build, "libcublasLt.so.13", "libcublasLt.so.13")
    blas = _shared(build, "libcublas.so.13", "libcublas.so.13", needed=[lt], runpath="$ORIGIN")
    wrapper = _shared(build, "cublas.cpython-312-x86_64-linux-gnu.so", "cublas.cpython-312-x86_64-linux-gnu.so",
                      needed=[blas])
    site = tmp_path / "site-packages"
    install(site, "nvidia-cublas", "13.1.0.3", {"nvidia/cu13/lib/libcublas.so.13": blas,
                                               "nvidia/cu13/lib/libcublasLt.so.13": lt})
    install(site, "cupy-cuda13x", "14.2.0", {"cupy_backends/cuda/libs/cublas.cpython-312-x86_64-linux-gnu.so": wrapper})
    install(site, "otherpkg", "1.0", {"otherpkg/cublas.cpython-312-x86_64-linux-gnu.so": wrapper})
    report = scan(site)
    binaries = by_path(report)
    cupy = dependency(binaries["cupy_backends/cuda/libs/cublas.cpython-312-x86_64-linux-gnu.so"], "libcublas.so.13")
    assert (cupy["how"], cupy["resolved"]) == ("framework-folder", "nvidia/cu13/lib/libcublas.so.13")
    assert cupy["via"] == "framework rule cupy: adds nvidia/*/lib"
    # nothing loads the wheel's folder for a package without such a rule
    other = dependency(binaries["otherpkg/cublas.cpython-312-x86_64-linux-gnu.so"], "libcublas.so.13")
    assert (other["how"], other["resolved"]) == ("unresolved", None)
    lt_dep = dependency(binaries["nvidia/cu13/lib/libcublas.so.13"], "libcublasLt.so.13")
    assert (lt_dep["how"], lt_dep["resolved"]) == ("runpath", "nvidia/cu13/lib/libcublasLt.so.13")

    # and the GPU truth harness then counts cuBLASLt (mapped by CuPy's matmul) as predicted
    import sys

    sys.path.insert(0, str(FIXTURES.parent / "tools" / "gpu_truth"))
    from compare import classify_loads, reached, rules_family_of

    tree, outside = reached(report, ["cupy-cuda13x"])
    assert {"nvidia/cu13/lib/libcublas.so.13", "nvidia/cu13/lib/libcublasLt.so.13"} <= tree
    mapped = [f"{site}/nvidia/cu13/lib/libcublas.so.13", f"{site}/nvidia/cu13/lib/libcublasLt.so.13"]
    loads = classify_loads(mapped, str(site), rules_family_of(), tree, outside)
    assert loads["predicted"] == ["nvidia/cu13/lib/libcublas.so.13", "nvidia/cu13/lib/libcublasLt.so.13"]


def test_a_framework_rules_by_name_load_resolves_to_the_folder_it_adds(tmp_path, scan):
    # the merged H200 run's JAX libnvJitLink.so.13: JAX's Python preloads libcusparse.so.12 from
    # nvidia/cu13/lib (rules/frameworks/jax.toml), and cuSPARSE's RUNPATH $ORIGIN then loads nvJitLink;
    # the plugin's binaries name neither, so only the framework rule's load leads there
    from test_packages import install

    build = tmp_path / "build"
    build.mkdir()
    jitlink = _shared(build, "libnvJitLink.so.13", "libnvJitLink.so.13")
    sparse = _shared(build, "libcusparse.so.12", "libcusparse.so.12", needed=[jitlink], runpath="$ORIGIN")
    plugin = _shared(build, "cuda_plugin_extension.so", "cuda_plugin_extension.so")
    site = tmp_path / "site-packages"
    install(site, "nvidia-nvjitlink", "13.0.88", {"nvidia/cu13/lib/libnvJitLink.so.13": jitlink})
    install(site, "nvidia-cusparse", "12.6.3.3", {"nvidia/cu13/lib/libcusparse.so.12": sparse})
    install(site, "triton", "3.6.0", {"triton/backends/nvidia/lib/libcusparse.so.12": sparse})
    install(site, "jax-cuda13-plugin", "0.11.2", {"jax_cuda13_plugin/cuda_plugin_extension.so": plugin})
    report = scan(site)
    jax = next(p for p in report["packages"] if p["name"] == "jax-cuda13-plugin")
    loads = {load["name"]: load["resolved"] for load in jax["loads"]}
    # JAX's rule adds nvidia/*/lib, not Triton's folder; what is not in the tree stays unresolved
    assert loads["libcusparse.so.12"] == "nvidia/cu13/lib/libcusparse.so.12"
    assert loads["libcudnn.so.9"] is None
    assert all(load["basis"] == "framework-rule" for load in jax["loads"])

    import sys

    sys.path.insert(0, str(FIXTURES.parent / "tools" / "gpu_truth"))
    from compare import reached

    tree, _ = reached(report, ["jax-cuda13-plugin"])
    assert {"nvidia/cu13/lib/libcusparse.so.12", "nvidia/cu13/lib/libnvJitLink.so.13"} <= tree
    assert "triton/backends/nvidia/lib/libcusparse.so.12" not in tree
