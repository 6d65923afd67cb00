"""Hadoop's qualified URI of a path, computed in Python (no JVM, so it works through Spark Connect).

Spark names a file in ``_metadata.file_path`` by ``new Path(uri).toUri()``: scheme and authority split
off, ``//`` collapsed, the path quoted and normalized by ``java.net.URI``. rowops needs that exact string
to match delete rows to data rows without rewriting every row's file name.

>>> qualified_uri("/lake/t/a b.parquet")
'file:/lake/t/a%20b.parquet'
>>> qualified_uri("s3://bucket/lake/t/x=1%/a.parquet")
's3a://bucket/lake/t/x=1%25/a.parquet'
>>> qualified_uri("/lake/./t//u/../a.parquet")
'file:/lake/t/a.parquet'
"""

from __future__ import annotations

import functools
import string
import unicodedata

from rowops.meta.paths import spark_uri

# java.net.URI's legal path characters: unreserved, punct, ";" and "/"; every other ASCII character is
# escaped (also "%": the multi-argument constructors always quote it); other characters stay as they
# are unless they are Unicode spaces or ISO controls, which are escaped as UTF-8.
_URI_PATH_CHARS = frozenset(string.ascii_letters + string.digits + "-_.!~*'()" + ":@&=+$," + ";/")


def _escape(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))


def _quote_path(path: str) -> str:
    """``path`` quoted as ``new java.net.URI(scheme, authority, path, null, null)`` quotes it."""
    out = []
    for char in path:
        if char < "\x80":
            out.append(char if char in _URI_PATH_CHARS else _escape(char))
        elif char <= "\x9f" or unicodedata.category(char) in ("Zs", "Zl", "Zp"):
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """``java.net.URI.normalize`` of an absolute path: redundant slashes, ``.`` segments and ``x/..``
    pairs removed."""
    kept: list[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "" and i > 0 and not last:
            continue
        if segment == "." and i > 0:
            if last:
                kept.append("")
        elif segment == ".." and i > 0 and kept and kept[-1] not in ("", ".."):
            kept.pop()
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/".join(kept) or "/"


@functools.lru_cache(maxsize=1 << 16)
def qualified_uri(path: str) -> str:
    """Hadoop's qualified URI of ``path`` (``new Path(spark_uri(path)).toUri()``, ``file:/`` as Spark lists
    local files): scheme and authority split off as Hadoop's ``Path(String)`` does, ``//`` collapsed and a
    trailing ``/`` dropped (``Path.normalizePath``), the path quoted and normalized by ``java.net.URI``."""
    text = spark_uri(path)  # never the session's fs.defaultFS
    colon, slash = text.find(":"), text.find("/")
    scheme, start = (text[:colon], colon + 1) if colon != -1 and (slash == -1 or colon < slash) else ("", 0)
    authority = ""
    if text.startswith("//", start) and len(text) - start > 2:
        end = text.find("/", start + 2)
        end = end if end > 0 else len(text)
        authority, start = "//" + text[start + 2 : end], end
    rest = text[start:].replace("//", "/")
    if len(rest) > 1 and rest.endswith("/"):
        rest = rest[:-1]
    prefix = f"{scheme}:" if scheme else ""
    return prefix + authority + _remove_dot_segments(_quote_path(rest))
