"""The tree walk begun in a forked child while the command line's start-up goes on.

`cuda4amd scan` spends 0.07-0.15 s importing the pipeline, loading the
rules and setting the scan up before it walks the tree, on one core; the
walk is another serial part of every scan (0.09 s for the 13,079 files of a
real Windows site-packages on 2 cores, where it runs in one process; 0.13-0.26 s
for the 68,937 files of a 16-core device's venv, split over 16 workers).
Where processes fork (:func:`cuda4amd.scan.workers.forks`: POSIX, and no
other thread yet) and the scan may use two processes or more (not ``--jobs
1``, not one usable core), the command forks a child first, which walks the
target exactly as the scan would (:func:`cuda4amd.scan.discover.discover`,
same target, ``follow_links`` and ``jobs``: one process's walk on fewer
than four usable cores, else a walk split over worker processes that the
child forks for it) and sends its Discovery back through a pipe (pickle:
our own child, the way the worker processes send theirs); the scan takes
that instead of walking (docs/performance.md). Finding the child still
walking (:meth:`WalkAhead.walking`), the scan first makes what needs no walk
(the host, the distributions, the release tables:
:func:`cuda4amd.scan.pipeline.run_scan`), which a re-scan, reading no file,
would otherwise make after it.

The child's Discovery is the one the scan would have made: the same
function over the same tree, a moment earlier. Anything else — no fork,
a target that is not a folder tree, a child that fails or dies, a broken
pipe, a walk of another target — and the scan walks in its own process as
it always did. The child leads a process group of its own, which its walk
workers join: a walk never taken (the scan stopped first, Ctrl-C among the
reasons) is ended by killing that group, so no worker of it is left
waiting for work from a child that is gone, and the child is reaped.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
from dataclasses import dataclass

from cuda4amd.scan import discover as discovery
from cuda4amd.scan.workers import forks, usable_cores

#: the targets a walk-ahead takes: those that discover() walks as a tree (a file's folder is found later)
TREE_KINDS = frozenset({"folder", "site-packages", "venv"})


@dataclass
class WalkAhead:
    """A walk running in a forked child: :meth:`take` its result, or :meth:`close` it."""

    pid: int
    pipe: int  # the read end: the child writes its Discovery there and exits
    walked: discovery.Target
    follow_links: bool
    jobs: int | None

    @classmethod
    def start(cls, target: str, *, follow_links: bool, jobs: int | None) -> WalkAhead | None:
        """The walk of ``target`` begun in a child, or None where it is not begun (the scan walks itself):
        ``--jobs 1`` asks for one process, and one usable core would only share itself."""
        if (jobs if jobs is not None else usable_cores()) < 2 or not forks():
            return None
        try:
            walked = discovery.resolve_target(target)
        except (discovery.TargetError, OSError, ValueError):
            return None  # the scan reports it, as before
        if walked.kind not in TREE_KINDS:
            return None
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:
            os.close(read_end)
            _walk_in_child(write_end, walked, follow_links, jobs)
        os.close(write_end)
        _own_group(pid)  # here as well as in the child: whichever runs first, close() finds the group
        return cls(pid, read_end, walked, follow_links, jobs)

    def walking(self) -> bool:
        """Whether the child is still walking: its pipe has neither data nor its end yet (a poll, no wait)."""
        if self.pipe < 0:
            return False
        try:
            ready, _, _ = select.select([self.pipe], [], [], 0)
        except (OSError, ValueError):
            return False
        return not ready

    def take(self, walked: discovery.Target, follow_links: bool, jobs: int | None) -> discovery.Discovery | None:
        """The child's Discovery if it walked ``walked`` as asked, else None; either way the child's group
        is ended and the child reaped."""
        if self.pipe < 0:
            return None
        try:
            with os.fdopen(self.pipe, "rb") as pipe:
                data = pipe.read()
        except OSError:
            data = b""
        finally:
            self.pipe = -1
            # a child that walked has shut its walkers down before writing; one that died mid-walk
            # (killed, say) may have left them waiting for work: the group goes either way
            self._end()
        if (walked, follow_links, jobs) != (self.walked, self.follow_links, self.jobs):
            return None
        try:
            found = pickle.loads(data)  # noqa: S301 - our own forked child's, through a pipe only we hold
        except Exception:  # noqa: BLE001 - the child failed or died mid-write: the scan walks itself
            return None
        return found if isinstance(found, discovery.Discovery) and found.target == walked else None

    def close(self) -> None:
        """End a walk that was not taken: the child and its walk workers are killed, the child reaped."""
        if self.pipe < 0:
            return
        os.close(self.pipe)
        self.pipe = -1
        self._end()

    def _end(self) -> None:
        """Kill the child's process group (the child alone where it has none) and reap the child. Not
        reaped before this, the child keeps its pid, which no other process can then have, nor its group."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            try:  # no group (setpgid refused): the child alone
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass  # it had finished
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass  # reaped already (a caller's SIGCHLD handler)

    def __enter__(self) -> WalkAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _own_group(pid: int) -> None:
    """Make ``pid`` lead a process group of its own (the walk workers it forks join it)."""
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child has exited already, or the system refuses: close() then kills the child alone


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass  # closed already


#: the most a walk asks its pipe to hold (Linux's default limit for a process without privileges,
#: /proc/sys/fs/pipe-max-size)
PIPE_BYTES = 1 << 20


def _widen(fd: int, size: int) -> None:
    """Let the pipe hold up to ``size`` bytes (at most PIPE_BYTES), where the system allows it (Linux's
    F_SETPIPE_SZ): fewer turns of the scan reading and the child writing than with 64 KiB at a time."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(size, PIPE_BYTES))
    except (ImportError, AttributeError, OSError):
        pass  # another system, or a size refused: the pipe as it is


def _walk_in_child(write_end: int, walked: discovery.Target, follow_links: bool, jobs: int | None) -> None:
    """The child's whole life: walk, write, exit (never return into the command, never run its exit handlers)."""
    status = 1
    try:
        _own_group(0)
        # The walkers this child forks must not hold the pipe's write end: where the child dies mid-walk
        # (killed, say), the scan's read then ends, rather than waiting for walkers that wait for work.
        os.register_at_fork(after_in_child=lambda: _close(write_end))
        # a signal ends the child at once, not by an exception into the command's code it was forked from
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        found = discovery.discover(walked, follow_links=follow_links, jobs=jobs)
        # Pickled whole before the first byte goes: dumped into the pipe, it was pickled while the scan
        # waited in take() (a 69k-file venv's walk: 31-40 ms of take, docs/performance.md), and the
        # scan's poll (walking) sees the walk as done only when all of it can be taken at once.
        data = pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL)
        _widen(write_end, len(data))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
        status = 0
    finally:
        os._exit(status)
