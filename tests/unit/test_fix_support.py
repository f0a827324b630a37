"""Helpers for the fix tests (fixture releases, recorded hosts, snapshots, fault
injection, a loopback HTTP server), and checks of the fixture files themselves."""
from __future__ import annotations

import errno
import hashlib
import http.server
import os
import shutil
import stat
import tarfile
import threading
import time
from pathlib import Path

import pytest
from conftest import FIXTURES

from cuda4amd.fix.fileops import FileOps

ZLUDA = FIXTURES / "zluda"
TAG = "v6-preview.69"
WIN_ZIP = ZLUDA / TAG / "zluda-windows-87531d3.zip"
LINUX_TGZ = ZLUDA / TAG / "zluda-linux-87531d3.tar.gz"
HOSTILE = ZLUDA / "hostile"
WIN_HOST = ZLUDA / "hosts" / "windows-rx7900xtx-hipsdk64.json"
LINUX_HOST = ZLUDA / "hosts" / "linux-rx7900xtx-rocm641.json"
DEMO = FIXTURES / "demo" / "Tool"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------------
# trees
# ---------------------------------------------------------------------------

def demo_copy(tmp: Path) -> Path:
    dest = tmp / "apps" / "Tool"
    shutil.copytree(DEMO, dest)
    return dest


def linux_app(tmp: Path) -> Path:
    dest = tmp / "apps"
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(ZLUDA / "app-linux.tar.gz") as tar:
        tar.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(dest)
    return dest / "Tool"


_HASHES: dict[tuple, str] = {}


def snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple]:
    """Every entry under `root`: folders, links (target) and files (sha256,
    mode). File hashes are memoised on the full stat including ctime, which
    no user-space write can keep unchanged, so unchanged files cost a stat."""
    out: dict[str, tuple] = {}
    skip = tuple(Path(s) for s in skip)
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in skip]
        for name in dirs:
            p = here / name
            st = os.lstat(p)
            out[p.relative_to(root).as_posix()] = ("link", os.readlink(p)) if stat.S_ISLNK(st.st_mode) else ("dir",)
        for name in files:
            p = here / name
            if p in skip:
                continue
            st = os.lstat(p)
            rel = p.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
                continue
            key = (str(p), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            digest = _HASHES.get(key)
            if digest is None:
                digest = _HASHES[key] = sha256(p)
            out[rel] = ("file", digest, stat.S_IMODE(st.st_mode))
    return out


def changed(before: dict, after: dict) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


# ---------------------------------------------------------------------------
# fault injection
# ---------------------------------------------------------------------------

class Fault(Exception):
    """An unexpected exception in the middle of a step (a bug, a signal handler's raise)."""


class Crash(BaseException):
    """The process dies here: nothing in cuda4amd may catch this (power loss, kill -9)."""


class NoSyncOps(FileOps):
    """FileOps without fsync: the fault loops test what is on disk after each
    step, not durability across a power cut (the default FileOps is used elsewhere)."""

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        with open(path, "xb") as out:
            out.write(data)

    @staticmethod
    def _copy(src: Path, dst: Path) -> str:
        data = Path(src).read_bytes()
        with open(dst, "xb") as out:
            out.write(data)
        return hashlib.sha256(data).hexdigest()

    def sync_dir(self, path: Path) -> None:
        pass


class CountingOps(FileOps):
    def __init__(self) -> None:
        self.steps: list[tuple[str, str]] = []

    def step(self, op: str, path: Path) -> None:
        self.steps.append((op, str(path)))


class FaultyOps(NoSyncOps):
    """Fails at the `at`-th operation (1-based), once, in one of these ways:
    "exception", "crash", "disk-full" (a write stops half way with ENOSPC),
    "read-only" (EROFS), "locked" (EACCES/EBUSY as a running program's file)."""

    def __init__(self, at: int, how: str) -> None:
        self.at, self.how, self.n = at, how, 0
        self.fired: tuple[str, str] | None = None

    def _fire(self, op: str, path: Path) -> bool:
        self.n += 1
        if self.n != self.at:
            return False
        self.fired = (op, str(path))
        return True

    def _raise(self, op: str, path: Path) -> None:
        if self.how == "exception":
            raise Fault(f"injected at {op} {path}")
        if self.how == "crash":
            raise Crash(f"injected at {op} {path}")
        if self.how == "disk-full":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        if self.how == "read-only":
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        if self.how == "locked":
            raise PermissionError(errno.EACCES, "The process cannot access the file because it is being used "
                                                "by another process", str(path))
        raise AssertionError(self.how)

    def step(self, op: str, path: Path) -> None:
        if self._fire(op, path):
            self._raise(op, path)

    def write(self, path: Path, data: bytes) -> None:
        if self._fire("write", path):
            if self.how in ("disk-full", "crash"):  # half written, then the disk is full / the power goes
                with open(path, "wb") as out:
                    out.write(data[: len(data) // 2])
            self._raise("write", path)
        self._write(path, data)

    def copy(self, src: Path, dst: Path) -> str:
        if self._fire("copy", dst):
            if self.how in ("disk-full", "crash"):
                with open(src, "rb") as inp, open(dst, "wb") as out:
                    data = inp.read()
                    out.write(data[: len(data) // 2])
            self._raise("copy", dst)
        return self._copy(src, dst)


def count_steps(run) -> int:
    ops = CountingOps()
    run(ops)
    return len(ops.steps)


# ---------------------------------------------------------------------------
# a loopback HTTP server
# ---------------------------------------------------------------------------

class ReleaseServer:
    """Serves files on 127.0.0.1 with Range support and injectable trouble;
    stops by itself after `lifetime` seconds or `max_requests` requests."""

    def __init__(self, files: dict[str, bytes], lifetime: float = 60.0, max_requests: int = 50) -> None:
        self.files = files
        self.requests: list[dict] = []
        self.break_after: dict[str, list[int]] = {}   # path -> byte counts to cut successive responses at
        self.ignore_range = False
        self.max_requests = max_requests
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 10

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append({"path": self.path, "range": self.headers.get("Range")})
                if len(server.requests) > server.max_requests:
                    self.send_error(503)
                    threading.Thread(target=server.stop, daemon=True).start()
                    return
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng and not server.ignore_range and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                part = body[start:]
                self.send_header("Content-Length", str(len(part)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                cuts = server.break_after.get(self.path)
                if cuts:
                    cut = cuts.pop(0)
                    self.wfile.write(part[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(part)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.timer = threading.Timer(lifetime, self.stop)
        self.timer.daemon = True
        self._stopped = False

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ReleaseServer:
        self.thread.start()
        self.timer.start()
        return self

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self.httpd.shutdown()
            self.httpd.server_close()

    def __exit__(self, *exc) -> None:
        self.timer.cancel()
        self.stop()
        self.thread.join(timeout=5)


# ---------------------------------------------------------------------------
# checks of the fixture files
# ---------------------------------------------------------------------------

def test_fixture_sums_match():
    sums = (ZLUDA / "SHA256SUMS").read_text().splitlines()
    assert len(sums) >= 19
    for line in sums:
        digest, rel = line.split("  ", 1)
        assert sha256(ZLUDA / rel) == digest, rel


def test_fixture_release_has_the_table_files_and_exports(rules):
    import zipfile

    from cuda4amd.scan.read.engine import read_buffer

    release = rules.release(TAG)
    with zipfile.ZipFile(WIN_ZIP) as z:
        names = {n[len("zluda/"):] for n in z.namelist() if not n.endswith("/")}
        assert names == {f.path for f in release.files if f.platform == "windows"}
        for f in release.files:
            if f.platform != "windows" or not f.library:
                continue
            info = read_buffer(z.read("zluda/" + f.path), "fast")
            assert set(info.exports) == set(release.functions[f.library]), f.path
    with tarfile.open(LINUX_TGZ) as tar:
        members = {m.name[len("zluda/"):]: m for m in tar.getmembers() if m.name != "zluda" and not m.isdir()}
        assert set(members) == {f.path for f in release.files if f.platform == "linux"}
        for f in release.files:
            if f.platform == "linux" and f.link_to:
                m = members[f.path]
                assert m.issym() and os.path.normpath(os.path.join(os.path.dirname(f.path), m.linkname)) == f.link_to


def test_no_loose_binaries_under_fixtures_zluda():
    """The reader tests walk fixtures/ for PE/ELF files; the fix fixtures stay packed."""
    from cuda4amd.scan.read.engine import sniff_file

    for p in ZLUDA.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                assert sniff_file(f) is None, p


def test_server_stops_by_itself():
    with ReleaseServer({"/x": b"abc"}, lifetime=0.3) as server:
        time.sleep(0.6)
        assert server._stopped


@pytest.fixture
def fix_cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("CUDA4AMD_CACHE", str(path))
    return path
