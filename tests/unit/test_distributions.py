from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda4amd.project_names import canonical_name
from cuda4amd.scan import distributions
from cuda4amd.scan.discover import Target, resolve_target
from cuda4amd.scan.distributions import (
    Distribution,
    find_distributions,
    owners_of,
)


def _record_line(path: str, data: bytes | None = None) -> str:
    if data is None:
        return f"{path},,"
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def install(site: Path, name: str, version: str, files: dict[str, bytes], *,
            extra_record: list[str] = (), metadata: str | bytes | None = None,
            record: str | bytes | None = None, folder: str | None = None) -> Path:
    """Lay out a distribution the way pip does: files + NAME-VER.dist-info."""
    info = site / (folder or f"{name.replace('-', '_')}-{version}.dist-info")
    info.mkdir(parents=True)
    for rel, data in files.items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    if metadata is None:
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: test\n\nlong description\n"
    if metadata is not False:
        (info / "METADATA").write_bytes(metadata.encode() if isinstance(metadata, str) else metadata)
    if record is None:
        lines = [_record_line(rel, data) for rel, data in files.items()]
        lines += [_record_line(f"{info.name}/METADATA"), _record_line(f"{info.name}/RECORD")]
        lines += list(extra_record)
        record = "\n".join(lines) + "\n"
    if record is not False:
        (info / "RECORD").write_bytes(record.encode() if isinstance(record, str) else record)
    return info


def by_name(dists: list[Distribution]) -> dict[str, Distribution]:
    return {d.name: d for d in dists}


# ---------------------------------------------------------------------------
# venvs and site-packages
# ---------------------------------------------------------------------------

