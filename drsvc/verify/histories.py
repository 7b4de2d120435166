"""The history tables: what a workload and a scenario record, as Parquet.

A history directory holds one sub-directory per table, each a set of Parquet part files that
writers add (never rewrite), so a crashed writer loses only what it had not flushed and Spark
reads every table as one DataFrame:

``produced``
    Every record a producer had acknowledged: who wrote it (producer id, sequence), where it
    landed (cluster, topic, partition, offset), what it was (key, a SHA-256 of the value and its
    size, headers, timestamp) and how (transactional; aborted: the transaction it was in was
    aborted, so no read_committed reader may see it), with the time of the acknowledgement (for a
    transactional record, of its commit or abort).
``consumed``
    Every record a consumer processed: group, member, where it read it, and the identity the
    value carries (None for records no workload wrote), with the time.
``commits``
    Every offset a consumer committed (the next offset to read), with the time.
``failovers``
    Every failover a scenario ran, per consumer group: from and to which cluster, when the group
    switched, and whether it was planned.
``cutoffs``
    Per failover and remote partition on the new cluster, the end offset at the switch: what had
    been replicated when the old cluster was left.
``unreplicated``
    Per failover, the source ranges drsvc reported as not replicated (its recovery point).
``switches``
    Every failover of an application as its active-cluster document saw it (one row per
    failover, whatever the number of groups): from and to which cluster, whether it was planned,
    when (wall ms, the executor's clock, taken as each step's write had been acknowledged) its
    ``deactivate`` (active: none), ``set-offsets`` and ``activate`` (active: the new cluster)
    steps completed, and the epochs it wrote: ``none_epoch`` with none, ``to_epoch`` with the new
    cluster. Nulls for steps it never completed (a rolled-back failover has no ``activate_ms``).
    The "two active" check reads it (:mod:`drsvc.verify.two_active`).
``faults``
    Every fault a chaos scenario injected (a nemesis): its name, what it hit, when it started
    and when it was healed (None if it never was), and a detail line.

Every table has one schema here, given once and turned into both an Arrow schema (to write) and
a Spark schema (to read): the two sides cannot drift apart.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

Kind = Literal["string", "int", "long", "bool", "binary", "headers"]
Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    nullable: bool = False


@dataclass(frozen=True)
class TableSchema:
    """One history table: its directory name and columns."""

    name: str
    fields: tuple[Field, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def arrow(self) -> pa.Schema:
        return pa.schema([pa.field(f.name, _ARROW[f.kind](), f.nullable) for f in self.fields])

    def spark(self) -> T.StructType:
        return T.StructType(
            [T.StructField(f.name, _spark(f.kind), f.nullable) for f in self.fields]
        )


def _headers_arrow() -> pa.DataType:
    return pa.list_(
        pa.field(
            "element",
            pa.struct([pa.field("key", pa.string(), False), pa.field("value", pa.binary())]),
            False,
        )
    )


_ARROW: dict[Kind, Any] = {
    "string": pa.string,
    "int": pa.int32,
    "long": pa.int64,
    "bool": pa.bool_,
    "binary": pa.binary,
    "headers": _headers_arrow,
}

HEADERS_TYPE = T.ArrayType(
    T.StructType(
        [T.StructField("key", T.StringType(), False), T.StructField("value", T.BinaryType(), True)]
    ),
    containsNull=False,
)


def _spark(kind: Kind) -> T.DataType:
    return {
        "string": T.StringType(),
        "int": T.IntegerType(),
        "long": T.LongType(),
        "bool": T.BooleanType(),
        "binary": T.BinaryType(),
        "headers": HEADERS_TYPE,
    }[kind]


PRODUCED = TableSchema(
    "produced",
    (
        Field("producer_id", "string"),
        Field("seq", "long"),
        Field("cluster", "string"),
        Field("topic", "string"),
        Field("partition", "int"),
        Field("offset", "long"),
        Field("key", "binary", nullable=True),
        Field("value_sha256", "string", nullable=True),
        Field("value_size", "int", nullable=True),
        Field("headers", "headers"),
        Field("timestamp_ms", "long"),
        Field("transactional", "bool"),
        Field("aborted", "bool"),
        Field("ack_ms", "long"),
    ),
)

CONSUMED = TableSchema(
    "consumed",
    (
        Field("group", "string"),
        Field("member", "string"),
        Field("cluster", "string"),
        Field("topic", "string"),
        Field("partition", "int"),
        Field("offset", "long"),
        Field("producer_id", "string", nullable=True),
        Field("seq", "long", nullable=True),
        Field("processed_ms", "long"),
    ),
)

COMMITS = TableSchema(
    "commits",
    (
        Field("group", "string"),
        Field("member", "string"),
        Field("cluster", "string"),
        Field("topic", "string"),
        Field("partition", "int"),
        Field("offset", "long"),
        Field("committed_ms", "long"),
    ),
)

FAILOVERS = TableSchema(
    "failovers",
    (
        Field("failover_id", "string"),
        Field("group", "string"),
        Field("from_cluster", "string"),
        Field("to_cluster", "string"),
        Field("at_ms", "long"),
        Field("planned", "bool"),
    ),
)

CUTOFFS = TableSchema(
    "cutoffs",
    (
        Field("failover_id", "string"),
        Field("cluster", "string"),
        Field("topic", "string"),
        Field("partition", "int"),
        Field("end_offset", "long"),
    ),
)

UNREPLICATED = TableSchema(
    "unreplicated",
    (
        Field("failover_id", "string"),
        Field("cluster", "string"),
        Field("topic", "string"),
        Field("partition", "int"),
        Field("first_offset", "long"),
        Field("last_offset", "long", nullable=True),
    ),
)

SWITCHES = TableSchema(
    "switches",
    (
        Field("failover_id", "string"),
        Field("app", "string"),
        Field("from_cluster", "string"),
        Field("to_cluster", "string"),
        Field("planned", "bool"),
        Field("deactivate_ms", "long", nullable=True),
        Field("set_offsets_ms", "long", nullable=True),
        Field("activate_ms", "long", nullable=True),
        Field("none_epoch", "long", nullable=True),
        Field("to_epoch", "long", nullable=True),
    ),
)

FAULTS = TableSchema(
    "faults",
    (
        Field("name", "string"),
        Field("target", "string"),
        Field("start_ms", "long"),
        Field("end_ms", "long", nullable=True),
        Field("detail", "string"),
    ),
)

TABLES = (PRODUCED, CONSUMED, COMMITS, FAILOVERS, CUTOFFS, UNREPLICATED, SWITCHES, FAULTS)


class ProducedRecord(NamedTuple):
    producer_id: str
    seq: int
    cluster: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value_sha256: str | None
    value_size: int | None
    headers: list[Header]
    timestamp_ms: int
    transactional: bool
    aborted: bool
    ack_ms: int


class ConsumedRecord(NamedTuple):
    group: str
    member: str
    cluster: str
    topic: str
    partition: int
    offset: int
    producer_id: str | None
    seq: int | None
    processed_ms: int


class Commit(NamedTuple):
    group: str
    member: str
    cluster: str
    topic: str
    partition: int
    offset: int
    committed_ms: int


class FailoverEvent(NamedTuple):
    failover_id: str
    group: str
    from_cluster: str
    to_cluster: str
    at_ms: int
    planned: bool


class Cutoff(NamedTuple):
    failover_id: str
    cluster: str
    topic: str
    partition: int
    end_offset: int


class Unreplicated(NamedTuple):
    failover_id: str
    cluster: str
    topic: str
    partition: int
    first_offset: int
    last_offset: int | None


class Switch(NamedTuple):
    failover_id: str
    app: str
    from_cluster: str
    to_cluster: str
    planned: bool
    deactivate_ms: int | None
    set_offsets_ms: int | None
    activate_ms: int | None
    none_epoch: int | None
    to_epoch: int | None


class FaultEvent(NamedTuple):
    name: str
    target: str
    start_ms: int
    end_ms: int | None
    detail: str


def _arrow_value(kind: Kind, value: Any) -> Any:
    if kind == "headers":
        return [{"key": k, "value": v} for k, v in value]
    return value


def arrow_table(schema: TableSchema, rows: Sequence[Sequence[Any]]) -> pa.Table:
    """Rows (tuples in the schema's column order) as an Arrow table of that schema."""
    columns: list[list[Any]] = [[] for _ in schema.fields]
    for row in rows:
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    arrays = [
        pa.array([_arrow_value(f.kind, v) for v in col], type=_ARROW[f.kind]())
        for f, col in zip(schema.fields, columns, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema.arrow())


def write_rows(directory: Path, schema: TableSchema, rows: Sequence[Sequence[Any]]) -> Path | None:
    """Write ``rows`` as one new part file of ``schema``'s table under ``directory`` (atomically:
    readers never see a half-written file). None when there is nothing to write."""
    if not rows:
        return None
    table_dir = directory / schema.name
    table_dir.mkdir(parents=True, exist_ok=True)
    # named by write time first, so that listing a table's parts gives them in write order
    final = table_dir / f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:12]}.parquet"
    tmp = table_dir / f".{final.name}.tmp"  # Spark skips names starting with "."
    pq.write_table(arrow_table(schema, rows), tmp, compression="zstd")
    os.replace(tmp, final)
    return final


