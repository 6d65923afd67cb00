"""Iceberg v3 deletion vectors: ``deletion-vector-v1`` blobs in Puffin files (pure Python, no Spark).

A deletion vector (DV) is the set of deleted row positions of one data file, as a Roaring bitmap in
the portable 64-bit serialization (pyroaring's ``BitMap64.serialize``: an 8-byte little-endian count
of 32-bit bitmaps, then per bitmap its 4-byte little-endian key, the high 32 bits of the positions,
and the 32-bit portable Roaring serialization of the low bits). The blob frames it as the Iceberg
spec defines::

    length (4 bytes, big-endian: magic + vector) | magic D1 D3 39 64 | vector | CRC-32 of magic + vector (4 bytes, big-endian)

A Puffin file is ``PFA1`` magic, the blobs, then the footer: ``PFA1``, the footer payload (JSON, not
compressed: one blob metadata per DV, with ``referenced-data-file`` and ``cardinality`` properties,
``snapshot-id`` and ``sequence-number`` -1 as the spec requires), its length (4 bytes, little-endian),
4 flag bytes (0) and ``PFA1``. The manifest entry of a DV points at its blob by
``content_offset`` / ``content_size_in_bytes``, so readers read the blob alone, never the footer.

These functions run on executors (``exec/writing/deletion_vectors.py``) and in tests (pyiceberg's Puffin
reader is the oracle of these bytes).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.fs as pafs
from pyroaring import BitMap64

PUFFIN_MAGIC = b"PFA1"
DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
DV_BLOB_TYPE = "deletion-vector-v1"
ROW_POSITION_FIELD_ID = 2147483645  # Iceberg's _pos metadata column, the field a DV is about
REFERENCED_DATA_FILE = "referenced-data-file"
CARDINALITY = "cardinality"
MAX_POSITION = (2**31 - 1) * 2**32 + 2**32 - 1  # keys above 2^31 - 1 are rejected by Iceberg Java


class DeletionVectorFormatError(ValueError):
    """A blob that is not a well-formed ``deletion-vector-v1`` (length, magic or checksum)."""


@dataclass(frozen=True)
class BlobRef:
    """Where one DV sits in its Puffin file, and what it holds."""

    offset: int
    length: int
    cardinality: int
    referenced_data_file: str


def serialize_dv(positions: BitMap64) -> bytes:
    """The ``deletion-vector-v1`` blob of a set of row positions."""
    if len(positions) and positions.max() > MAX_POSITION:
        raise DeletionVectorFormatError(f"row position {positions.max()} exceeds Iceberg's DV range")
    positions.run_optimize()
    body = DV_MAGIC + positions.serialize()
    return len(body).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")


def deserialize_dv(blob: bytes) -> BitMap64:
    """The positions of a ``deletion-vector-v1`` blob; its length, magic and CRC-32 checked."""
    if len(blob) < 12:
        raise DeletionVectorFormatError(f"a deletion vector blob has at least 12 bytes, not {len(blob)}")
    length = int.from_bytes(blob[:4], "big")
    body = blob[4 : 4 + length]
    if length != len(blob) - 8 or body[:4] != DV_MAGIC:
        raise DeletionVectorFormatError("not a deletion-vector-v1 blob (length or magic bytes)")
    if zlib.crc32(body) != int.from_bytes(blob[4 + length :], "big"):
        raise DeletionVectorFormatError("deletion vector checksum mismatch")
    return BitMap64.deserialize(bytes(body[4:]))


def puffin_file(
    vectors: Sequence[tuple[str, BitMap64]], created_by: str = "rowops"
) -> tuple[bytes, list[BlobRef]]:
    """A Puffin file holding one DV blob per ``(referenced data file path, positions)``.

    Returns:
        The file's bytes and, per vector in order, where its blob is.
    """
    out = bytearray(PUFFIN_MAGIC)
    refs, blobs = [], []
    for path, positions in vectors:
        blob = serialize_dv(positions)
        ref = BlobRef(len(out), len(blob), len(positions), path)
        out += blob
        refs.append(ref)
        blobs.append(
            {
                "type": DV_BLOB_TYPE,
                "fields": [ROW_POSITION_FIELD_ID],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": ref.offset,
                "length": ref.length,
                "properties": {REFERENCED_DATA_FILE: path, CARDINALITY: str(ref.cardinality)},
            }
        )
    payload = json.dumps({"blobs": blobs, "properties": {"created-by": created_by}}).encode()
    out += PUFFIN_MAGIC + payload + len(payload).to_bytes(4, "little") + bytes(4) + PUFFIN_MAGIC
    return bytes(out), refs


def read_deletion_vector(fs: pafs.FileSystem, path: str, offset: int, length: int) -> BitMap64:
    """The positions of the DV blob at ``offset``/``length`` of the Puffin file at ``path`` on ``fs``
    (``meta.fileio.filesystem``: the lake's), read on the driver: a blob is small, metadata-like."""
    with fs.open_input_file(path) as f:
        return deserialize_dv(f.read_at(length, offset))