def test_linux_venv_paths_are_relative_to_the_venv(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    site = venv / "lib" / "python3.12" / "site-packages"
    install(site, "torch", "2.3.0+cu118", {
        "torch/__init__.py": b"",
        "torch/lib/libtorch_cuda.so": b"\x7fELF",
    }, extra_record=["../../../bin/torchrun,,"])
    install(site, "nvidia-cublas-cu12", "12.1.3.1", {"nvidia/cublas/lib/libcublas.so.12": b"x"})
    target = resolve_target(str(venv))
    assert target.kind == "venv"
    dists = by_name(find_distributions(target))
    torch = dists["torch"]
    assert torch.version == "2.3.0+cu118"
    assert torch.dist_info == "lib/python3.12/site-packages/torch-2.3.0+cu118.dist-info"
    assert "lib/python3.12/site-packages/torch/lib/libtorch_cuda.so" in torch.files
    assert "bin/torchrun" in torch.files  # '..' normalised, still inside the venv
    assert "lib/python3.12/site-packages/torch-2.3.0+cu118.dist-info/RECORD" in torch.files
    assert dists["nvidia-cublas-cu12"].files == frozenset({
        "lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
        "lib/python3.12/site-packages/nvidia_cublas_cu12-12.1.3.1.dist-info/METADATA",
        "lib/python3.12/site-packages/nvidia_cublas_cu12-12.1.3.1.dist-info/RECORD",
    })


def test_windows_venv_and_case_insensitive_owner_lookup(tmp_path):
    venv = tmp_path / "venv"
    (venv / "Scripts").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = C:\\Python312\n")
    site = venv / "Lib" / "site-packages"
    install(site, "cupy-cuda12x", "13.3.0", {"cupy/_core/core.cp312-win_amd64.pyd": b"MZ"},
            # Windows installers wrote backslashes and differently-cased names
            extra_record=["..\\..\\Scripts\\cupy-tool.exe,,", "CuPy/CUDA/Cublas.PYD,,"])
    dists = find_distributions(resolve_target(str(venv)))
    (cupy,) = dists
    assert cupy.name == "cupy-cuda12x"
    assert "Scripts/cupy-tool.exe" in cupy.files
    asked = ["Lib/site-packages/cupy/_core/core.cp312-win_amd64.pyd",
             "lib/SITE-PACKAGES/CUPY/_core/CORE.cp312-win_amd64.pyd",
             "Lib\\site-packages\\cupy\\cuda\\cublas.pyd", "scripts/CUPY-TOOL.EXE",
             "Lib/site-packages/numpy/core.pyd"]
    assert owners_of(dists, asked) == dict.fromkeys(asked[:4], "cupy-cuda12x")


def test_site_packages_target_drops_paths_leaving_the_tree(tmp_path):
    site = tmp_path / "site-packages"
    install(site, "onnxruntime-gpu", "1.20.1", {
        "onnxruntime/capi/onnxruntime_providers_cuda.dll": b"MZ",
    }, extra_record=["../../../bin/onnxruntime_test,,", "/usr/share/doc/ort/README,,", "C:\\abs\\x.dll,,"])
    target = resolve_target(str(site))
    assert target.kind == "site-packages"
    (ort,) = find_distributions(target)
    assert ort.dist_info == "onnxruntime_gpu-1.20.1.dist-info"
    assert "onnxruntime/capi/onnxruntime_providers_cuda.dll" in ort.files
    assert not any(f.startswith("..") or f.startswith("/") or ":" in f for f in ort.files)


def test_folder_target_finds_nested_site_packages(tmp_path):
    # e.g. ComfyUI_windows_portable/python_embeded/Lib/site-packages
    app = tmp_path / "app"
    site = app / "python_embeded" / "Lib" / "site-packages"
    install(site, "torch", "2.3.1+cu121", {"torch/lib/torch_cuda.dll": b"MZ"})
    (app / "main.py").parent.mkdir(parents=True, exist_ok=True)
    (app / "main.py").write_text("print()")
    target = resolve_target(str(app))
    assert target.kind == "folder"
    (torch,) = find_distributions(target)
    assert "python_embeded/Lib/site-packages/torch/lib/torch_cuda.dll" in torch.files
    binary = "python_embeded/Lib/site-packages/torch/lib/torch_cuda.dll"
    assert owners_of([torch], [binary]) == {binary: "torch"}


def test_paths_match_discovery(tmp_path):
    """owners_of takes the FoundBinary paths discovery produces."""
    from conftest import FIXTURES

    from cuda4amd.scan.discover import discover

    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("")
    site = venv / "Lib" / "site-packages"
    install(site, "plainpkg", "1.0", {"plainpkg/plain.dll": (FIXTURES / "pe" / "plain.dll").read_bytes()})
    target = resolve_target(str(venv))
    found = discover(target)
    paths = [b.path for b in found.binaries]
    assert list(owners_of(find_distributions(target), paths).values()) == ["plainpkg"] and len(paths) == 1


def test_record_with_quoted_commas_and_odd_rows(tmp_path):
    site = tmp_path / "site-packages"
    record = (
        'pkg/__init__.py,sha256=abc,10\n'
        '"pkg/data/a,b.bin",sha256=def,3\n'
        '\n'
        'pkg/only_path\n'
        ',,\n'
        'pkg/extra,cols,1,2,3\n'
    )
    install(site, "pkg", "0.1", {"pkg/__init__.py": b"", "pkg/data/a,b.bin": b"abc"}, record=record)
    (dist,) = find_distributions(resolve_target(str(site)))
    assert dist.files == frozenset({"pkg/__init__.py", "pkg/data/a,b.bin", "pkg/only_path", "pkg/extra"})


def test_garbled_record_still_gives_what_it_can(tmp_path):
    site = tmp_path / "site-packages"
    record = b'pkg/good.py,,\n"unterminated,quote\x00\npkg/also.py,,\n\xff\xfe\x00garbage\n'
    install(site, "pkg", "0.1", {"pkg/good.py": b""}, record=record)
    (dist,) = find_distributions(resolve_target(str(site)))
    assert "pkg/good.py" in dist.files
    assert dist.version == "0.1"


@pytest.mark.parametrize("metadata", [False, b"", b"\x00\xff\xfe binary junk \x80", "Name: \nVersion:\n"])
def test_missing_or_garbled_metadata_falls_back_to_the_folder_name(tmp_path, metadata):
    site = tmp_path / "site-packages"
    install(site, "llama-cpp-python", "0.3.16", {"llama_cpp/lib/ggml-cuda.dll": b"MZ"}, metadata=metadata)
    (dist,) = find_distributions(resolve_target(str(site)))
    assert dist.name == "llama_cpp_python"  # the escaped folder name
    assert dist.version == "0.3.16"
    assert canonical_name(dist.name) == "llama-cpp-python"
    assert "llama_cpp/lib/ggml-cuda.dll" in dist.files


def test_unparseable_folder_name_and_no_metadata_gives_unknown_version(tmp_path):
    site = tmp_path / "site-packages"
    install(site, "x", "1", {"x.py": b""}, metadata=False, record=False, folder="weird.dist-info")
    (dist,) = find_distributions(resolve_target(str(site)))
    assert (dist.name, dist.version, dist.files) == ("weird", "unknown", frozenset())


def test_missing_record_gives_no_files_and_no_exception(tmp_path):
    site = tmp_path / "site-packages"
    install(site, "torch", "2.4.0", {"torch/x.py": b""}, record=False)
    (dist,) = find_distributions(resolve_target(str(site)))
    assert (dist.name, dist.version, dist.files) == ("torch", "2.4.0", frozenset())


def test_metadata_name_is_the_display_name(tmp_path):
    site = tmp_path / "site-packages"
    install(site, "PyYAML", "6.0.1", {"yaml/__init__.py": b""}, folder="PyYAML-6.0.1.dist-info")
    (dist,) = find_distributions(resolve_target(str(site)))
    assert dist.name == "PyYAML"
    assert dist.canonical_name == "pyyaml"


def test_dist_info_that_is_a_file_or_unreadable_is_skipped(tmp_path):
    site = tmp_path / "site-packages"
    install(site, "good", "1.0", {"good.py": b""})
    (site / "bogus-1.0.dist-info").write_text("not a folder")
    dists = find_distributions(resolve_target(str(site)))
    assert [d.name for d in dists] == ["good"]


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="root can read anything")
def test_unreadable_record_is_no_exception(tmp_path):
    site = tmp_path / "site-packages"
    info = install(site, "pkg", "1.0", {"pkg.py": b""})
    (info / "RECORD").chmod(0)
    (dist,) = find_distributions(resolve_target(str(site)))
    assert dist.files == frozenset()


