"""Name resolution as the Windows and ELF loaders do it, on copies of the fixtures."""
from __future__ import annotations

import shutil

from conftest import FIXTURES, by_path, dependency


def test_search_path_resolves_case_insensitively_outside_the_tree(tmp_path, scan):
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(FIXTURES / "pe" / "chain" / "chain_app.exe", app)
    shutil.copy(FIXTURES / "pe" / "chain" / "chain_util.dll", app)
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "Missing_Vendor.DLL").write_bytes(b"")
    report = scan(app, search_paths=(vendor,))
    dep = dependency(by_path(report)["chain_app.exe"], "missing_vendor.dll")
    assert (dep["how"], dep["resolved"]) == ("search-path", str(vendor / "Missing_Vendor.DLL"))
    helper = dependency(by_path(report)["chain_app.exe"], "chain_helper.dll")
    assert (helper["how"], helper["resolved"]) == ("unresolved", None)


def test_app_folder_and_elsewhere_in_tree(tmp_path, scan):
    (tmp_path / "bin").mkdir()
    (tmp_path / "plugins").mkdir()
    (tmp_path / "libs").mkdir()
    shutil.copy(FIXTURES / "pe" / "chain" / "chain_app.exe", tmp_path / "bin")
    shutil.copy(FIXTURES / "pe" / "chain" / "chain_util.dll", tmp_path / "bin")
    # a plugin importing CHAIN_UTIL.dll finds it in the application's (the .exe's) folder
    shutil.copy(FIXTURES / "pe" / "chain" / "chain_app.exe", tmp_path / "plugins" / "plugin.exe.dll")
    shutil.copy(FIXTURES / "pe" / "chain" / "chain_helper.dll", tmp_path / "libs")
    report = scan(tmp_path)
    binaries = by_path(report)
    plugin = binaries["plugins/plugin.exe.dll"]
    assert (dependency(plugin, "CHAIN_UTIL.dll")["how"], dependency(plugin, "CHAIN_UTIL.dll")["resolved"]) == ("app-folder", "bin/chain_util.dll")
    helper = dependency(binaries["bin/chain_app.exe"], "chain_helper.dll")
    assert (helper["how"], helper["resolved"]) == ("elsewhere-in-tree", "libs/chain_helper.dll")
    # what it loads from the tree decides its verdict, wherever it was found
    assert binaries["bin/chain_app.exe"]["verdict"] == "blocked"


def test_elf_rpath_origin_parent_and_no_search_of_own_folder(tmp_path, scan):
    (tmp_path / "lib").mkdir()
    (tmp_path / "pkg").mkdir()
    shutil.copy(FIXTURES / "elf" / "libuser_rpath.so", tmp_path / "pkg")
    shutil.copy(FIXTURES / "elf" / "libuser_blas.so", tmp_path / "pkg")
    shutil.copy(FIXTURES / "elf" / "libcublas.so.12", tmp_path / "lib")
    report = scan(tmp_path)
    binaries = by_path(report)
    # RUNPATH $ORIGIN finds nothing in pkg/, so the library is only elsewhere in the tree
    dep = dependency(binaries["pkg/libuser_blas.so"], "libcublas.so.12")
    assert (dep["how"], dep["resolved"]) == ("elsewhere-in-tree", "lib/libcublas.so.12")
    shutil.copy(FIXTURES / "elf" / "libcublas.so.12", tmp_path / "lib" / "libcusolver.so.11")
    report = scan(tmp_path)
    dep = dependency(by_path(report)["pkg/libuser_rpath.so"], "libcusolver.so.11")
    assert (dep["how"], dep["resolved"]) == ("rpath", "lib/libcusolver.so.11")


def test_soname_symlink_resolves_to_the_real_file(tmp_path, scan):
    shutil.copy(FIXTURES / "elf" / "libuser_blas.so", tmp_path)
    shutil.copy(FIXTURES / "elf" / "libcublas.so.12", tmp_path / "libcublas.so.12.9.1")
    (tmp_path / "libcublas.so.12").symlink_to("libcublas.so.12.9.1")
    report = scan(tmp_path)
    dep = dependency(by_path(report)["libuser_blas.so"], "libcublas.so.12")
    assert (dep["how"], dep["resolved"]) == ("runpath", "libcublas.so.12.9.1")
    assert sorted(by_path(report)) == ["libcublas.so.12.9.1", "libuser_blas.so"]
    # the real file is known as cuBLAS by its soname link
    assert by_path(report)["libcublas.so.12.9.1"]["nvidia_library"]["family"] == "blas"


def test_networkx_graph_holds_binaries_and_libraries(rules):
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    result = run_scan(ScanOptions(target=str(FIXTURES / "demo" / "Tool")), rules=rules)
    graph = result.graph
    assert graph.has_edge("tool.exe", "render.dll")
    assert graph.edges["tool.exe", "render.dll"]["load"] == "static"
    assert graph.has_edge("render.dll", "lib:cublas64_12.dll")
    assert graph.nodes["lib:cublas64_12.dll"]["kind"] == "library"
    assert not any(node.startswith("lib:kernel32") for node in graph)
