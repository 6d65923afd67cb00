"""One commit's attempts: the files each attempt stages, and what a failure may remove.

The states of a commit (``catalog/tables.py``'s docstring) decide it: nothing an attempt references
is removed once its put-if-absent was issued, unless the put certainly lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from pyiceberg.io import FileIO

from rowops.catalog.log import LakeLog, LakeVersion, TableEntry, VersionTaken
from rowops.errors import keep_files


class CommitListener(Protocol):
    """Told when a commit attempt starts referencing the caller's files and when it is known lost.

    ``exec/writing/write.py``'s ``Staging`` implements it: its data files are never discarded while a lake version that
    references them may exist.
    """

    def attempting(self) -> None: ...

    def lost(self) -> None: ...


class _NoListener:
    def attempting(self) -> None:
        pass

    def lost(self) -> None:
        pass


class AllListeners:
    """All staging areas of a transaction, told together about its commit attempts."""

    def __init__(self, listeners: list[CommitListener]) -> None:
        self.listeners = listeners

    def attempting(self) -> None:
        for listener in self.listeners:
            listener.attempting()

    def lost(self) -> None:
        for listener in self.listeners:
            listener.lost()


class Attempts:
    """The files of one commit's attempts, and what a failure may remove (see the module docstring).

    ``current`` are the metadata files of the prepared attempt; ``garbage`` those of attempts known
    lost or superseded by a rebase. Once ``commit`` has called the put-if-absent, nothing the attempt
    references is removed unless the put certainly lost; the listener learns the same.
    """

    def __init__(self, io: FileIO, listener: CommitListener | None) -> None:
        self.io = io
        self.listener = listener or _NoListener()
        self.current: list[str] = []
        self.garbage: list[str] = []
        self.in_flight = False
        self.landed = False

    def stage(self, path: str) -> str:
        """Track ``path`` before it is written (a half-written file is still ours to remove)."""
        self.current.append(path)
        return path

    def restage(self, files: Iterable[str]) -> None:
        """A new attempt is prepared: the previous one's files become garbage."""
        self.garbage += self.current
        self.current = list(files)

    def commit(
        self,
        log: LakeLog,
        latest: LakeVersion,
        tables: Mapping[str, TableEntry | None],
        txn: Mapping[str, Any],
    ) -> LakeVersion | None:
        """Try to take the next lake version; None when another writer took it (certainly lost)."""
        self.in_flight = True
        self.listener.attempting()
        try:
            version = log.commit(latest, tables, dict(txn))
        except VersionTaken:
            self.in_flight = False
            self.listener.lost()
            return None
        self.landed = True
        return version

    def remove_garbage(self) -> None:
        """Remove files of lost attempts; never raises (the commit has landed)."""
        remove_quietly(self.io, self.garbage)
        self.garbage = []

    def fail(self, exc: BaseException) -> None:
        """Clean up after ``exc``: everything when no attempt may have landed, else only garbage."""
        self.remove_garbage()
        if self.in_flight or self.landed:
            keep_files(exc)
        else:
            remove_quietly(self.io, self.current)


def remove_quietly(io: FileIO, paths: Iterable[str]) -> None:
    for path in paths:
        with contextlib.suppress(Exception):
            io.delete(path)


def discard(listener: CommitListener) -> None:
    """Remove a staging area's files unless a commit attempt may reference them."""
    discard = getattr(listener, "discard", None)
    if discard is not None:
        discard()
