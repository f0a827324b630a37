"""Release sources, the per-user fix_cache, and downloads (against a loopback server only)."""
from __future__ import annotations

import dataclasses
import hashlib

import pytest
from test_fix_support import WIN_ZIP, ReleaseServer, fix_cache, sha256  # noqa: F401 - fix_cache is a fixture

from cuda4amd.fix.release import (
    ReleaseError,
    cache_dir,
    check_url,
    choose_source,
    download,
    fetch_archive,
    release_url,
)
from cuda4amd.rules.releases import Pin

BODY = bytes(range(256)) * 4096  # 1 MiB
BODY_SHA = hashlib.sha256(BODY).hexdigest()


def test_default_source_is_the_pinned_upstream_archive(rules, monkeypatch):
    monkeypatch.delenv("CUDA4AMD_ZLUDA_MIRROR", raising=False)
    source = choose_source(rules, "v6-preview.69", "windows")
    assert (source.kind, source.asset, source.size) == ("pin", "zluda-windows-87531d3.zip", 32944552)
    assert source.sha256 == "e2959ed17c8ddae6bf2bf76cf3a7348f577a2548754685d776389df2220e5d9a"
    assert source.location == ("https://github.com/vosen/ZLUDA/releases/download/v6-preview.69/"
                               "zluda-windows-87531d3.zip")


def test_unpinned_release_or_platform_asks_for_a_local_archive(rules):
    with pytest.raises(ReleaseError, match=r"no pinned ZLUDA v6 archive for windows.*--zluda PATH"):
        choose_source(rules, "v6", "windows")
    with pytest.raises(ReleaseError, match="for linux"):
        choose_source(rules, "v6-preview.69", "linux")


