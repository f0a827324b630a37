"""Ctrl-C and a closed pipe end every command with the status docs/exit-status.md gives them (130, 141),
one line and no traceback, wherever they come: while options are parsed and a command's modules are
imported, or while the command waits or writes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES

DEMO = FIXTURES / "demo" / "Tool"
READY = "import sys, cuda4amd.cli; sys.stderr.write('ready\\n'); sys.stderr.flush(); "


def started(code: str) -> subprocess.Popen[bytes]:
    """`code` in a new interpreter, once it has imported the command line (it says `ready`)."""
    process = subprocess.Popen([sys.executable, "-c", READY + code], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stderr is not None and process.stderr.readline() == b"ready\n"
    return process


def reading_stdin(pid: int) -> bool:
    """Whether the process is blocked in read(0, …): Linux's /proc/PID/syscall (proc(5)): the syscall
    number, then its arguments; 0 is read on x86-64 and its first argument the descriptor."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == "0" and fields[1] == "0x0"


def interrupted(process: subprocess.Popen[bytes]) -> tuple[int, bytes]:
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    return process.returncode, err


@pytest.mark.skipif(not Path("/proc/self/syscall").exists() or os.uname().machine != "x86_64",
                    reason="waits for the read through Linux's /proc/PID/syscall (x86-64 numbering)")
def test_ctrl_c_while_a_command_waits_exits_130():
    process = started("cuda4amd.cli.main(['report', '-'])")
    deadline = time.monotonic() + 60
    while not reading_stdin(process.pid):  # synchronised on the read itself, not on a sleep
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.01)
    status, err = interrupted(process)
    assert status == 130, err
    assert b"interrupted" in err and b"Traceback" not in err and b"Aborted" not in err


#: says `ready` when click, having parsed the group's options, opens the command's module to import it: from
#: then on the signal reaches cuda4amd's own handling, not the test's `-c` line (PEP 578's "open" audit event;
#: importlib.import_module raises no "import" event)
WHEN_THE_COMMAND_LOADS = ("import sys; sys.addaudithook(lambda event, args: event == 'open' and "
                          "isinstance(args[0], str) and 'scan.' in args[0].replace('\\\\', '/').rsplit('/cli/', 1)[-1] "
                          "and (sys.stderr.write('ready\\n'), sys.stderr.flush())); import cuda4amd.cli; ")


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.1, 0.2])
def test_ctrl_c_at_start_up_exits_130(delay):
    # while the command's modules are imported (the readers, rich) and its options parsed: click's own
    # handling would say `Aborted!` and exit 1 there
    process = subprocess.Popen([sys.executable, "-c", WHEN_THE_COMMAND_LOADS +
                                f"cuda4amd.cli.main(['scan', {str(DEMO)!r}, '--host', 'none'])"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stderr is not None and process.stderr.readline() == b"ready\n"
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    status = process.returncode
    said = err.replace(b"ready\n", b"").strip()  # the hook says `ready` again for each later open of scan.*
    if out.startswith(b"PARTIAL") and not said and status in (3, -signal.SIGINT):
        # a fast machine: the scan had said its verdict within `delay` (the signal came after, or at exit)
        pytest.skip(f"the scan ended within {delay} s, before the signal")
    assert status == 130, (out[:200], err)
    assert b"interrupted" in err and b"Traceback" not in err and b"Aborted" not in err


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_a_closed_pipe_exits_141_without_a_traceback(fmt):
    read, write = os.pipe()
    process = subprocess.Popen([sys.executable, "-m", "cuda4amd", "scan", str(DEMO), "-v", "--host", "none",
                                "--format", fmt], stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    os.close(read)  # the reader is gone before the first line (`| head -0`)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 141, err
    assert err == b""
