"""Reading an Iceberg snapshot with Spark: data files by field id, deletes applied.

Rows carry their identity as two hidden columns: ``_file`` (the data file as Spark names it, its
``_metadata.file_path``, e.g. ``file:/lake/t/a%20b.parquet``) and ``_pos`` (row position in that file,
``_metadata.row_index``). ``_file`` is Spark's string as is: turning it into the manifest's path on
every row cost more than the rest of a scan (measured 3.5 s vs 0.8 s on 2.9M rows), so the small sides
are translated instead: :func:`file_uris` maps manifest paths to Spark's names on the driver, and delete
rows get Spark's names by an expression (plain paths) or a join with that map (escaped paths).

Deletes follow Iceberg's sequence-number rules:
  * a position delete applies to rows of the file it names (it is always written after that file,
    so its data sequence number is >= the file's);
  * an equality delete applies to rows of data files with a strictly smaller data sequence number,
    matched null-safely on its equality columns, in its own partition (same spec and partition tuple)
    unless its spec is unpartitioned. Where the key determines the partition (every delete rowops
    writes) a key match implies a partition match and the join compares keys only; otherwise (tables
    written by other engines) rows and keys are tagged with a partition id and compared too. Data
    files no equality delete applies to skip the join, and only the deletes that apply to some
    joined file are read.

Which deletes apply to which files is looked up in one :class:`rowops.meta.delete_index.DeleteIndex`
per snapshot (linear in files and deletes, never their product).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, FixedType, PrimitiveType, StringType
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rowops.exec.deletion_vectors import deletion_vector_positions
from rowops.exec.listing import read_files, spark_name
from rowops.exec.stats import broadcast_cap
from rowops.exec.types import FIELD_ID_KEY, to_spark_schema, to_spark_type
from rowops.meta.defaults import initial_defaults, sql_literal
from rowops.meta.delete_index import DeleteIndex, delete_index
from rowops.meta.files import POSITION_DELETE_SCHEMA, LiveFile, TableFiles
from rowops.meta.paths import spark_uri
from rowops.meta.v3 import is_deletion_vector

FILE_COL, POS_COL = "_file", "_pos"
_SEQ, _DEL_SEQ, _PATH = "_seq", "_delete_seq", "_path"
_PART, _DEL_PART = "_part", "_delete_part"
_DEL_FILE, _DEL_POS = "_delete_file", "_delete_pos"
_VARIABLE = (StringType, BinaryType, FixedType)  # key types whose width the manifests do not tell
Partitions = dict[tuple[int, tuple[object, ...]], int]  # (spec id, partition tuple) -> small id


def file_uri(spark: SparkSession, path: str) -> str:
    """Spark's ``_metadata.file_path`` for the file at ``path`` (a manifest path): ``listing.spark_name``."""
    return spark_name(path)


def file_uris(spark: SparkSession, files: Iterable[LiveFile]) -> dict[str, str]:
    """``{LiveFile.path: Spark's name of the file}`` for ``files``."""
    return {f.path: file_uri(spark, f.path) for f in files}


def read_parquet(spark: SparkSession, schema: T.StructType, paths: Sequence[str]) -> DataFrame:
    """Read exactly the Parquet files at ``paths`` (keys) by Iceberg field id (no partition inference);
    Spark is given ``file:``/``s3a:`` URIs, whatever the session's default file system: the files by
    name, or from :data:`listing.MIN_FILES` files on their directories, files kept by name (``exec/listing.py``)."""
    reader = spark.read.schema(schema).option("recursiveFileLookup", "true")
    return read_files(spark, reader, paths)


def _empty(spark: SparkSession, schema: T.StructType) -> DataFrame:
    return spark.createDataFrame([], schema)


