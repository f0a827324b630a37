"""Run the smoke probes, each in its own process with a time limit, and give
each exactly one status.

The probe itself says pass, unsupported (a safe refusal: the library answered
"not supported", or does not export the call, or could not be loaded) or
incorrect (an error status where the call should work, or a wrong result)
on its ``@result`` line (cuda4amd.evidence.probes.common). The runner decides
the rest:

* crash — the process ended without a result line, or ended by a signal or
  with a non-zero exit status even after one (a crash at exit is a crash);
* timeout — the time limit passed while the process was still using the CPU
  (a first run that compiles PTX looks like this: it works, slowly);
* hang — the time limit passed while the process waited for the GPU (its
  last step is a synchronising call: the tiny kernels the probes launch never
  take seconds, and CUDA's default is to spin-wait, so CPU use says nothing
  there), or it used no CPU in its last ``idle`` seconds (it waits on
  something that will not come). Where the CPU time cannot be read (not
  Linux), a process that printed no step in its last ``idle`` seconds counts
  as hung.

Only the standard library is imported, so `python -m cuda4amd.evidence`
runs on a machine that has nothing else (the NVIDIA evidence run).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["PROBES", "STATUSES", "Outcome", "classify", "probe_bootstrap", "probe_environment", "run_probe",
           "run_probes"]

STATUSES = ("pass", "unsupported", "incorrect", "timeout", "hang", "crash")
#: family id (as in rules/families.toml and the report) -> probe module in cuda4amd.evidence.probes
PROBES: dict[str, str] = {"driver_api": "driver", "blas": "blas", "blaslt": "blaslt", "sparse": "sparse",
                          "dnn": "dnn", "fft": "fft"}
ORDER = tuple(PROBES)
STDERR_TAIL = 2000
#: steps that wait for the GPU to finish (the probes' own synchronising calls, probes.common.Driver)
WAITS = frozenset({"cuCtxSynchronize", "cuMemcpyDtoH_v2", "cuStreamSynchronize"})
#: variables a probe keeps from the environment it is given: where programs, libraries and temporary files
#: are (PATH, LD_LIBRARY_PATH, Windows' system folders), the locale, and the GPU stacks' own switches; the
#: rest (PYTHON*, LD_PRELOAD, whatever else the caller's shell carries) is left out. Windows spells names
#: in any case, so names compare upper-cased.
KEPT_NAMES = frozenset({"PATH", "LD_LIBRARY_PATH", "LD_AUDIT", "HOME", "USERPROFILE", "TMPDIR", "TMP", "TEMP",
                        "LANG", "LC_ALL", "LC_CTYPE", "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC",
                        "PATHEXT", "LOCALAPPDATA", "APPDATA", "PROGRAMDATA", "PROGRAMFILES", "NUMBER_OF_PROCESSORS",
                        "PROCESSOR_ARCHITECTURE", "DISPLAY", "XDG_RUNTIME_DIR"})
KEPT_PREFIXES = ("CUDA_", "HIP_", "HSA_", "ROCR_", "ROCM_", "ROCBLAS_", "MIOPEN_", "AMD_", "GPU_", "ZLUDA_",
                 "NVIDIA_", "DRI_")


@dataclass
class Outcome:
    """What one probe run ended in."""

    family: str
    probe: str
    status: str
    detail: str
    loaded: bool = False
    step: str | None = None  # the last call the probe announced
    seconds: float = 0.0
    returncode: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    stderr: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        outcome = cls(**known)
        if outcome.status not in STATUSES:
            raise ValueError(f"unknown probe status {outcome.status!r}")
        return outcome


def classify(result: Mapping[str, Any] | None, returncode: int | None, *, killed: str | None) -> tuple[str, str]:
    """(status, detail) from the probe's result line, its exit and whether the runner killed it."""
    if killed is not None:
        return killed, ""
    if result is None:
        how = _exit_text(returncode)
        return "crash", f"ended ({how}) without a result"
    status = str(result.get("status"))
    if status not in ("pass", "unsupported", "incorrect"):
        return "crash", f"printed an unknown status {status!r}"
    if returncode != 0:
        return "crash", f"{status} ({result.get('detail', '')}), then it ended ({_exit_text(returncode)})"
    return status, str(result.get("detail", ""))


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    if os.name == "nt" and code >= 0xC0000000:
        return f"exception 0x{code:08X}"
    return f"exit status {code}"


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of `pid` (Linux /proc/PID/stat fields 14 and 15), None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    try:
        ticks = int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


def probe_environment(env: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a probe runs in: from `env`, the variables it needs (KEPT_NAMES, KEPT_PREFIXES) and
    those `env` sets differently from `base` (default os.environ: what the fix added), never PYTHON*.

    With the interpreter's -I this keeps the working folder and the caller's Python settings out of the
    probe (issue 31: an `argparse.py` in the folder the tool runs from ran in every probe)."""
    base = os.environ if base is None else base
    kept = {}
    for name, value in env.items():
        upper = name.upper()
        if upper.startswith("PYTHON"):
            continue
        if upper in KEPT_NAMES or upper.startswith(KEPT_PREFIXES) or base.get(name) != value:
            kept[name] = value
    kept["PYTHONUNBUFFERED"] = "1"
    return kept


def probe_bootstrap(module: str) -> str:
    """The -c program of a probe: this cuda4amd package, loaded from the folder it was imported from (an
    install, an editable checkout or PYTHONPATH, as the NVIDIA evidence run has it), then the probe module
    run as __main__. Under -I nothing else is on the path, so the probe never needs PYTHONPATH or the
    working folder, and a module planted in either is not imported."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return ("import importlib.util, runpy, sys\n"
            f"spec = importlib.util.spec_from_file_location('cuda4amd', {os.path.join(package, '__init__.py')!r}, "
            f"submodule_search_locations=[{package!r}])\n"
            "package = importlib.util.module_from_spec(spec)\n"
            "sys.modules['cuda4amd'] = package\n"
            "spec.loader.exec_module(package)\n"
            f"runpy.run_module('cuda4amd.evidence.probes.{module}', run_name='__main__', alter_sys=True)\n")


