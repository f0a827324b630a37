"""What the host probes may touch, as four small interfaces.

Every probe of the machine goes through one of them, so detection is a pure
function of (environment, file system, command outputs, HIP runtime answers):

* ``Environment`` — platform, environment variables, OS description, and the
  private strings (home, user, host name) that reports must redact;
* ``FileSystem``  — existence, listings, small reads, marker search in a file;
* ``CommandRunner`` — ``which`` and ``run`` (hipInfo.exe, PowerShell, rocminfo, ...);
* ``HipRuntime``  — the driver's HIP runtime through ctypes (Windows).

Each has a real implementation (``OsEnvironment``, ``LocalFileSystem``,
``SystemCommands``, ``CtypesHipRuntime``) and a recorded double
(``RecordedEnvironment``, ``MountedFileSystem``, ``RecordedCommands``,
``RecordedHipRuntime``) that replays captured outputs in tests.
``Probes.real()`` bundles the real ones; paths are strings in the probed
platform's own syntax (``C:\\Program Files\\AMD\\ROCm\\6.4``, ``/opt/rocm``).
"""
from __future__ import annotations

import ntpath
import os
import posixpath
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from cuda4amd.model import PrivateStrings

__all__ = [
    "CommandResult",
    "CommandRunner",
    "CtypesHipRuntime",
    "Environment",
    "FileSystem",
    "HipDevice",
    "HipRuntime",
    "HipRuntimeResult",
    "LocalFileSystem",
    "MountedFileSystem",
    "OsEnvironment",
    "Probes",
    "RecordedCommands",
    "RecordedEnvironment",
    "RecordedHipRuntime",
    "SystemCommands",
    "current_platform",
    "pathmod",
]


def current_platform() -> str:
    return "windows" if sys.platform.startswith("win") else "linux"


def pathmod(platform: str) -> ModuleType:
    """The os.path flavour of a probed platform (ntpath or posixpath)."""
    return ntpath if platform == "windows" else posixpath


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CommandResult:
    """What a command printed. returncode -1 with `error` set: it could not run
    (not found, timed out, refused to start)."""

    returncode: int
    stdout: str = ""
    stderr: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.error


@runtime_checkable
class CommandRunner(Protocol):
    def which(self, name: str) -> str | None: ...

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> CommandResult: ...


class SystemCommands:
    """Runs real programs: no shell, a timeout, output decoded leniently."""

    def which(self, name: str) -> str | None:
        import shutil

        return shutil.which(name)

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> CommandResult:
        kwargs: dict[str, Any] = {}
        if sys.platform.startswith("win"):
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NO_WINDOW", 0)
        try:
            proc = subprocess.run(list(argv), capture_output=True, timeout=timeout, check=False,
                                  stdin=subprocess.DEVNULL, **kwargs)
        except FileNotFoundError:
            return CommandResult(-1, error="not found")
        except subprocess.TimeoutExpired:
            return CommandResult(-1, error=f"timed out after {timeout:g} s")
        except OSError as e:
            return CommandResult(-1, error=e.strerror or str(e))
        return CommandResult(proc.returncode, _decode(proc.stdout), _decode(proc.stderr))


def _decode(data: bytes) -> str:
    if data.startswith(b"\xff\xfe") or data.startswith(b"\xfe\xff"):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8", errors="replace")


def command_key(argv: Sequence[str]) -> str:
    """'C:\\...\\hipInfo.exe' -> 'hipinfo'; the key a RecordedCommands entry is found by."""
    base = re.split(r"[\\/]", argv[0])[-1].lower()
    return base[:-4] if base.endswith(".exe") else base


class RecordedCommands:
    """Replays captured outputs. `outputs` maps a program name ('hipinfo',
    'powershell', 'rocminfo' — lower case, no .exe) to its CommandResult (or
    the stdout text of a successful run). Programs not in the map are not on
    PATH. `calls` records what was run."""

    def __init__(self, outputs: Mapping[str, CommandResult | str] | None = None,
                 paths: Mapping[str, str] | None = None) -> None:
        self.outputs = {k.lower(): (v if isinstance(v, CommandResult) else CommandResult(0, v))
                        for k, v in (outputs or {}).items()}
        self.paths = dict(paths or {})
        self.calls: list[tuple[str, ...]] = []

    def which(self, name: str) -> str | None:
        key = command_key([name])
        if key in self.paths:
            return self.paths[key]
        return f"/recorded/{key}" if key in self.outputs else None

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> CommandResult:
        self.calls.append(tuple(argv))
        return self.outputs.get(command_key(argv), CommandResult(-1, error="not found"))