def read_as_stored(
    spark: SparkSession, schema: Schema, files: Sequence[LiveFile], extra: Sequence[Column] = ()
) -> DataFrame:
    """The columns of ``schema`` (then ``extra``) of ``files``, by field id.

    A widened column is read with the type each file stores it in (Spark's Parquet reader does not
    promote int to long, float to double or decimals across physical types) and cast: files are read
    in one group per stored type (and set of absent defaulted columns), the groups united. Columns a
    file lacks read as NULL, or as their ``initial-default`` (format v3; ``LiveFile.absent``, from the
    files' footers); renamed columns are found by their field id.
    """
    struct = to_spark_schema(schema)
    defaults = initial_defaults(schema)
    groups: dict[str, list[LiveFile]] = defaultdict(list)
    for f in files:
        groups[repr((_narrower(schema, f), sorted(f.absent & defaults.keys())))].append(f)
    parts = []
    for _, group in sorted(groups.items()):
        stored = dict(_narrower(schema, group[0]))
        absent = group[0].absent & defaults.keys()
        fields = [
            T.StructField(s.name, to_spark_type(stored[i]), s.nullable, s.metadata) if i in stored else s
            for s, i in ((s, s.metadata[FIELD_ID_KEY]) for s in struct.fields)
        ]
        df = read_parquet(spark, T.StructType(fields), [f.path for f in group])
        columns = [_column(s, schema, stored, absent, defaults) for s in struct.fields]
        parts.append(df.select(*columns, *extra))
    return functools.reduce(DataFrame.unionByName, parts)


def _column(
    s: T.StructField,
    schema: Schema,
    stored: dict[int, PrimitiveType],
    absent: frozenset[int],
    defaults: dict[int, Any],
) -> Column:
    """A column as read: cast from its stored type, or the initial-default of a column the files
    lack (format v3; NULL without one), else as is."""
    field_id = s.metadata[FIELD_ID_KEY]
    if field_id in absent:
        field = schema.find_field(field_id)
        return F.expr(sql_literal(field.field_type, defaults[field_id])).alias(s.name)
    if field_id in stored:
        return F.col(f"`{s.name}`").cast(s.dataType).alias(s.name)
    return F.col(f"`{s.name}`")


def _narrower(schema: Schema, f: LiveFile) -> list[tuple[int, PrimitiveType]]:
    """(field id, stored type) of the columns ``f`` stores in another type than ``schema`` reads."""
    wanted = {field.field_id: field.field_type for field in schema.fields}
    return [(i, t) for i, t in f.stored if i in wanted and wanted[i] != t]


def read_data_files(spark: SparkSession, schema: Schema, files: Sequence[LiveFile]) -> DataFrame:
    """Rows of the given data files with ``_file`` and ``_pos``; no deletes applied."""
    struct = to_spark_schema(schema)
    ids = T.StructType(
        [T.StructField(FILE_COL, T.StringType(), False), T.StructField(POS_COL, T.LongType(), False)]
    )
    if not files:
        return _empty(spark, T.StructType(struct.fields + ids.fields))
    extra = [F.col("_metadata.file_path").alias(FILE_COL), F.col("_metadata.row_index").alias(POS_COL)]
    return read_as_stored(spark, schema, files, extra)


def position_deletes(
    spark: SparkSession, deletes: Sequence[LiveFile], data_files: Sequence[LiveFile]
) -> DataFrame | None:
    """The ``(_file, _pos)`` pairs of ``deletes``, for anti-joins with rows of ``data_files``.

    Deletion vectors (v3) are read on executors from their Puffin files (``exec/deletion_vectors.py``),
    position delete files as Parquet.

    When every data file has a plain local path, Spark's name of a file is ``file:`` + path, computed
    per delete row; otherwise delete rows are joined with a table of Spark's names (measured about 2x
    slower on a read, as that join becomes a separate stage).
    """
    if not deletes or not data_files:
        return None
    vectors = [d for d in deletes if is_deletion_vector(d.data_file)]
    dv_rows = deletion_vector_positions(spark, vectors, data_files, FILE_COL, POS_COL)
    files = [d for d in deletes if not is_deletion_vector(d.data_file)]
    if not files:
        return dv_rows
    rows = _position_delete_files(spark, files, data_files)
    return rows if dv_rows is None else rows.unionByName(dv_rows)


