"""A rich progress bar on stderr for long scans."""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from cuda4amd.scan.pipeline import Progress as ScanProgress


class TerminalProgress(ScanProgress):
    def __init__(self) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),  # bytes read of the binaries' bytes: a wheel's one 1 GB library moves the bar
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> TerminalProgress:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.__exit__(*exc)

    def discovering(self) -> None:
        self._task = self._bar.add_task("finding binaries", total=None)

    def reading(self, total_bytes: int) -> None:
        if self._task is not None:
            self._bar.update(self._task, description="reading binaries", total=total_bytes, completed=0)

    def advance(self, read_bytes: int) -> None:
        if self._task is not None:
            self._bar.advance(self._task, read_bytes)


class DownloadBar:
    """rich.progress for a ZLUDA download (`progress(done, total)` callbacks of fix.release.download),
    on stderr; used as a context manager so the bar is closed however the fix ends."""

    def __init__(self) -> None:
        from rich.progress import TimeRemainingColumn, TransferSpeedColumn

        self._bar = Progress(
            TextColumn("  downloading"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> DownloadBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def __call__(self, done: int, total: int | None) -> None:
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task("download", total=total)
        self._bar.update(self._task, completed=done, total=total)
        if total is not None and done >= total:
            self._bar.stop()


def download_bar() -> AbstractContextManager[DownloadBar | None]:
    """A DownloadBar when stderr is a terminal, else a context that gives None (no bar)."""
    import sys
    from contextlib import nullcontext

    return DownloadBar() if sys.stderr.isatty() else nullcontext(None)