# ---------------------------------------------------------------------------
# file system
# ---------------------------------------------------------------------------

@runtime_checkable
class FileSystem(Protocol):
    def is_file(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]: ...

    def read_text(self, path: str, limit: int = 1 << 20) -> str | None: ...

    def size(self, path: str) -> int | None: ...

    def find_markers(self, path: str, markers: Sequence[bytes], limit: int = 256 << 20) -> set[bytes]: ...


class LocalFileSystem:
    """The machine's own files (errors read as 'absent')."""

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def read_text(self, path: str, limit: int = 1 << 20) -> str | None:
        try:
            with open(path, "rb") as f:
                return f.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return None

    def size(self, path: str) -> int | None:
        try:
            return os.stat(path).st_size
        except OSError:
            return None

    def find_markers(self, path: str, markers: Sequence[bytes], limit: int = 256 << 20) -> set[bytes]:
        return _find_markers(path, markers, limit)


def _find_markers(path: str | os.PathLike[str], markers: Sequence[bytes], limit: int) -> set[bytes]:
    """Which of `markers` occur (case-insensitively) in the first `limit` bytes."""
    wanted = {m.lower(): m for m in markers}
    found: set[bytes] = set()
    overlap = max((len(m) for m in markers), default=1) - 1
    tail = b""
    read = 0
    try:
        with open(path, "rb") as f:
            while read < limit and len(found) < len(wanted):
                chunk = f.read(min(1 << 20, limit - read))
                if not chunk:
                    break
                read += len(chunk)
                buf = (tail + chunk).lower()
                for low, orig in wanted.items():
                    if orig not in found and low in buf:
                        found.add(orig)
                tail = buf[-overlap:] if overlap else b""
    except OSError:
        return set()
    return found


class MountedFileSystem:
    """A file system made of real folders mounted at virtual paths, for tests:

        MountedFileSystem({"C:\\Program Files\\AMD\\ROCm": tmp / "rocm"}, platform="windows")
        MountedFileSystem({"/sys/class/kfd": tmp / "kfd", "/opt": tmp / "opt"})

    Windows virtual paths compare case-insensitively (names inside a mount are
    looked up case-insensitively too); anything outside the mounts is absent."""

    def __init__(self, mounts: Mapping[str, str | os.PathLike[str]], platform: str = "linux") -> None:
        self.platform = platform
        self._pm = pathmod(platform)
        self.mounts = sorted(((self._parts(k), Path(v)) for k, v in mounts.items()),
                             key=lambda kv: -len(kv[0]))

    def _parts(self, path: str) -> tuple[str, ...]:
        p = self._pm.normpath(path)
        if self.platform == "windows":
            p = p.replace("/", "\\")
            return tuple(x.casefold() for x in p.split("\\") if x)
        return tuple(x for x in p.split("/") if x)

    def _real(self, path: str) -> Path | None:
        parts = self._parts(path)
        raw = [x for x in re.split(r"[\\/]", self._pm.normpath(path)) if x]
        for prefix, root in self.mounts:
            if parts[: len(prefix)] == prefix:
                cur = root
                for name in raw[len(prefix):]:
                    nxt = cur / name
                    if self.platform == "windows" and not nxt.exists() and cur.is_dir():
                        match = [c for c in os.listdir(cur) if c.casefold() == name.casefold()]
                        nxt = cur / match[0] if match else nxt
                    cur = nxt
                return cur
        return None

    def is_file(self, path: str) -> bool:
        r = self._real(path)
        return bool(r and r.is_file())

    def is_dir(self, path: str) -> bool:
        r = self._real(path)
        if r is not None:
            return r.is_dir()
        parts = self._parts(path)  # a parent of a mount point exists too
        return any(len(prefix) > len(parts) and prefix[: len(parts)] == parts for prefix, _ in self.mounts)

    def listdir(self, path: str) -> list[str]:
        r = self._real(path)
        if r is not None:
            try:
                return sorted(os.listdir(r))
            except OSError:
                return []
        parts = self._parts(path)
        names = set()
        for prefix, _root in self.mounts:
            if len(prefix) > len(parts) and prefix[: len(parts)] == parts:
                names.add(prefix[len(parts)])
        return sorted(names)

    def read_text(self, path: str, limit: int = 1 << 20) -> str | None:
        r = self._real(path)
        try:
            return r.read_bytes()[:limit].decode("utf-8", errors="replace") if r else None
        except OSError:
            return None

    def size(self, path: str) -> int | None:
        r = self._real(path)
        try:
            return r.stat().st_size if r else None
        except OSError:
            return None

    def find_markers(self, path: str, markers: Sequence[bytes], limit: int = 256 << 20) -> set[bytes]:
        r = self._real(path)
        return _find_markers(r, markers, limit) if r else set()