def _position_delete_files(
    spark: SparkSession, deletes: Sequence[LiveFile], data_files: Sequence[LiveFile]
) -> DataFrame:
    """The ``(_file, _pos)`` pairs of position delete files (Parquet)."""
    uris = file_uris(spark, data_files)
    df = read_parquet(spark, to_spark_schema(POSITION_DELETE_SCHEMA), [f.path for f in deletes])
    key = F.regexp_replace(F.regexp_replace("file_path", r"^file:(//)?(?=/)", ""), r"^s3[an]?://", "s3://")
    rows = df.select(key.alias(_PATH), F.col("pos").alias(POS_COL))
    if all(uri == spark_uri(path) for path, uri in uris.items()):
        local = F.col(_PATH).startswith("/")
        name = F.when(local, F.concat(F.lit("file:"), F.col(_PATH))).otherwise(
            F.regexp_replace(_PATH, r"^s3://", "s3a://")
        )
        return rows.select(name.alias(FILE_COL), POS_COL)
    names = spark.createDataFrame(list(uris.items()), f"{_PATH} string, {FILE_COL} string")
    return rows.join(F.broadcast(names), _PATH, "inner").select(FILE_COL, POS_COL)


def _delete_keys(
    spark: SparkSession, schema: Schema, deletes: Sequence[LiveFile], partitions: Partitions | None = None
) -> list[tuple[list[str], DataFrame, list[bool]]]:
    """Per set of equality columns: their names, the keys (``_eq_<i>``) with ``_delete_seq``, and
    whether each column is required (never NULL).

    Delete files are read in groups of equal sequence number, each tagged with a literal; with
    ``partitions``, groups are also split by partition and tagged ``_delete_part`` (its id, -1 for a
    partition no data file has, NULL for a global delete).
    """
    by_ids: dict[tuple[int, ...], list[LiveFile]] = defaultdict(list)
    for f in deletes:
        by_ids[f.equality_ids].append(f)
    out = []
    for ids, group in by_ids.items():
        names = [schema.find_column_name(i) or "" for i in ids]
        keys = schema.select(*names)
        by_seq: dict[tuple[int, int | None], list[LiveFile]] = defaultdict(list)
        for f in group:
            part = None if partitions is None or f.is_global else partitions.get((f.spec_id, f.partition), -1)
            by_seq[(f.seq, part)].append(f)
        parts = [
            read_as_stored(spark, keys, files).select(
                *[F.col(f"`{n}`").alias(f"_eq_{i}") for i, n in enumerate(names)],
                F.lit(seq).alias(_DEL_SEQ),
                *([F.lit(part).cast("int").alias(_DEL_PART)] if partitions is not None else []),
            )
            for (seq, part), files in sorted(by_seq.items(), key=lambda kv: repr(kv[0]))
        ]
        required = [schema.find_field(n).required for n in names]
        key_rows = functools.reduce(DataFrame.unionByName, parts)
        key_rows = _broadcast_if_fits(spark, key_rows, _key_bytes(keys, group))
        out.append((names, key_rows, required))
    return out


def _broadcast_if_fits(spark: SparkSession, rows: DataFrame, size: int) -> DataFrame:
    """Delete rows, hinted for broadcast when their estimated in-memory ``size`` allows it.

    Delete sets are counted exactly by their manifests, while Spark sizes a join side by its files'
    compressed bytes and shuffles both sides above 10 MB: at SF 10, four micro-batches of keys
    (~10 MB of Parquet) turned every later read into a sort-merge join that shuffles the whole table
    (measured 1.5-1.7x slower than the broadcast already at SF 1). Above ``rowops.broadcast.max-bytes``
    (``exec/stats.py``) Spark decides.
    """
    return F.broadcast(rows) if size <= broadcast_cap(spark) else rows


