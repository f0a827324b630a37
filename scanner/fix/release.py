"""Where a ZLUDA release comes from: a pin of the rules, or a local archive or folder.

    source = choose_source(rules, "v6-preview.69", "windows")          # the pinned upstream archive
    source = choose_source(rules, tag, "linux", zluda_path="z.tar.gz")  # a local archive (hash recorded)
    path = fetch_archive(source, progress=...)                           # download into the cache

Downloads use HTTPS with the system's certificate checks (``ssl.create_default_context``),
follow redirects only to HTTPS, resume an interrupted transfer with a ``Range``
request, and keep the partial file as ``<asset>.part`` in the per-user cache
until its size and sha256 match the pin; an archive whose hash does not match
is deleted and refused. Plain ``http://`` is accepted only for loopback hosts
(127.0.0.0/8, ::1, localhost): the tests serve fixture releases that way.

The per-user cache is ``$CUDA4AMD_CACHE``, else platformdirs' user cache
folder: ``%LOCALAPPDATA%\\cuda4amd`` on Windows, ``$XDG_CACHE_HOME/cuda4amd`` or
``~/.cache/cuda4amd`` on Linux, ``~/Library/Caches/cuda4amd`` on macOS.
``$CUDA4AMD_ZLUDA_MIRROR`` replaces the GitHub release URL prefix
(``<mirror>/<tag>/<asset>``), e.g. for a company mirror; hashes are checked
all the same.
"""
from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.client import HTTPException, HTTPMessage, HTTPResponse
from pathlib import Path
from typing import IO, TYPE_CHECKING

from cuda4amd.userdirs import cache_dir  # the cache folder, shared with the facts cache

if TYPE_CHECKING:
    from cuda4amd.rules.ruleset import RuleSet

__all__ = ["MIRROR_VARIABLE", "UPSTREAM_URL", "ReleaseError", "ReleaseSource", "cache_dir", "check_url",
           "choose_source", "download", "fetch_archive", "release_url", "sha256_file", "tree_sha256"]

UPSTREAM_URL = "https://github.com/vosen/ZLUDA/releases/download"
MIRROR_VARIABLE = "CUDA4AMD_ZLUDA_MIRROR"
CHUNK = 1 << 16

Progress = Callable[[int, int | None], None]


class ReleaseError(Exception):
    """The release cannot be had or cannot be trusted; the message says why."""


@dataclass(frozen=True)
class ReleaseSource:
    """Where the release's files come from.

    kind: "pin" (download `url` unless cached), "archive" (a local .zip /
    .tar.gz) or "folder" (an unpacked release: its `zluda/` folder or the
    folder holding it). `sha256` is the expected hash when known (a pin,
    `--sha256`); for local sources the hash actually found is recorded by
    `fetch_archive` / the store."""

    tag: str
    platform: str
    kind: str
    location: str  # URL for a pin, a path otherwise
    asset: str
    size: int | None = None
    sha256: str | None = None

    def to_dict(self) -> dict:
        return {"tag": self.tag, "platform": self.platform, "kind": self.kind, "location": self.location,
                "asset": self.asset, "size": self.size, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: dict) -> ReleaseSource:
        return cls(data["tag"], data["platform"], data["kind"], data["location"], data["asset"],
                   data.get("size"), data.get("sha256"))


def release_url(tag: str, asset: str) -> str:
    base = os.environ.get(MIRROR_VARIABLE, "").rstrip("/") or UPSTREAM_URL
    return f"{base}/{urllib.parse.quote(tag)}/{urllib.parse.quote(asset)}"