# ---------------------------------------------------------------------------
# environment
# ---------------------------------------------------------------------------

@runtime_checkable
class Environment(Protocol):
    platform: str
    os_description: str

    def get(self, name: str) -> str | None: ...

    def names(self) -> list[str]: ...

    def private_strings(self) -> PrivateStrings: ...


class OsEnvironment:
    def __init__(self) -> None:
        self.platform = current_platform()
        import platform as _platform

        if self.platform == "windows":
            self.os_description = f"Windows {_platform.version()}".strip()
        else:
            self.os_description = f"{_platform.system()} {_platform.release()}".strip()

    def get(self, name: str) -> str | None:
        return os.environ.get(name)  # case-insensitive on Windows already

    def names(self) -> list[str]:
        return sorted(os.environ)

    def private_strings(self) -> PrivateStrings:
        from cuda4amd.report.redact import private_strings  # only when this machine is probed

        return private_strings()


class RecordedEnvironment:
    def __init__(self, platform: str, variables: Mapping[str, str] | None = None,
                 os_description: str = "", private: PrivateStrings | None = None) -> None:
        self.platform = platform
        self.os_description = os_description or ("Windows" if platform == "windows" else "Linux")
        self.variables = dict(variables or {})
        self._private = private or PrivateStrings()

    def get(self, name: str) -> str | None:
        if self.platform == "windows":
            for k, v in self.variables.items():
                if k.upper() == name.upper():
                    return v
            return None
        return self.variables.get(name)

    def names(self) -> list[str]:
        return sorted(self.variables)

    def private_strings(self) -> PrivateStrings:
        return self._private


# ---------------------------------------------------------------------------
# the driver's HIP runtime
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class HipDevice:
    name: str
    gcn_arch_name: str
    integrated: bool | None = None


@dataclass(frozen=True)
class HipRuntimeResult:
    """What loading the HIP runtime said. `library` None: none could be loaded."""

    library: str | None = None
    version: str | None = None
    devices: tuple[HipDevice, ...] = ()
    error: str = ""
    tried: tuple[str, ...] = ()


@runtime_checkable
class HipRuntime(Protocol):
    def probe(self) -> HipRuntimeResult: ...


#: runtime libraries of the AMD driver, newest first
WINDOWS_HIP_RUNTIMES = ("amdhip64_7.dll", "amdhip64_6.dll")