def _key_bytes(keys: Schema, deletes: Sequence[LiveFile]) -> int:
    """A generous in-memory size of the keys of ``deletes``: 24 bytes per row plus 8 per key column,
    plus 8x the files' bytes when a key column has a variable width."""
    fixed = all(f.field_type.is_primitive and not isinstance(f.field_type, _VARIABLE) for f in keys.fields)
    size = sum(d.record_count for d in deletes) * (24 + 8 * len(keys.fields))
    return size + (0 if fixed else 8 * sum(d.size for d in deletes))


def _position_bytes(deletes: Sequence[LiveFile], data_files: Sequence[LiveFile]) -> int:
    """A generous in-memory size of position delete rows: the longest file name and a position each."""
    longest = max((len(spark_name(f.path).encode()) for f in data_files), default=0)
    return sum(d.record_count for d in deletes) * (32 + longest)


def _drop_deleted(
    rows: DataFrame,
    keys: list[tuple[list[str], DataFrame, list[bool]]],
    by_sequence_number: bool,
    by_partition: bool = False,
) -> DataFrame:
    """Anti-join ``rows`` with every key set; with ``_seq`` compared when ``by_sequence_number`` and
    the partition (``_part``; a NULL ``_delete_part`` is global) when ``by_partition``."""
    for names, key_rows, required in keys:
        cond = _key_match(rows, key_rows, names, required, by_sequence_number, by_partition)
        rows = rows.join(key_rows, cond, "left_anti")
    return rows


def _key_match(
    rows: DataFrame,
    key_rows: DataFrame,
    names: list[str],
    required: list[bool],
    by_sequence_number: bool,
    by_partition: bool = False,
) -> list[Column]:
    """The join condition of a row and an equality delete key that removes it."""
    cond = [
        rows[f"`{n}`"] == key_rows[f"_eq_{i}"]  # plain keys hash faster; NULL cannot occur
        if required[i]
        else rows[f"`{n}`"].eqNullSafe(key_rows[f"_eq_{i}"])
        for i, n in enumerate(names)
    ]
    if by_sequence_number:
        cond.append(rows[_SEQ] < key_rows[_DEL_SEQ])
    if by_partition:
        cond.append(key_rows[_DEL_PART].isNull() | (rows[_PART] == key_rows[_DEL_PART]))
    return cond


def equality_deleted_positions(
    spark: SparkSession, schema: Schema, index: DeleteIndex, files: Sequence[LiveFile]
) -> DataFrame | None:
    """The ``(_file, _pos)`` of the rows of ``files`` that live equality deletes remove (None: no
    equality delete applies to them), for a rewrite that drops rows by position.

    Only the key columns of those files are read; each row probes the keys once per set of equality
    columns (a left-semi join, the converse of the read's anti-join; a row several deletes remove may
    appear more than once). Deletes that need Iceberg's partition scoping
    (:func:`needs_partition_scope`) are not handled here: callers leave such files to a scan.
    """
    keyed = [f for f in files if index.equality_deletes_on(f)]
    if not keyed:
        return None
    deletes = index.equality_deletes_applying(keyed)
    assert not needs_partition_scope(keyed, deletes), "callers leave partition-scoped deletes to a scan"
    columns = sorted({schema.find_column_name(i) or "" for d in deletes for i in d.equality_ids})
    uris = file_uris(spark, keyed)
    seqs = spark.createDataFrame([(uris[f.path], f.seq) for f in keyed], f"{FILE_COL} string, {_SEQ} long")
    rows = read_data_files(spark, schema.select(*columns), keyed).join(F.broadcast(seqs), FILE_COL)
    parts = [
        rows.join(key_rows, _key_match(rows, key_rows, names, required, True), "left_semi")
        for names, key_rows, required in _delete_keys(spark, schema, deletes)
    ]
    return functools.reduce(DataFrame.unionByName, parts).select(FILE_COL, POS_COL)