def test_egg_info_with_installed_files(tmp_path):
    site = tmp_path / "site-packages"
    (site / "oldpkg").mkdir(parents=True)
    (site / "oldpkg" / "_ext.so").write_bytes(b"\x7fELF")
    egg = site / "oldpkg-0.9-py3.8.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: OldPkg\nVersion: 0.9\n")
    (egg / "installed-files.txt").write_text(
        "../oldpkg/_ext.so\n../oldpkg/__init__.py\nPKG-INFO\n../../../../etc/passwd\n")
    # a single-file egg-info (distutils) too
    (site / "tiny-1.0-py3.8.egg-info").write_text("Metadata-Version: 1.0\nName: tiny\nVersion: 1.0\n")
    dists = by_name(find_distributions(resolve_target(str(site))))
    old = dists["OldPkg"]
    assert old.version == "0.9"
    assert old.dist_info == "oldpkg-0.9-py3.8.egg-info"
    assert old.files == frozenset({"oldpkg/_ext.so", "oldpkg/__init__.py", "oldpkg-0.9-py3.8.egg-info/PKG-INFO"})
    assert dists["tiny"].files == frozenset({"tiny-1.0-py3.8.egg-info"})


def test_symlink_loops_do_not_hang(tmp_path):
    app = tmp_path / "app"
    (app / "sub").mkdir(parents=True)
    (app / "sub" / "loop").symlink_to(app, target_is_directory=True)
    install(app / "sub" / "site-packages", "pkg", "1", {"pkg.py": b""})
    dists = find_distributions(resolve_target(str(app)))
    assert [d.dist_info for d in dists] == ["sub/site-packages/pkg-1.dist-info"]


def test_file_target_has_no_distributions(tmp_path):
    f = tmp_path / "x.dll"
    f.write_bytes(b"MZ")
    assert find_distributions(resolve_target(str(f))) == []


# ---------------------------------------------------------------------------
# owners_of
# ---------------------------------------------------------------------------

