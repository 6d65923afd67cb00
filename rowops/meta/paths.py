"""File path normalization between Spark, manifests and the local file system.

Manifests written by rowops hold plain absolute paths (``/lake/db/t/data/x.parquet``). Other writers
may record ``file:///x`` or ``file:/x``; Spark reports ``file:/x`` with URL-encoding. Everything is
compared in the plain form.

>>> normalize_path("file:///lake/t/a.parquet")
'/lake/t/a.parquet'
>>> normalize_path("file:/lake/t/a.parquet")
'/lake/t/a.parquet'
>>> normalize_path("/lake/t/a.parquet")
'/lake/t/a.parquet'
"""

from __future__ import annotations

import re

_FILE_SCHEME = re.compile(r"^file:(//)?(?=/)")


def normalize_path(path: str) -> str:
    """Strip a local ``file:`` scheme; other schemes are kept as they are."""
    return _FILE_SCHEME.sub("", path)