def _normal_sha(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    text = value.strip().lower()
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ReleaseError(f"{what}: not a sha256 (64 hex digits): {value!r}")
    return text


def choose_source(rules: RuleSet, tag: str, platform: str, zluda_path: str | os.PathLike[str] | None = None,
                  sha256: str | None = None) -> ReleaseSource:
    """The release to link: `zluda_path` (a local archive or folder) or the
    rules' pin for (tag, platform)."""
    expected = _normal_sha(sha256, "--sha256")
    if zluda_path is not None:
        path = Path(zluda_path).expanduser()
        if path.is_dir():
            return ReleaseSource(tag, platform, "folder", str(path.resolve()), path.name, None, expected)
        if path.is_file():
            name = path.name.lower()
            if not (name.endswith(".zip") or name.endswith(".tar.gz") or name.endswith(".tgz")):
                raise ReleaseError(f"{path}: not a ZLUDA release archive (.zip or .tar.gz) or folder")
            return ReleaseSource(tag, platform, "archive", str(path.resolve()), path.name,
                                 path.stat().st_size, expected)
        raise ReleaseError(f"{zluda_path}: no such ZLUDA archive or folder")
    pin = rules.pin_for(tag, platform)
    if pin is None:
        pinned = ", ".join(f"{p.tag} ({p.platform})" for p in rules.pins) or "none"
        raise ReleaseError(f"no pinned ZLUDA {tag} archive for {platform} (pinned: {pinned}); "
                           f"pass --zluda PATH with a release archive or folder (and --sha256 to check it)")
    if expected is not None and expected != pin.sha256:
        raise ReleaseError(f"--sha256 {expected} differs from the pin of {pin.asset} ({pin.sha256})")
    return ReleaseSource(tag, platform, "pin", release_url(tag, pin.asset), pin.asset, pin.size, pin.sha256)


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_sha256(files: dict[str, str], links: dict[str, str]) -> str:
    """One hash for an unpacked release: its sorted (path, file sha256 or link target) lines."""
    h = hashlib.sha256()
    for path in sorted(set(files) | set(links)):
        h.update(f"{path}\0{'file:' + files[path] if path in files else 'link:' + links[path]}\n".encode())
    return h.hexdigest()


def fetch_archive(source: ReleaseSource, *, progress: Progress | None = None, cache: Path | None = None,
                  allow_download: bool = True, attempts: int = 6, timeout: float = 60.0) -> tuple[Path, str] | None:
    """(archive path, its sha256) for an archive source; None when it is not
    on disk and `allow_download` is False. A pin's archive lives in
    ``<cache>/zluda/archives/<sha256>/<asset>``; a local archive is read where
    it is and checked against `source.sha256` when given."""
    if source.kind == "folder":
        raise ValueError("a folder source has no archive")
    if source.kind == "archive":
        path = Path(source.location)
        try:
            digest = sha256_file(path)
        except OSError as exc:
            raise ReleaseError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if source.sha256 is not None and digest != source.sha256:
            raise ReleaseError(f"{path}: sha256 is {digest}, expected {source.sha256}: refused")
        return path, digest
    assert source.sha256 is not None
    folder = (cache or cache_dir()) / "zluda" / "archives" / source.sha256
    dest = folder / source.asset
    if dest.is_file():
        if (source.size is None or dest.stat().st_size == source.size) and sha256_file(dest) == source.sha256:
            return dest, source.sha256
        dest.unlink()  # corrupted cache entry: fetch again
    if not allow_download:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    download(source.location, dest, sha256=source.sha256, size=source.size, progress=progress,
             attempts=attempts, timeout=timeout)
    return dest, source.sha256


# ---------------------------------------------------------------------------
# download
# ---------------------------------------------------------------------------

def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_url(url: str) -> None:
    """HTTPS only; plain HTTP only for loopback hosts (local test servers)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and _is_loopback(parts.hostname):
        return
    raise ReleaseError(f"refusing to download {url}: only https:// URLs are used "
                       f"(plain http:// only for loopback test servers)")


class _SafeRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: HTTPMessage, newurl: str) -> urllib.request.Request | None:
        check_url(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(url: str) -> urllib.request.OpenerDirector:
    import ssl

    handlers: list = [urllib.request.HTTPSHandler(context=ssl.create_default_context()), _SafeRedirect()]
    if _is_loopback(urllib.parse.urlsplit(url).hostname):
        handlers.append(urllib.request.ProxyHandler({}))  # a test server on this machine: never via a proxy
    return urllib.request.build_opener(*handlers)


_RETRYABLE = (urllib.error.URLError, ConnectionError, HTTPException, socket.timeout, TimeoutError)


def download(url: str, dest: str | os.PathLike[str], *, sha256: str, size: int | None = None,
             progress: Progress | None = None, attempts: int = 6, timeout: float = 60.0,
             backoff: float = 0.25) -> Path:
    """Download `url` to `dest`, resuming ``dest.part`` across broken
    connections (at most `attempts` connections), then check size and sha256.
    A mismatch deletes the partial file and raises ReleaseError."""
    check_url(url)
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    opener = _opener(url)
    last_error = "no attempt"
    for attempt in range(max(1, attempts)):
        have = _usable_part(part, size)
        if size is not None and have == size:
            break
        request = urllib.request.Request(url, headers={"User-Agent": "cuda4amd", "Accept-Encoding": "identity"})
        if have:
            request.add_header("Range", f"bytes={have}-")
        try:
            with opener.open(request, timeout=timeout) as response:
                if not _receive(response, url, part, have, size, progress):
                    continue  # the server resumed elsewhere: start over at once
            if size is None or part.stat().st_size >= size:
                break
            last_error = f"connection closed after {part.stat().st_size} of {size} bytes"
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # asked past the end: the partial file is suspect
                part.unlink(missing_ok=True)
                last_error = "HTTP 416"
                continue
            if exc.code in (404, 403, 401, 410):
                raise ReleaseError(f"{url}: HTTP {exc.code} {exc.reason}") from None
            last_error = f"HTTP {exc.code} {exc.reason}"
        except _RETRYABLE as exc:
            last_error = str(getattr(exc, "reason", exc)) or type(exc).__name__
        except OSError as exc:  # the cache cannot be written: no point retrying
            raise ReleaseError(f"cannot write {part}: {exc.strerror or exc}") from None
        if attempt + 1 < attempts:
            time.sleep(min(2.0, backoff * (attempt + 1)))
    else:
        raise ReleaseError(f"{url}: download failed after {attempts} attempts ({last_error}); "
                           f"the partial file {part} is kept and a re-run resumes it")
    _accept(part, dest, url, sha256, size, last_error)
    return dest


def _usable_part(part: Path, size: int | None) -> int:
    """The bytes of the partial file a transfer can resume from (one longer than the archive is deleted)."""
    have = part.stat().st_size if part.exists() else 0
    if size is not None and have > size:
        part.unlink()
        have = 0
    return have


def _receive(response: HTTPResponse, url: str, part: Path, have: int, size: int | None,
             progress: Progress | None) -> bool:
    """Write the response's body to `part`: appended to its `have` bytes for a
    206, in place of them for a 200. False (and `part` deleted) when a 206
    resumes at another offset than asked."""
    status = response.status
    total = size
    if status == 206:
        start = _range_start(response.headers.get("Content-Range"))
        if start != have:
            part.unlink(missing_ok=True)
            return False
    elif status == 200:
        have = 0
        length = response.headers.get("Content-Length")
        if total is None and length and length.isdigit():
            total = int(length)
    else:
        raise ReleaseError(f"{url}: HTTP {status}")
    with open(part, "ab" if have else "wb") as out:
        done = have
        if progress:
            progress(done, total)
        while True:
            block = response.read(CHUNK)
            if not block:
                break
            out.write(block)
            done += len(block)
            if progress:
                progress(done, total)
        out.flush()
        os.fsync(out.fileno())
    return True


def _accept(part: Path, dest: Path, url: str, sha256: str, size: int | None, last_error: str) -> None:
    """Move the complete download into place once its size and sha256 match; delete it on a wrong hash."""
    got_size = part.stat().st_size
    if size is not None and got_size != size:
        raise ReleaseError(f"{url}: download failed ({last_error}); got {got_size} of {size} bytes")
    digest = sha256_file(part)
    if digest != sha256:
        part.unlink(missing_ok=True)
        raise ReleaseError(f"{url}: sha256 is {digest}, expected {sha256}: the archive is refused and deleted")
    os.replace(part, dest)


def _range_start(value: str | None) -> int | None:
    # "bytes 100-199/200"
    if not value or not value.startswith("bytes "):
        return None
    span = value[6:].split("/", 1)[0]
    start = span.split("-", 1)[0]
    return int(start) if start.isdigit() else None
