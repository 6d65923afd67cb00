"""The automatic cleanup every ``cleanup_every`` commits, off the writer's path.

A commit that reaches a multiple of ``cleanup_every`` starts ``lake.cleanup()`` in a thread of its
own and returns at once: the write neither waits for the scan nor fails with it (a cleanup error is
logged and kept in ``error``). At most one runs per lake handle; a commit that finds one running
starts none. The thread is not a daemon, so a process ending waits for the run to finish instead of
killing it between two deletions (an interrupted run would only leave orphans, which the next removes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
LOG = logging.getLogger("rowops.cleanup")


class BackgroundRun(Generic[T]):
    """One call at a time of ``work`` in a background thread; the last result or error is kept."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._work = work
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.result: T | None = None
        self.error: BaseException | None = None

    def start(self) -> bool:
        """Start a run unless one is running; whether one was started."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            self._thread = threading.Thread(target=self._run, name="rowops-cleanup", daemon=False)
            self._thread.start()
            return True

    def _run(self) -> None:
        try:
            self.result, self.error = self._work(), None
        except Exception as exc:  # the commits have landed: a failed cleanup fails no write
            self.error = exc
            LOG.warning("rowops automatic cleanup failed (files stay until the next run): %s", exc)

    def wait(self, timeout: float | None = None) -> T | None:
        """Wait for the running (or last) run; its result (None if none ran, it failed or timed out)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                return None
        return self.result
