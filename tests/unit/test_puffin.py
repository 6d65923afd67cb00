"""The deletion-vector Puffin writer (``rowops/meta/puffin.py``) against PyIceberg's Puffin reader."""

from __future__ import annotations

import zlib

import pyarrow.fs as pafs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.table.deletion_vector import DeletionVector, deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile
from pyroaring import BitMap64

from rowops.meta.puffin import (
    DV_MAGIC,
    DeletionVectorFormatError,
    deserialize_dv,
    puffin_file,
    read_deletion_vector,
)

# positions around the 2^32 boundaries of the 64-bit layout (one 32-bit bitmap per high key)
POSITIONS = st.sets(
    st.one_of(
        st.integers(0, 70_000),
        st.integers(2**32 - 3, 2**32 + 3),
        st.integers(5 * 2**32, 5 * 2**32 + 100_000),
    ),
    min_size=1,  # rowops never writes an empty vector (and PyIceberg cannot read one)
    max_size=300,
)


def _positions(dv: DeletionVector) -> list[int]:
    """PyIceberg's deserialized 32-bit bitmaps, one per high key, as positions (its ``to_vector``
    fails on a vector whose low keys are empty: an untyped empty Arrow chunk)."""
    return [(key << 32) + low for key, bitmap in enumerate(dv._bitmaps) for low in bitmap]


@settings(max_examples=60, deadline=None)
@given(st.lists(POSITIONS, min_size=1, max_size=4))
def test_pyiceberg_reads_the_vectors_written(sets: list[set[int]]) -> None:
    vectors = [(f"s3://b/t/data/f{i}.parquet", BitMap64(s)) for i, s in enumerate(sets)]
    data, refs = puffin_file(vectors)
    puffin = PuffinFile(data)
    read = deletion_vectors_from_puffin_file(puffin)
    assert [dv.referenced_data_file for dv in read] == [p for p, _ in vectors]
    assert [_positions(dv) for dv in read] == [sorted(s) for s in sets]
    for blob, ref, s in zip(puffin.footer.blobs, refs, sets, strict=True):
        assert blob.type == "deletion-vector-v1"
        assert (blob.offset, blob.length) == (ref.offset, ref.length)
        assert (blob.snapshot_id, blob.sequence_number, blob.compression_codec) == (-1, -1, None)
        assert blob.properties["cardinality"] == str(len(s)) == str(ref.cardinality)
        assert set(deserialize_dv(data[ref.offset : ref.offset + ref.length])) == s


def test_blob_framing_follows_the_spec(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data, (ref,) = puffin_file([("file:/t/a.parquet", BitMap64([3, 1, 2**32]))])
    assert data[:4] == data[-4:] == b"PFA1" and data[-8:-4] == bytes(4)
    blob = data[ref.offset : ref.offset + ref.length]
    length = int.from_bytes(blob[:4], "big")
    assert length == len(blob) - 8 and blob[4:8] == DV_MAGIC
    assert int.from_bytes(blob[-4:], "big") == zlib.crc32(blob[4:-4])
    assert blob[8:-4] == BitMap64([1, 3, 2**32]).serialize()
    path = tmp_path / "dv.puffin"
    path.write_bytes(data)
    assert list(read_deletion_vector(pafs.LocalFileSystem(), str(path), ref.offset, ref.length)) == [
        1,
        3,
        2**32,
    ]


def test_corrupt_blobs_are_rejected() -> None:
    data, (ref,) = puffin_file([("file:/t/a.parquet", BitMap64([7]))])
    blob = bytearray(data[ref.offset : ref.offset + ref.length])
    blob[-1] ^= 1
    with pytest.raises(DeletionVectorFormatError, match="checksum"):
        deserialize_dv(bytes(blob))
    with pytest.raises(DeletionVectorFormatError, match="magic"):
        deserialize_dv(bytes(12))