class CtypesHipRuntime:
    """Loads the driver's amdhip64_7.dll, then amdhip64_6.dll (Windows only)
    and asks it for the runtime version and each device's name and gcnArchName.

    hipDeviceProp_t differs between HIP versions, so the struct is not
    declared: hipGetDevicePropertiesR0600 (HIP >= 6) or hipGetDeviceProperties
    fill a large zeroed buffer, the name is its first field, and gcnArchName
    is the NUL-terminated 'gfx...' string found after it (see parse_props)."""

    BUFFER = 16384

    def __init__(self, names: Sequence[str] = WINDOWS_HIP_RUNTIMES, platform: str | None = None) -> None:
        self.names = tuple(names)
        self.platform = platform or current_platform()

    def probe(self) -> HipRuntimeResult:
        if self.platform != "windows":
            return HipRuntimeResult(error="the driver's HIP runtime is probed on Windows only")
        import ctypes

        errors = []
        first: HipRuntimeResult | None = None
        for name in self.names:
            try:
                lib = ctypes.WinDLL(name)  # type: ignore[attr-defined]
            except OSError as e:
                errors.append(f"{name}: {e.strerror or 'not found'}")
                continue
            try:
                result = self._query(lib, name)
            except Exception as e:  # a broken runtime must not break doctor
                result = HipRuntimeResult(library=name, error=f"{name}: {e}", tried=self.names)
            if result.devices:
                return result
            # e.g. HIP 7.1.1's amdhip64_7.dll enumerates no gfx1030 where amdhip64_6.dll does
            # (ROCm/hip#3899): try the older runtime before giving up
            first = first or result
            errors.append(result.error or f"{name}: no devices")
        if first is not None:
            return HipRuntimeResult(library=first.library, version=first.version, error="; ".join(errors),
                                    tried=self.names)
        return HipRuntimeResult(error="; ".join(errors), tried=self.names)

    def _query(self, lib: Any, name: str) -> HipRuntimeResult:
        import ctypes

        version = None
        ver = ctypes.c_int(0)
        if hasattr(lib, "hipRuntimeGetVersion") and lib.hipRuntimeGetVersion(ctypes.byref(ver)) == 0:
            version = format_hip_version(ver.value)
        count = ctypes.c_int(0)
        rc = lib.hipGetDeviceCount(ctypes.byref(count))
        if rc != 0:
            return HipRuntimeResult(library=name, version=version, error=f"hipGetDeviceCount returned {rc}",
                                    tried=self.names)
        getprops = getattr(lib, "hipGetDevicePropertiesR0600", None) or lib.hipGetDeviceProperties
        devices = []
        for i in range(count.value):
            buf = ctypes.create_string_buffer(self.BUFFER)
            if getprops(buf, ctypes.c_int(i)) != 0:
                continue
            dev = parse_props(buf.raw)
            if dev is not None:
                devices.append(dev)
        return HipRuntimeResult(library=name, version=version, devices=tuple(devices), tried=self.names)


def format_hip_version(value: int) -> str:
    """HIP_VERSION encoding major*10^7 + minor*10^5 + patch -> '6.2.41512'."""
    major, rest = divmod(value, 10_000_000)
    minor, patch = divmod(rest, 100_000)
    return f"{major}.{minor}.{patch}"


_GFX_IN_PROPS = re.compile(rb"gfx[0-9a-f]{3,4}(?::[a-z0-9]+[+-])*")


def parse_props(raw: bytes) -> HipDevice | None:
    """Name (first field, char[256]) and gcnArchName (a 'gfx...' C string at a
    256-byte-or-later offset) of a filled hipDeviceProp_t buffer."""
    name = raw[:256].split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()
    for m in _GFX_IN_PROPS.finditer(raw, 256):
        start, end = m.span()
        if raw[start - 1:start] == b"\0" and raw[end:end + 1] == b"\0":
            return HipDevice(name, m.group().decode())
    return HipDevice(name, "") if name else None


class RecordedHipRuntime:
    def __init__(self, result: HipRuntimeResult) -> None:
        self.result = result

    def probe(self) -> HipRuntimeResult:
        return self.result


# ---------------------------------------------------------------------------
# the bundle
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Probes:
    env: Environment
    fs: FileSystem
    commands: CommandRunner
    hip: HipRuntime

    @property
    def platform(self) -> str:
        return self.env.platform

    @classmethod
    def real(cls) -> Probes:
        return cls(OsEnvironment(), LocalFileSystem(), SystemCommands(), CtypesHipRuntime())


def split_path_list(value: str | None, platform: str) -> list[str]:
    if not value:
        return []
    sep = ";" if platform == "windows" else ":"
    return [p.strip().strip('"') for p in value.split(sep) if p.strip()]


def unique(items: Iterable[str], platform: str) -> list[str]:
    seen, out = set(), []
    for it in items:
        key = pathmod(platform).normcase(pathmod(platform).normpath(it))
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out
