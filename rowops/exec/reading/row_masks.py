"""Deleted rows of one data file as 64-bit masks of its 64-row blocks: pure numpy.

A file's masks take one long per block holding a deletion, however many rows of it are deleted: the
driver keeps them per delete file (``delete_positions.py``) and a read only shifts and concatenates
them (``block_masks.py``), in time linear in blocks rather than positions. Ten SF 10 Case 3 batches
leave 18 million positions; unioning and sorting them again on every read took 10-15 s.

>>> m = masks_of(np.array([0, 3, 64, 3]))
>>> m.blocks.tolist(), [hex(b) for b in m.bits.view(np.uint64).tolist()], m.count()
([0, 1], ['0x9', '0x1'], 3)
>>> positions_of(combined([m, masks_of(np.array([1, 200]))])).tolist()
[0, 1, 3, 64, 200]
>>> positions_of(clipped(m, rows=4)).tolist()
[0, 3]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BLOCK_BITS = 6  # 64 rows a block: one long of mask
_ONE = np.uint64(1)


@dataclass(frozen=True)
class RowMasks:
    """``blocks``: ascending block numbers (a file's rows ``64 * b`` to ``64 * b + 63``) holding a
    deleted row; ``bits``: their masks as int64 (bit ``i``: row ``64 * b + i`` is deleted)."""

    blocks: np.ndarray
    bits: np.ndarray

    def __len__(self) -> int:
        return len(self.blocks)

    def count(self) -> int:
        """How many rows the masks delete (their set bits)."""
        return int(np.unpackbits(_bytes(self.bits)).sum())


EMPTY = RowMasks(np.empty(0, np.int64), np.empty(0, np.int64))


def masks_of(positions: np.ndarray) -> RowMasks:
    """The masks of deleted ``positions`` (any order, repeats allowed; negative ones ignored)."""
    rows = positions.astype(np.int64, copy=False)
    if len(rows) > 1 and not bool(np.all(rows[1:] > rows[:-1])):
        rows = np.unique(rows)
    rows = rows[np.searchsorted(rows, 0) :]
    return _reduced(rows >> BLOCK_BITS, np.left_shift(_ONE, (rows & 63).astype(np.uint64)))


def combined(parts: Sequence[RowMasks]) -> RowMasks:
    """The union of several files' masks of one data file."""
    parts = [p for p in parts if len(p)]
    if len(parts) <= 1:
        return parts[0] if parts else EMPTY
    blocks = np.concatenate([p.blocks for p in parts])
    order = np.argsort(blocks, kind="stable")
    return _reduced(blocks[order], np.concatenate([p.bits for p in parts]).view(np.uint64)[order])


def clipped(masks: RowMasks, rows: int) -> RowMasks:
    """``masks`` of a file of ``rows`` rows: blocks past its end dropped, bits past its last row cleared."""
    end = -(-rows >> BLOCK_BITS)
    if not len(masks) or masks.blocks[-1] < end - 1:
        return masks
    keep = int(np.searchsorted(masks.blocks, end))
    blocks, bits = masks.blocks[:keep], masks.bits[:keep].copy()
    tail = rows & 63
    if tail and keep and blocks[-1] == end - 1:
        bits[-1] &= (1 << tail) - 1
    nonzero = bits != 0
    return RowMasks(blocks[nonzero], bits[nonzero])


def positions_of(masks: RowMasks) -> np.ndarray:
    """The deleted positions, ascending."""
    bits = np.unpackbits(_bytes(masks.bits), bitorder="little").reshape(-1, 64)
    block, bit = np.nonzero(bits)
    return (masks.blocks[block] << BLOCK_BITS) + bit.astype(np.int64)


def _reduced(blocks: np.ndarray, bits: np.ndarray) -> RowMasks:
    """One mask per block of ``blocks`` (ascending, repeats adjacent): the OR of its ``bits`` (uint64)."""
    if not len(blocks):
        return EMPTY
    first = np.ones(len(blocks), bool)  # a block's first entry (np.diff with prepend: 0.3 s at 3 million)
    first[1:] = blocks[1:] != blocks[:-1]
    starts = np.flatnonzero(first)
    return RowMasks(blocks[starts], np.bitwise_or.reduceat(bits, starts).view(np.int64))


def _bytes(bits: np.ndarray) -> np.ndarray:
    """The masks' bytes, least significant first (bit ``i`` of a mask: bit ``i % 8`` of byte ``i // 8``)."""
    return bits.astype("<i8", copy=False).view(np.uint8)