def _apply_equality_deletes(
    spark: SparkSession,
    schema: Schema,
    files: Sequence[LiveFile],
    deletes: Sequence[LiveFile],
    ids: bool = True,
) -> DataFrame:
    """The rows of ``files`` (with ids when ``ids``) that no newer equality delete removes.

    Files older than every delete need no sequence numbers: every key applies. When newer files are
    read too, they get their file's data sequence number from a broadcast of one row per file, and
    "the delete is newer than the row's file" is the anti-join's residual condition; the older files
    then carry a number too, :func:`_opaque_seq`, so that both anti-joins have the same build side
    and Spark broadcasts the keys once (a join without the condition prunes the keys' sequence
    numbers, a plain literal lets the optimizer fold the condition into a filter on the keys: either
    way a second read and broadcast of every delete file). Each row probes the keys once.
    (Reading the newer files in groups of equal sequence number costs a scan and a join per group:
    measured slower after ten upserts.)
    """
    if needs_partition_scope(files, deletes):
        scoped = _apply_scoped_equality_deletes(spark, schema, files, deletes)
        return scoped if ids else scoped.drop(FILE_COL, POS_COL)
    keys = _delete_keys(spark, schema, deletes)
    first = min(d.seq for d in deletes)
    oldest = [f for f in files if f.seq < first]
    rest = [f for f in files if f.seq >= first]
    parts = []
    if oldest:  # without ids, no _metadata column is read (Spark would read all of its fields here)
        rows = read_data_files(spark, schema, oldest) if ids else read_as_stored(spark, schema, oldest)
        if rest:
            rows = rows.withColumn(_SEQ, _opaque_seq(first - 1, rows[f"`{keys[0][0][0]}`"]))
        parts.append(_drop_deleted(rows, keys, by_sequence_number=bool(rest)).drop(_SEQ))
    if rest:
        uris = file_uris(spark, rest)
        seqs = spark.createDataFrame([(uris[f.path], f.seq) for f in rest], f"{FILE_COL} string, {_SEQ} long")
        rows = read_data_files(spark, schema, rest).join(F.broadcast(seqs), FILE_COL)
        kept = _drop_deleted(rows, keys, by_sequence_number=True).drop(_SEQ)
        parts.append(kept if ids else kept.drop(FILE_COL, POS_COL))
    return functools.reduce(DataFrame.unionByName, parts)


def _opaque_seq(seq: int, column: Column) -> Column:
    """``seq`` as a long the optimizer cannot fold into a literal: ``seq + 0 * hash(column)``.

    Spark has no rule that simplifies ``0 * x``, so a condition on it stays a residual of the
    anti-join instead of becoming a filter on the keys (see :func:`_apply_equality_deletes`); the
    hash is never NULL, whatever the column holds.
    """
    return (F.lit(seq) + F.lit(0) * F.hash(column)).cast("long")


def needs_partition_scope(files: Sequence[LiveFile], deletes: Sequence[LiveFile]) -> bool:
    """Whether a key match can fall outside a delete file's partition: a partitioned delete whose key
    does not determine the partition, or data files of another partition spec."""
    specs = {f.spec_id for f in files}
    return any(
        not d.is_global and (not d.key_determines_partition() or bool(specs - {d.spec_id})) for d in deletes
    )


def _apply_scoped_equality_deletes(
    spark: SparkSession, schema: Schema, files: Sequence[LiveFile], deletes: Sequence[LiveFile]
) -> DataFrame:
    """Equality deletes applied by sequence number and partition (Iceberg's scoping rule).

    Each row gets its file's data sequence number and partition id from a broadcast of one row per
    file; delete keys carry their file's partition id (NULL: global), compared in the anti-join.
    """
    partitions: Partitions = {}
    for f in files:
        partitions.setdefault((f.spec_id, f.partition), len(partitions))
    uris = file_uris(spark, files)
    tags = spark.createDataFrame(
        [(uris[f.path], f.seq, partitions[(f.spec_id, f.partition)]) for f in files],
        f"{FILE_COL} string, {_SEQ} long, {_PART} int",
    )
    rows = read_data_files(spark, schema, files).join(F.broadcast(tags), FILE_COL)
    keys = _delete_keys(spark, schema, deletes, partitions)
    return _drop_deleted(rows, keys, by_sequence_number=True, by_partition=True).drop(_SEQ, _PART)


