"""What an operation's outcome depended on: the read set that serializable validation checks.

A MERGE on key columns depends on the target rows whose key equals a source key. Where the table's
partition follows from the key, those rows can only live in the partitions the source's keys fall
into, whether or not any file is there yet; otherwise they can live anywhere. Within that scope, a
row can match only if its key lies in the source's key range. A concurrent data file can therefore
change the outcome only if its partition is in scope and its key bounds overlap the range: that file
is a conflict under serializable isolation, and every other new file is not.

>>> rs = ReadSet.of_keys(("k",), {(3,): {"k": (10, 20)}}, spec_id=0, partition_follows_key=True)
>>> rs.may_hold(0, (3,), {"k": (15, 99)}), rs.may_hold(0, (3,), {"k": (21, 99)}), rs.may_hold(0, (4,), {})
(True, False, False)
>>> empty_partition = ReadSet.of_keys(("k",), {(7,): {"k": (5, 5)}}, spec_id=0, partition_follows_key=True)
>>> empty_partition.may_hold(0, (7,), {"k": (5, 5)})
True
>>> ReadSet.everything().may_hold(0, (1,), {})
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyiceberg.conversions import from_bytes
from pyiceberg.schema import Schema
from pyiceberg.types import PrimitiveType

from rowops.meta.files import LiveFile
from rowops.plan.pruning import Bounds, FileKeys, KeyRanges, may_match

Partition = tuple[object, ...]
ColumnBounds = Mapping[str, Bounds]


@dataclass(frozen=True)
class ReadSet:
    """Rows an operation read, as far as its outcome depends on them.

    Attributes:
        keys: names of the key columns whose bounds scope the read (empty: no key scoping).
        spec_id: the partition spec the partitions of ``by_partition`` belong to.
        by_partition: partition → key bounds of the rows read there; None when the read is not
            scoped by partition (then ``anywhere`` bounds apply to every partition).
        anywhere: key bounds of rows read in any partition; None with ``by_partition`` None means
            the whole table was read.
    """

    keys: tuple[str, ...] = ()
    spec_id: int = 0
    by_partition: Mapping[Partition, ColumnBounds] | None = None
    anywhere: ColumnBounds | None = field(default=None)

    @classmethod
    def everything(cls) -> ReadSet:
        """The whole table (UPDATE, DELETE, MERGE with a WHEN NOT MATCHED BY SOURCE clause, ...)."""
        return cls()

    @classmethod
    def of_keys(
        cls,
        keys: tuple[str, ...],
        ranges: Mapping[Partition, ColumnBounds],
        spec_id: int,
        partition_follows_key: bool,
    ) -> ReadSet:
        """The read of a MERGE on ``keys`` whose source keys span ``ranges`` (from the pre-scan).

        Args:
            ranges: per target partition the source touches, the bounds of each key column. When the
                partition does not follow from the key, every partition carries the same bounds.
            partition_follows_key: every partition field is a transform of a key column.
        """
        if partition_follows_key:
            return cls(keys, spec_id, dict(ranges))
        if not ranges:
            return cls.everything()  # no partition told us the source's bounds: stay conservative
        return cls(keys, spec_id, None, next(iter(ranges.values())))

    @property
    def is_everything(self) -> bool:
        return self.by_partition is None and self.anywhere is None

    def may_hold(self, spec_id: int, partition: Partition, bounds: ColumnBounds) -> bool:
        """Whether a data file of ``partition`` with key ``bounds`` may hold a row this operation read."""
        if self.is_everything:
            return True
        if self.by_partition is None:
            return may_match(FileKeys("", partition, bounds), KeyRanges({partition: self.anywhere or {}}))
        if spec_id != self.spec_id:
            return True  # another spec's partitions cannot be compared: conservative
        return may_match(FileKeys("", partition, bounds), KeyRanges(self.by_partition))

    def may_hold_file(self, file: LiveFile, schema: Schema) -> bool:
        """:meth:`may_hold` for a live data file, with its key bounds decoded from its manifest metrics."""
        if self.is_everything:
            return True
        return self.may_hold(file.spec_id, file.partition, key_bounds(file, self.keys, schema))


def key_bounds(file: LiveFile, keys: tuple[str, ...], schema: Schema) -> dict[str, Bounds]:
    """Decoded ``(lower, upper)`` of each key column from a data file's metrics (None if unknown)."""
    lower, upper = file.data_file.lower_bounds or {}, file.data_file.upper_bounds or {}
    bounds: dict[str, Bounds] = {}
    for name in keys:
        column = schema.find_field(name)
        lo, hi = lower.get(column.field_id), upper.get(column.field_id)
        if lo is None or hi is None or not isinstance(column.field_type, PrimitiveType):
            bounds[name] = None
        else:
            bounds[name] = (from_bytes(column.field_type, lo), from_bytes(column.field_type, hi))
    return bounds
