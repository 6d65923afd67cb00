"""The storage primitive the catalog relies on: put-if-absent of a complete file.

Local disks: the content is written to a private temporary file, then ``os.link``-ed to its final
name. ``link`` fails with ``EEXIST`` if the name is taken, and a reader never sees a partial file.
On object stores the same contract is ``PUT`` with ``If-None-Match: *``; on HDFS, rename.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


class AlreadyExists(Exception):
    """Raised by :func:`put_if_absent` when another writer created the file first."""


def put_if_absent(path: Path, content: bytes) -> None:
    """Create ``path`` with ``content`` atomically, or raise :class:`AlreadyExists`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as out:
        out.write(content)
        out.flush()
        os.fsync(out.fileno())
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise AlreadyExists(str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_hint(path: Path, content: bytes) -> None:
    """Best-effort overwrite of a hint file (atomic replace; losing a race is harmless)."""
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    tmp.write_bytes(content)
    os.replace(tmp, path)