def run_probe(family: str, *, prefix: Sequence[str] = (), env: Mapping[str, str] | None = None,
              libraries: Sequence[str] = (), drivers: Sequence[str] = (), limit: float = 60.0,
              idle: float = 5.0, python: str | None = None) -> Outcome:
    """Run the probe of `family` as ``[*prefix, python, -I, -c, probe_bootstrap(module), --library ...]``,
    isolated: -I keeps the working folder, PYTHONPATH and the user's site-packages off its path, and the
    environment is probe_environment's."""
    module = PROBES[family]
    command = [*prefix, python or sys.executable, "-I", "-c", probe_bootstrap(module)]
    for name in libraries:
        command += ["--library", name]
    for name in drivers:
        command += ["--driver", name]
    started = time.monotonic()
    popen_env = probe_environment(env if env is not None else os.environ)
    extra: dict[str, Any] = {"start_new_session": True} if os.name != "nt" else \
        {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=popen_env, **extra)
    except OSError as exc:
        return Outcome(family, module, "crash", f"cannot start {command[0]}: {exc.strerror or exc}")
    lines: list[str] = []
    last_line = [time.monotonic()]
    errors: list[bytes] = []

    def read_out() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
            last_line[0] = time.monotonic()

    def read_err() -> None:
        assert proc.stderr is not None
        errors.append(proc.stderr.read())

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for t in readers:
        t.start()
    killed = _watch(proc, started, limit, idle, last_line)
    for t in readers:
        t.join(timeout=2.0)
    seconds = round(time.monotonic() - started, 3)
    result, step = _parse(lines)
    if killed == "timeout" and step in WAITS:
        killed = "hang"  # waiting for the GPU, perhaps spinning: the kernel never finished
    status, detail = classify(result, proc.returncode, killed=killed)
    if killed is not None:
        where = f" in {step}" if step else ""
        detail = (f"still working{where} after {limit:g} s (using the CPU): stopped" if killed == "timeout" else
                  f"waiting for the GPU{where} after {limit:g} s: stopped" if step in WAITS else
                  f"stuck{where}: no progress in the last {idle:g} s of {limit:g} s: stopped")
    stderr = b"".join(errors).decode("utf-8", "replace")[-STDERR_TAIL:]
    return Outcome(family=family, probe=module, status=status, detail=detail,
                   loaded=bool(result and result.get("loaded")), step=step, seconds=seconds,
                   returncode=proc.returncode, facts=dict(result.get("facts") or {}) if result else {}, stderr=stderr)


def _watch(proc: subprocess.Popen, started: float, limit: float, idle: float, last_line: list[float]) -> str | None:
    """Wait for `proc`; past `limit` kill it and say timeout or hang."""
    samples: list[tuple[float, float]] = []
    while True:
        try:
            proc.wait(timeout=0.2)
            return None
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        cpu = _cpu_seconds(proc.pid)
        if cpu is not None:
            samples.append((now, cpu))
        if now - started < limit:
            continue
        busy = _busy(samples, now, idle) if samples else now - last_line[0] < idle
        _kill(proc)
        return "timeout" if busy else "hang"


def _busy(samples: list[tuple[float, float]], now: float, idle: float) -> bool:
    """Did the CPU time grow within the last `idle` seconds?"""
    recent = [cpu for t, cpu in samples if t >= now - idle]
    before = [cpu for t, cpu in samples if t < now - idle]
    base = before[-1] if before else samples[0][1]
    return bool(recent) and recent[-1] - base > 0.05


def _kill(proc: subprocess.Popen) -> None:
    try:
        if os.name != "nt":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        pass
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


def _parse(lines: Sequence[str]) -> tuple[dict[str, Any] | None, str | None]:
    result: dict[str, Any] | None = None
    step = None
    for line in lines:
        if line.startswith("@step "):
            step = line[6:].strip()
        elif line.startswith("@result ") and result is None:
            try:
                value = json.loads(line[8:])
            except ValueError:
                continue
            if isinstance(value, dict):
                result = value
    return result, step


def run_probes(families: Sequence[str], *, names: Mapping[str, Sequence[str]] | None = None,
               prefix: Sequence[str] = (), env: Mapping[str, str] | None = None, limit: float = 60.0,
               idle: float = 5.0, python: str | None = None,
               progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Run the probes of `families` (driver first) one after the other.

    names: family -> library names to try (the driver's under "driver_api");
    without an entry a probe tries NVIDIA's usual names (probes.common.DEFAULT_NAMES).
    """
    names = names or {}
    wanted = [f for f in ORDER if f in set(families) | {"driver_api"}]
    outcomes = []
    for family in wanted:
        outcome = run_probe(family, prefix=prefix, env=env, libraries=() if family == "driver_api" else
                            names.get(family, ()), drivers=names.get("driver_api", ()), limit=limit, idle=idle,
                            python=python)
        outcomes.append(outcome)
        if progress:
            progress(outcome)
    return outcomes


if __name__ == "__main__":  # pragma: no cover - `python -m cuda4amd.evidence` is the entry point
    sys.exit("use: python -m cuda4amd.evidence")