def test_record_entries_of_every_shape_are_normalised(tmp_path):
    """RECORD lines that need normalising and plain ones that are joined as
    they are (distributions' fast path) give the paths normpath would."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    site = venv / "lib" / "python3.12" / "site-packages"
    entries = [
        "pkg/plain.py", "pkg\\win.dll", "  pkg/spaced.py  ", "./pkg/dot.py", "pkg//double.py", "pkg/./here.py",
        "pkg/sub/../up.py", "pkg/trailing/", ".hidden/x.py", "pkg/.libs/y.so", "pkg/name..with.dots",
        "../../../bin/tool", "../../../../outside", "/abs/path", "C:\\abs\\x.dll", "",
    ]
    install(site, "shapes", "1.0", {}, record="".join(f'"{e}",,\n' for e in entries))
    dist = by_name(find_distributions(resolve_target(str(venv))))["shapes"]
    base = "lib/python3.12/site-packages"
    assert dist.files == frozenset({
        f"{base}/pkg/plain.py", f"{base}/pkg/win.dll", f"{base}/pkg/spaced.py", f"{base}/pkg/dot.py",
        f"{base}/pkg/double.py", f"{base}/pkg/here.py", f"{base}/pkg/up.py", f"{base}/pkg/trailing",
        f"{base}/.hidden/x.py", f"{base}/pkg/.libs/y.so", f"{base}/pkg/name..with.dots", "bin/tool",
    })


def test_owners_conflicts_resolve_to_the_first_name():
    a = Distribution("nvidia-cublas-cu12", "12", "a.dist-info", frozenset({"nvidia/__init__.py", "nvidia/cublas/x"}))
    b = Distribution("nvidia-cudnn-cu12", "9", "b.dist-info", frozenset({"nvidia/__init__.py", "nvidia/cudnn/y"}))
    assert owners_of([b, a], ["nvidia/__init__.py", "NVIDIA/CUDNN/Y", "nvidia/cufft/z"]) == {
        "nvidia/__init__.py": "nvidia-cublas-cu12", "NVIDIA/CUDNN/Y": "nvidia-cudnn-cu12"}
    assert owners_of([], ["nvidia/__init__.py"]) == {}


# ---------------------------------------------------------------------------
# wheels and zips
# ---------------------------------------------------------------------------

def test_wheel_every_member_belongs_to_its_dist_info(tmp_path):
    whl = tmp_path / "torch-2.3.0+cu118-cp311-cp311-win_amd64.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("torch/lib/torch_cuda.dll", b"MZ")
        z.writestr("torch/__init__.py", b"")
        z.writestr("torch-2.3.0+cu118.data/scripts/torchrun.exe", b"MZ")
        z.writestr("torch-2.3.0+cu118.dist-info/METADATA", "Name: torch\nVersion: 2.3.0+cu118\n")
        z.writestr("torch-2.3.0+cu118.dist-info/RECORD", "torch/__init__.py,,\n")  # incomplete on purpose
        z.writestr("torch/lib/", b"")  # a directory entry
    target = resolve_target(str(whl))
    assert target.kind == "archive"
    (dist,) = find_distributions(target)
    assert (dist.name, dist.version, dist.dist_info) == ("torch", "2.3.0+cu118", "torch-2.3.0+cu118.dist-info")
    assert dist.files == frozenset({
        "torch/lib/torch_cuda.dll", "torch/__init__.py", "torch-2.3.0+cu118.data/scripts/torchrun.exe",
        "torch-2.3.0+cu118.dist-info/METADATA", "torch-2.3.0+cu118.dist-info/RECORD",
    })
    from cuda4amd.scan.discover import discover

    found = discover(target)
    paths = [b.path for b in found.binaries]
    assert set(owners_of([dist], paths)) == set(paths) and set(owners_of([dist], paths).values()) == {"torch"}


def test_wheel_without_metadata(tmp_path):
    whl = tmp_path / "x.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("ctranslate2/ctranslate2.dll", b"MZ")
        z.writestr("ctranslate2-4.5.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    (dist,) = find_distributions(resolve_target(str(whl)))
    assert (dist.name, dist.version) == ("ctranslate2", "4.5.0")
    assert "ctranslate2/ctranslate2.dll" in dist.files


def test_zip_of_a_site_packages_uses_each_record(tmp_path):
    z_path = tmp_path / "bundle.zip"
    with zipfile.ZipFile(z_path, "w") as z:
        z.writestr("site-packages/a/x.dll", b"MZ")
        z.writestr("site-packages/b/y.dll", b"MZ")
        z.writestr("site-packages/a-1.dist-info/METADATA", "Name: a\nVersion: 1\n")
        z.writestr("site-packages/a-1.dist-info/RECORD", "a/x.dll,,\n../../evil,,\n")
        z.writestr("site-packages/b-2.dist-info/RECORD", "b/y.dll,,\n")
    dists = by_name(find_distributions(resolve_target(str(z_path))))
    assert dists["a"].files == frozenset({"site-packages/a/x.dll"})
    assert dists["b"].version == "2"
    assert dists["b"].files == frozenset({"site-packages/b/y.dll"})


def test_zip_without_dist_info_and_broken_archive(tmp_path):
    z_path = tmp_path / "plain.zip"
    with zipfile.ZipFile(z_path, "w") as z:
        z.writestr("app/app.exe", b"MZ")
    assert find_distributions(resolve_target(str(z_path))) == []
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"PK\x03\x04 not really")
    assert find_distributions(Target("archive", broken, str(broken))) == []


def test_canonical_name():
    assert canonical_name("Cupy_CUDA12x") == "cupy-cuda12x"
    assert canonical_name("llama.cpp__python") == "llama-cpp-python"


# ---------------------------------------------------------------------------
# the fast readers agree with the general ones
# ---------------------------------------------------------------------------
# find_distributions reads METADATA headers with its own header reader and
# most RECORDs without the csv module, and owners_of and _resolve_all work on
# all paths at once (issue 13: they were most of the main process's time at
# venv scale). Each must give what the general code gives (the email parser;
# csv + _resolve per entry; _key per path) on any input: these compare them on
# generated inputs made of the characters that matter to either.

def _email_parser_fields(data: bytes) -> tuple[str | None, str | None]:
    """What find_distributions took from METADATA before it had its own reader."""
    import re
    from email.parser import HeaderParser

    if not data:
        return None, None
    text = data.decode("utf-8", "replace")
    head = re.split(r"\r?\n\r?\n", text, maxsplit=1)[0] + "\n"
    headers = HeaderParser().parsestr(head, headersonly=True)
    return distributions._clean(headers.get("Name")), distributions._clean(headers.get("Version"))


_METADATA_PIECES = [
    b"Name", b"name", b"NAME", b"Version", b"version", b"Summary", b": ", b":", b" ", b"\t", b"From ",
    b"torch", b"2.3.0+cu118", b"\r", b"\n", b"\r\n", b"\n\n", b"\xc3\xa9", b"\xff", b"\xe2\x82", b"\x00",
    b"\x0c", b"\xe2\x80\xa8", b"\xc2\x85", b"x" * 201, b"[", b"Metadata-Version: 2.1\n",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_METADATA_PIECES), max_size=40))
def test_metadata_reader_agrees_with_the_email_parser(pieces):
    data = b"".join(pieces)
    assert distributions._parse_metadata(data) == _email_parser_fields(data)


@pytest.mark.parametrize("data", [
    b"Name: a\nVersion: 1\n\nName: b\n",  # the body is not read
    b"Metadata-Version: 2.1\r\nName: Torch \r\nVersion:\t2.3\r\n\r\nbody",
    b"Name: folded\n  on two lines\nVersion: 1\n",  # a folded value keeps its line break: refused
    b" leading continuation\nName: a\n",
    b"From someone\nName: a\nVersion: 1\n",  # a Unix envelope line
    b"Name: a\nFrom someone\nVersion: 1\n",
    b"Name: a\nVersion: 1\nFrom someone\n",
    b": no name\n continued\nName: a\n",
    b"Name: a\rVersion: 1\r\rbody",  # old Mac line breaks
    b"Name: \xff\xfe\nVersion: 1\xe2\x82\n\n",  # undecodable bytes
    b"Name: a\nName: b\nversion: 2\nVERSION: 3\n",  # the first of each counts
    b"Name : spaced\nVersion: 1\n",  # not a header line: the headers end there
    b"Name: a\x0cb\nVersion: 1\xe2\x80\xa8x\n",  # not line breaks for the email parser
])
def test_metadata_reader_cases(data):
    assert distributions._parse_metadata(data) == _email_parser_fields(data)


def _general_record_files(base: str, data: bytes) -> list[str]:
    return [f for f in (distributions._resolve(base, e) for e in distributions._record_paths(data)) if f]


_RECORD_CHARS = "aB/.,\"\r\n \t\\:\x00é\u2028\x0c\x1f\x85_-"
_BASES = ["", "lib/python3.12/site-packages", "Lib/site-packages", "a/./b", "a/", ".", "..", "../x", "x\ny", "é"]


@settings(max_examples=800, deadline=None)
@given(st.text(alphabet=_RECORD_CHARS, max_size=120), st.sampled_from(_BASES), st.sampled_from([131072, 6, 2, 1]))
def test_record_reader_agrees_with_csv_and_resolve(text, base, limit):
    import csv

    old = csv.field_size_limit(limit)
    try:
        data = text.encode("utf-8")
        fast = [f for f in distributions._record_files(base, data) if f]
        assert fast == _general_record_files(base, data)
    finally:
        csv.field_size_limit(old)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(alphabet="aB/.\\: \t\n\x0b\u3000é_", max_size=12), max_size=12), st.sampled_from(_BASES))
def test_resolve_all_is_resolve_of_each(entries, base):
    assert distributions._resolve_all(base, entries) == [distributions._resolve(base, e) for e in entries]


def test_record_with_every_kind_of_line_break(tmp_path):
    lines = ["pkg/a.py,sha256=x,1", "pkg/b.py", "pkg/c,d.py", '"pkg/e,f.py",,', "pkg/g.py,,"]
    for sep in ("\n", "\r\n", "\r", "\n\r"):
        data = sep.join(lines).encode() + sep.encode()
        assert [f for f in distributions._record_files("", data) if f] == _general_record_files("", data)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet="aB/\\\x00İß_.", max_size=8), max_size=10))
def test_keys_are_key_of_each(paths):
    assert distributions._keys(paths) == [distributions._key(p) for p in paths]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "A", "b", "a.b", "a-b"]), st.sampled_from(["x", "y"]),
                          st.frozensets(st.sampled_from(["p/x", "P/X", "/p/x", "q\\y", "q/y", "r"]), max_size=4)),
                max_size=5),
       st.lists(st.sampled_from(["p/x", "P/x", "/P/X", "q/y", "q\\Y", "r", "s"]), max_size=6))
def test_owners_are_the_first_distribution_of_each_path(specs, asked):
    """What a map of every listed file (the one before owners_of) says of each path asked about."""
    dists = [Distribution(name, "1", info, files) for name, info, files in specs]
    every: dict[str, str] = {}
    for dist in sorted(dists, key=lambda d: (d.canonical_name, d.dist_info)):
        for path in dist.files:
            every.setdefault(distributions._key(path), dist.name)
    expected = {path: every[distributions._key(path)] for path in asked if distributions._key(path) in every}
    assert owners_of(dists, asked) == expected


# ---------------------------------------------------------------------------
# owners in a scan
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("with_wheel", [False, True])
def test_a_scan_looks_up_the_owners_of_every_binary_once_after_reading(tmp_path, monkeypatch, with_wheel):
    """Once everything is read (archive members too), one lookup says which distribution lists each binary,
    in one process or with workers."""
    from conftest import FIXTURES

    from cuda4amd.scan import pipeline

    dll = (FIXTURES / "pe" / "plain.dll").read_bytes()
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("")
    site = venv / "Lib" / "site-packages"
    install(site, "a", "1.0", {"a/one.dll": dll, "a/two.dll": dll + b"\0"})
    install(site, "b", "2.0", {"b/three.dll": dll + b"\0\0"})
    (site / "loose").mkdir()
    (site / "loose" / "four.dll").write_bytes(dll + b"\0\0\0")
    if with_wheel:
        with zipfile.ZipFile(site / "c-3.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr("c/five.dll", dll)
            wheel.writestr("c-3.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: c\nVersion: 3.0\n")
            wheel.writestr("c-3.0.dist-info/RECORD", "c/five.dll,,\n")
    asked: list[list[str]] = []
    lookup = pipeline.owners_of

    def owners_of(dists, paths):
        asked.append(list(paths))
        return lookup(dists, paths)

    monkeypatch.setattr(pipeline, "owners_of", owners_of)

    def owners(jobs: int) -> dict[str, str | None]:
        asked.clear()
        result = pipeline.run_scan(pipeline.ScanOptions(target=str(venv), host="none", jobs=jobs))
        return {b.path: b.distribution for b in result.binaries}

    prefix = "Lib/site-packages/"
    expected = {prefix + "a/one.dll": "a", prefix + "a/two.dll": "a", prefix + "b/three.dll": "b",
                prefix + "loose/four.dll": None}
    if with_wheel:
        expected[prefix + "c-3.0-py3-none-any.whl/c/five.dll"] = "c"
    for jobs in (2, 1):
        assert owners(jobs) == expected
        assert len(asked) == 1 and sorted(asked[0]) == sorted(expected)
