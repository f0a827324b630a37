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


# ---------------------------------------------------------------------------
# resolve_edges works out each binary's search folders once (issue 13); it
# must resolve every name as the loader rules did name by name. The reference
# below is that earlier code, compared on generated trees.
# ---------------------------------------------------------------------------

def _reference_resolve(binary, name, platform, index, disk, extra, app_folders, target_root, system, reach):
    import posixpath

    here = posixpath.dirname(binary.path)
    if "/" in name or (platform == "windows" and "\\" in name):
        rel = posixpath.normpath(posixpath.join(here, name.replace("\\", "/")))
        hit = index.at(rel, platform)
        return (hit, "same-folder", True, None, None) if hit else _reference_outside(name, platform, system)
    if platform == "windows":
        for folder, how in [(here, "same-folder")] + [(f, "app-folder") for f in app_folders if f != here]:
            hit = index.at(posixpath.join(folder, name) if folder else name, platform)
            if hit:
                return hit, how, True, None, None
    else:
        found = _reference_elf_search(binary, name, platform, here, index, disk, target_root)
        if found is not None:
            return found
    return _reference_elsewhere(binary, name, platform, index, disk, extra, system, reach)


def _reference_elf_search(binary, name, platform, here, index, disk, target_root):
    """The binary's RPATH (unless it has a RUNPATH) and RUNPATH folders, in order; None when none holds `name`."""
    import os
    import posixpath

    info = binary.info
    search = [(p, "rpath") for p in info.rpath] if not info.runpath else []
    search += [(p, "runpath") for p in info.runpath]
    for raw, how in search:
        folder = raw.replace("${ORIGIN}", "$ORIGIN")
        if folder.startswith("$ORIGIN"):
            rel = posixpath.normpath(posixpath.join(here, folder[len("$ORIGIN"):].lstrip("/")))
            hit = index.at(posixpath.join(rel, name) if rel != "." else name, platform) if not rel.startswith("..") else None
            if hit:
                return hit, how, True, None, None
            if target_root is not None and rel.startswith(".."):
                outside = disk.find(os.path.join(target_root, here, folder[len("$ORIGIN"):].lstrip("/")), name, platform)
                if outside:
                    return os.path.normpath(outside), how, False, None, None
        elif folder.startswith("/"):
            outside = disk.find(folder, name, platform)
            if outside:
                return outside, how, False, None, None
    return None


def _reference_elsewhere(binary, name, platform, index, disk, extra, system, reach):
    """Not in the binary's own search folders: a system library, one in a search path, or elsewhere in the tree."""
    kind = system.system_kind(name, platform)
    if kind is not None:
        return None, "system", False, kind, None
    for folder in extra:
        outside = disk.find(folder, name, platform)
        if outside:
            return outside, "search-path", False, None, None
    for hit in index.everywhere(name, platform):
        allowed, via = reach(binary.path, hit)
        if allowed:
            return hit, "framework-folder" if via else "elsewhere-in-tree", True, None, via
    return None, "unresolved", False, None, None


def _reference_outside(name, platform, system):
    import posixpath

    kind = system.system_kind(posixpath.basename(name.replace("\\", "/")), platform)
    if kind is not None:
        return None, "system", False, kind, None
    return None, "unresolved", False, None, None


def _reference_edges(binaries, aliases, system, search_paths, target_root, expand, reach):
    import os
    import posixpath

    from cuda4amd.scan import graph

    index = graph._TreeIndex(binaries, aliases)
    disk = graph._DiskLookup()
    extra = [os.fspath(p) for p in search_paths]
    app_folders = sorted({posixpath.dirname(b.path) for b in binaries if b.info.format == "PE" and b.info.kind == "exe"},
                         key=lambda d: (d.count("/"), d))
    edges = []
    for binary in binaries:
        platform = graph.platform_of(binary)

        def resolve(name, binary=binary, platform=platform):
            return _reference_resolve(binary, name, platform, index, disk, extra, app_folders, target_root, system, reach)

        for imported in binary.info.imports:
            resolved, how, in_tree, system_kind, via = resolve(imported.name)
            edges.append(graph.Edge(binary.path, imported.name, imported.load, imported.symbols, imported.ordinals,
                                    platform, resolved, how, in_tree, system_kind, via=via))
        edges += graph._by_name_edges(binary, platform, resolve, expand)
    return edges


_FOLDERS = ["", "bin", "lib", "pkg/lib", "Pkg/Lib", "/abs/lib", "/"]
_NAMES = ["a.dll", "A.DLL", "b.so", "libc.so.6", "kernel32.dll", "x/b.so", "..\\lib\\a.dll", "./b.so", "lib/b.so",
          "c.so", "d%d.dll"]
_RPATHS = ["$ORIGIN", "${ORIGIN}/../lib", "$ORIGIN/..", "$ORIGIN/lib", "$ORIGIN/../..", "$ORIGIN/../../../out", "/usr/lib",
           "OUTSIDE", "rel/lib", "$ORIGINX"]


def _binary_strategy():
    from hypothesis import strategies as st

    from cuda4amd.model import BinaryInfo, ImportedLibrary, NameReference, ScannedBinary

    def make(folder, base, fmt, kind, imports, refs, rpath, runpath):
        path = f"{folder.rstrip('/')}/{base}" if folder else base
        info = BinaryInfo(fmt, "x86_64", 64, kind, tuple(ImportedLibrary(n, "static") for n in imports),
                          rpath=tuple(rpath), runpath=tuple(runpath))
        return ScannedBinary(path, info, by_name=tuple(NameReference(n, "ascii", "%" in n) for n in refs))

    return st.builds(
        make, st.sampled_from(_FOLDERS), st.sampled_from(["a.dll", "A.dll", "b.so", "c.so", "tool.exe", "d1.dll"]),
        st.sampled_from(["PE", "ELF"]), st.sampled_from(["exe", "dll", "shared-library"]),
        st.lists(st.sampled_from(_NAMES), max_size=4), st.lists(st.sampled_from(_NAMES), max_size=3),
        st.lists(st.sampled_from(_RPATHS), max_size=3), st.lists(st.sampled_from(_RPATHS), max_size=2))


class _System:
    def system_kind(self, file_name, platform):
        return "os" if file_name.casefold() in ("kernel32.dll", "libc.so.6") else None


def test_resolve_edges_agrees_with_resolving_name_by_name(tmp_path):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from cuda4amd.scan.graph import resolve_edges

    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    for folder in ("out", "lib"):  # outside the tree: found through $ORIGIN/../.. and the search path
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "c.so").write_bytes(b"")
        (tmp_path / folder / "A.DLL").write_bytes(b"")

    @settings(max_examples=300, deadline=None)
    @given(st.lists(_binary_strategy(), max_size=6, unique_by=lambda b: b.path),
           st.sampled_from([None, root]), st.booleans())
    def check(binaries, target_root, with_search_path):
        binaries.sort(key=lambda b: b.path)
        aliases = {"lib/alias.so": binaries[0].path, "LIB/Alias.DLL": binaries[-1].path} if binaries else {}
        search = (tmp_path / "lib",) if with_search_path else ()

        def expand(template, platform):
            return [template.replace("%d", str(i)) for i in (0, 1)]

        def reach(source, hit):
            return (not source.startswith("pkg"), "rule" if hit.startswith("lib") else None)

        fast = resolve_edges(binaries, aliases, _System(), search, target_root, expand=expand, reach=reach)
        assert fast == _reference_edges(binaries, aliases, _System(), search, target_root, expand, reach)

    check()