def read_rows(directory: Path, schema: TableSchema) -> list[dict[str, Any]]:
    """Every row of one table (for tests and small tools; the job reads with Spark)."""
    table_dir = directory / schema.name
    if not table_dir.is_dir():
        return []
    parts = sorted(p for p in table_dir.glob("*.parquet") if not p.name.startswith("."))
    rows: list[dict[str, Any]] = []
    for part in parts:
        rows.extend(pq.read_table(part, schema=schema.arrow()).to_pylist())
    return rows


class HistoryTable:
    """A buffered, thread-safe writer of one history table: rows are appended from any thread
    (delivery callbacks included) and written as a new part file by :meth:`flush`, and by
    :meth:`append` itself once ``flush_every`` rows are buffered."""

    def __init__(self, directory: Path, schema: TableSchema, flush_every: int = 50_000) -> None:
        self.directory = directory
        self.schema = schema
        self.flush_every = flush_every
        self._rows: list[Sequence[Any]] = []
        self._lock = threading.Lock()
        self._written = 0

    def append(self, row: Sequence[Any]) -> None:
        with self._lock:
            self._rows.append(row)
            full = len(self._rows) >= self.flush_every
        if full:
            self.flush()

    def extend(self, rows: Iterable[Sequence[Any]]) -> None:
        with self._lock:
            self._rows.extend(rows)
            full = len(self._rows) >= self.flush_every
        if full:
            self.flush()

    def flush(self) -> int:
        """Write what is buffered; returns how many rows were written."""
        with self._lock:
            rows, self._rows = self._rows, []
        write_rows(self.directory, self.schema, rows)
        self._written += len(rows)
        return len(rows)

    @property
    def written(self) -> int:
        return self._written

    @property
    def buffered(self) -> int:
        with self._lock:
            return len(self._rows)


def part_files(directory: Path, schema: TableSchema) -> list[Path]:
    table_dir = directory / schema.name
    if not table_dir.is_dir():
        return []
    return sorted(p for p in table_dir.glob("*.parquet") if not p.name.startswith("."))
