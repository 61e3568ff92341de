"""Progress bars that also write plain lines to a log: rich's bars in a terminal, periodic text lines elsewhere.

rich draws nothing while stdout is not a terminal (``make demo | tee log``, CI, ``nohup``), so a long stage was
silent there for minutes. :class:`Progress` is rich's :class:`rich.progress.Progress` that, when its console is
not a terminal, prints one line per task when the task starts, at most every :data:`PLAIN_EVERY_SECONDS` while it
runs, and when it finishes::

    sft: 120/2400, loss 1.234, 31s elapsed
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import rich.progress

PLAIN_EVERY_SECONDS = 30.0
"""Seconds between two plain progress lines of one task (outside a terminal)."""

T = TypeVar("T")


class Progress(rich.progress.Progress):
    """rich's progress display, with plain progress lines when the console is not a terminal (see the module)."""

    def __init__(self, *columns: Any, **kwargs: Any):
        super().__init__(*columns, **kwargs)
        self._last_line: dict[rich.progress.TaskID, float] = {}

    @property
    def plain(self) -> bool:
        """Whether progress goes out as plain lines (an enabled display on a console that is not a terminal)."""
        return not self.disable and not self.console.is_terminal

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> rich.progress.TaskID:
        """Rich's ``add_task``; prints the task's first line."""
        task_id = super().add_task(description, *args, **kwargs)
        self._report(task_id, force=True)
        return task_id

    def update(self, task_id: rich.progress.TaskID, **kwargs: Any) -> None:
        """Rich's ``update``; prints a line when the last one is old enough or the task has finished."""
        super().update(task_id, **kwargs)
        self._report(task_id)

    def advance(self, task_id: rich.progress.TaskID, advance: float = 1) -> None:
        """Rich's ``advance``; prints a line when the last one is old enough or the task has finished."""
        super().advance(task_id, advance)
        self._report(task_id)

    def _report(self, task_id: rich.progress.TaskID, force: bool = False) -> None:
        if not self.plain:
            return
        now, task = time.monotonic(), self._tasks[task_id]
        last = self._last_line.get(task_id)
        if last == float("inf") or not (force or task.finished or last is None or now - last >= PLAIN_EVERY_SECONDS):
            return  # the finished line is printed once
        self._last_line[task_id] = float("inf") if task.finished else now
        total = f"/{task.total:.0f}" if task.total is not None else ""
        info = task.fields.get("info")
        line = f"{task.description}: {task.completed:.0f}{total}{', ' + info if info else ''}, "
        line += f"{task.elapsed or 0:.0f}s elapsed"
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)


def track(sequence: Iterable[T], description: str, **kwargs: Any) -> Iterator[T]:
    """Rich's :func:`rich.progress.track` with :class:`Progress`: iterate and show (or log) the progress.

    ``kwargs`` go to :class:`Progress` (e.g. ``transient=True``).
    """
    with Progress(**kwargs) as progress:
        yield from progress.track(sequence, description=description)