def test_local_archive_and_folder_sources(rules, tmp_path):
    src = choose_source(rules, "v6-preview.69", "windows", WIN_ZIP)
    assert (src.kind, src.asset, src.sha256) == ("archive", WIN_ZIP.name, None)
    path, digest = fetch_archive(src)
    assert digest == sha256(WIN_ZIP) and path == WIN_ZIP.resolve()
    good = choose_source(rules, "v6-preview.69", "windows", WIN_ZIP, sha256(WIN_ZIP).upper())
    assert fetch_archive(good)[1] == sha256(WIN_ZIP)
    bad = choose_source(rules, "v6-preview.69", "windows", WIN_ZIP, "0" * 64)
    with pytest.raises(ReleaseError, match=r"expected 0000.*refused"):
        fetch_archive(bad)
    with pytest.raises(ReleaseError, match="not a sha256"):
        choose_source(rules, "v6-preview.69", "windows", WIN_ZIP, "abc")
    with pytest.raises(ReleaseError, match="differs from the pin"):
        choose_source(rules, "v6-preview.69", "windows", None, "0" * 64)
    (tmp_path / "zluda").mkdir()
    assert choose_source(rules, "v6", "linux", tmp_path).kind == "folder"
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(ReleaseError, match="not a ZLUDA release archive"):
        choose_source(rules, "v6", "linux", tmp_path / "x.txt")
    with pytest.raises(ReleaseError, match="no such"):
        choose_source(rules, "v6", "linux", tmp_path / "missing.zip")


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA4AMD_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("CUDA4AMD_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "cuda4amd"


@pytest.mark.parametrize("url, ok", [
    ("https://github.com/vosen/ZLUDA/releases/download/v6/x.zip", True),
    ("http://127.0.0.1:8000/x.zip", True),
    ("http://127.5.6.7/x.zip", True),
    ("http://localhost/x.zip", True),
    ("http://[::1]:80/x.zip", True),
    ("http://github.com/x.zip", False),
    ("http://10.0.0.1/x.zip", False),
    ("ftp://127.0.0.1/x.zip", False),
    ("file:///etc/passwd", False),
])
def test_https_only_except_loopback(url, ok):
    if ok:
        check_url(url)
    else:
        with pytest.raises(ReleaseError, match="only https"):
            check_url(url)


def test_mirror_variable(monkeypatch):
    monkeypatch.setenv("CUDA4AMD_ZLUDA_MIRROR", "https://mirror.example/zluda/")
    assert release_url("v6", "a b.zip") == "https://mirror.example/zluda/v6/a%20b.zip"


def test_download_whole(tmp_path):
    with ReleaseServer({"/r.zip": BODY}) as server:
        seen = []
        dest = download(f"{server.url}/r.zip", tmp_path / "r.zip", sha256=BODY_SHA, size=len(BODY),
                        progress=lambda done, total: seen.append((done, total)))
    assert dest.read_bytes() == BODY
    assert seen[-1] == (len(BODY), len(BODY)) and not (tmp_path / "r.zip.part").exists()


def test_download_resumes_after_broken_connections(tmp_path):
    with ReleaseServer({"/r.zip": BODY}) as server:
        server.break_after["/r.zip"] = [300_000, 200_000]
        download(f"{server.url}/r.zip", tmp_path / "r.zip", sha256=BODY_SHA, size=len(BODY), backoff=0.01)
        ranges = [r["range"] for r in server.requests]
    assert (tmp_path / "r.zip").read_bytes() == BODY
    assert ranges == [None, "bytes=300000-", "bytes=500000-"]


def test_download_resumes_a_part_left_by_an_earlier_run(tmp_path):
    (tmp_path / "r.zip.part").write_bytes(BODY[:123_456])
    with ReleaseServer({"/r.zip": BODY}) as server:
        download(f"{server.url}/r.zip", tmp_path / "r.zip", sha256=BODY_SHA, size=len(BODY))
        assert [r["range"] for r in server.requests] == ["bytes=123456-"]
    assert (tmp_path / "r.zip").read_bytes() == BODY


def test_download_restarts_when_the_server_ignores_ranges(tmp_path):
    (tmp_path / "r.zip.part").write_bytes(BODY[:1000])
    with ReleaseServer({"/r.zip": BODY}) as server:
        server.ignore_range = True
        download(f"{server.url}/r.zip", tmp_path / "r.zip", sha256=BODY_SHA, size=len(BODY))
    assert (tmp_path / "r.zip").read_bytes() == BODY


def test_download_gives_up_after_bounded_attempts_and_keeps_the_part(tmp_path):
    with ReleaseServer({"/r.zip": BODY}) as server:
        server.break_after["/r.zip"] = [1000] * 10
        with pytest.raises(ReleaseError, match=r"after 3 attempts.*re-run resumes"):
            download(f"{server.url}/r.zip", tmp_path / "r.zip", sha256=BODY_SHA, size=len(BODY), attempts=3,
                     backoff=0.01)
        assert len(server.requests) == 3
    assert (tmp_path / "r.zip.part").stat().st_size == 3000


def test_download_with_a_wrong_hash_is_refused_and_deleted(tmp_path):
    with ReleaseServer({"/r.zip": BODY}) as server, pytest.raises(ReleaseError, match="refused and deleted"):
        download(f"{server.url}/r.zip", tmp_path / "r.zip", sha256="0" * 64, size=len(BODY))
    assert not (tmp_path / "r.zip").exists() and not (tmp_path / "r.zip.part").exists()


def test_download_missing_file(tmp_path):
    with ReleaseServer({}) as server, pytest.raises(ReleaseError, match="HTTP 404"):
        download(f"{server.url}/nope.zip", tmp_path / "n.zip", sha256=BODY_SHA)


def test_download_refuses_plain_http_before_connecting(tmp_path):
    with pytest.raises(ReleaseError, match="only https"):
        download("http://example.com/r.zip", tmp_path / "r.zip", sha256=BODY_SHA)


def test_pinned_archive_is_downloaded_into_the_cache_once(rules, fix_cache, monkeypatch):
    data = WIN_ZIP.read_bytes()
    pin = Pin("fixture", "v6-preview.69", "windows", "zluda-windows-87531d3.zip", len(data), sha256(WIN_ZIP))
    fixture_rules = dataclasses.replace(rules, pins=(pin,))
    with ReleaseServer({"/v6-preview.69/zluda-windows-87531d3.zip": data}) as server:
        monkeypatch.setenv("CUDA4AMD_ZLUDA_MIRROR", server.url)
        source = choose_source(fixture_rules, "v6-preview.69", "windows")
        assert fetch_archive(source, allow_download=False) is None
        path, digest = fetch_archive(source)
        assert digest == pin.sha256 and path.read_bytes() == data
        assert path == fix_cache / "zluda" / "archives" / pin.sha256 / pin.asset
        again, _ = fetch_archive(source, allow_download=False)
        assert again == path and len(server.requests) == 1
        path.write_bytes(b"tampered")  # a damaged fix_cache entry is fetched again
        fetch_archive(source)
        assert path.read_bytes() == data and len(server.requests) == 2