def scan(
    spark: SparkSession,
    schema: Schema,
    files: TableFiles,
    data_files: Sequence[LiveFile] | None = None,
    row_ids: bool = False,
) -> DataFrame:
    """The live rows of a snapshot (or of a subset of its data files), deletes applied.

    Data files no delete applies to are read plainly (``_file``/``_pos`` only when ``row_ids``) and
    never meet a join; the others go through the equality and position deletes that apply to them.

    Args:
        spark: the session.
        schema: the table schema to read with.
        files: the live files of the snapshot.
        data_files: restrict the scan to these data files (default: all).
        row_ids: keep the ``_file`` and ``_pos`` columns.
    """
    targets = list(files.data if data_files is None else data_files)
    index = delete_index(files)
    dirty = [f for f in targets if index.deletes_on(f)]
    touched = {f.path for f in dirty}
    clean = [f for f in targets if f.path not in touched]
    columns = [f"`{f.name}`" for f in schema.fields] + ([FILE_COL, POS_COL] if row_ids else [])
    parts = []
    if clean or not dirty:
        plain = (
            read_data_files(spark, schema, clean)
            if row_ids or not clean
            else read_as_stored(spark, schema, clean)
        )
        parts.append(plain.select(*columns))
    if dirty:
        parts.append(_deleted(spark, schema, index, dirty, row_ids).select(*columns))
    return functools.reduce(DataFrame.unionByName, parts)


def _deleted(
    spark: SparkSession, schema: Schema, index: DeleteIndex, dirty: Sequence[LiveFile], row_ids: bool
) -> DataFrame:
    """Rows of data files some delete applies to, those deletes applied; with ids when ``row_ids`` or
    position deletes need them."""
    pos_deletes = index.position_deletes_applying(dirty)
    ids = row_ids or bool(pos_deletes)
    keyed = [f for f in dirty if index.equality_deletes_on(f)]
    parts = []
    if keyed:  # only files some equality delete applies to are joined with (those) keys
        eq_deletes = index.equality_deletes_applying(keyed)
        parts.append(_apply_equality_deletes(spark, schema, keyed, eq_deletes, ids))
    unkeyed = [f for f in dirty if not index.equality_deletes_on(f)]
    if unkeyed:
        parts.append(read_data_files(spark, schema, unkeyed))
    rows = functools.reduce(DataFrame.unionByName, parts)
    pos = position_deletes(spark, pos_deletes, dirty)
    return (
        rows
        if pos is None
        else drop_positions(
            rows, _broadcast_if_fits(spark, pos, _position_bytes(pos_deletes, dirty)), len(dirty)
        )
    )


MAX_FILES_KEYED_BY_POSITION = 64


def drop_positions(rows: DataFrame, deletes: DataFrame, files: int) -> DataFrame:
    """``rows`` without the ``(_file, _pos)`` pairs of ``deletes`` (rows of ``files`` data files).

    With at most :data:`MAX_FILES_KEYED_BY_POSITION` files under deletes of any kind the anti-join hashes
    the row position alone (a long; a position matches at most one delete row per file) and compares
    the file names in its residual condition (``>=`` and ``<=``: an ``=`` would become a hash key
    again): on SF 1's 16 base files with one micro-batch of position deletes, 1.00 s against 1.22 s
    for hashing each row's (name, position) pair. With more files (ten micro-batches, 176 files) the
    chains of equal positions cost what the saved hashing does (2.24 s against 2.29 s) and hashing
    the name into the key was slower (2.42 s): the pair is hashed there.
    """
    if files > MAX_FILES_KEYED_BY_POSITION:
        return rows.join(deletes, [FILE_COL, POS_COL], "left_anti")
    deleted = deletes.select(F.col(FILE_COL).alias(_DEL_FILE), F.col(POS_COL).alias(_DEL_POS))
    cond = (
        (rows[POS_COL] == deleted[_DEL_POS])
        & (rows[FILE_COL] >= deleted[_DEL_FILE])
        & (rows[FILE_COL] <= deleted[_DEL_FILE])
    )
    return rows.join(deleted, cond, "left_anti")
