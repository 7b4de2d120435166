"""The failover record as stored at ``drsvc/<namespace>/failovers/<id>``: a JSON document.

It is the whole truth about one failover: the plan, every step's outcome with its time, the
groups' new positions, the cut-offs and the recovery point. An executor that resumes a failover
reads nothing else, so the encoding round-trips every field exactly; a record this build cannot
read raises :class:`RecordFormatError` instead of being guessed at::

    {"v": 1, "id": "f-20261124-...", "app": "orders", "from": "east", "to": "west",
     "kind": "planned", "state": "completed", "request_id": null,
     "requested_by": {"kind": "api", "name": "alice", "role": "operator"}, "created_ms": ...,
     "steps": [{"name": "deactivate", "on_failure": "end", "timeout_s": null}, ...],
     "events": [{"step": "deactivate", "outcome": "ok", "at_ms": ..., "detail": ""}, ...],
     "groups": [{"group": "g1", "topic": "east.orders", "partition": 0, "target_offset": 42,
                 "exact": true, "source_topic": "orders", "source_offset": 42,
                 "reason": "exact"}],
     "cutoffs": [{"topic": "east.orders", "partition": 0, "offset": 42}],
     "unreplicated": [{"topic": "orders", "partition": 0, "first_offset": 40,
                       "last_offset": 41}],
     "recovery": {"policy": "quarantine", "cluster": "east", "into": null, "started_ms": ...,
                  "divergence": [{"topic": "orders", "partition": 0, "first_offset": 40,
                                  "last_offset": 45, "records": 6}],
                  "replay_from": [], "replayed": null, "completed_ms": ...},
     "epoch": 2}

Versions: a field added later is optional, with the value a record without it means, so a
record written before it reads unchanged and a reader from before it skips it (readers ignore
fields they do not know). Only a change that an older reader would misread bumps ``v``, and a
reader refuses a version it does not know. ``requested_by`` came this way: a record without it
was asked for by someone unknown.

Version 2 is the same document too large for one Consul value: its per-partition fields live
in chunks beside it (:mod:`failover.record_chunks`), and the document stored at the record's
key is a head that names them. A reader of version 1 only refuses it (it would otherwise read
a failover without positions); :func:`decode_record` reads version 1 alone, and
:func:`failover.record_chunks.join_record` reads both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from failover.errors import RecordFormatError
from failover.failover_plan import (
    Cutoff,
    FailoverKind,
    FailoverPlan,
    FailoverRecord,
    FailoverState,
    GroupTarget,
    OnFailure,
    Outcome,
    Step,
    StepEvent,
    StepName,
)
from failover.recovery_point import UnreplicatedRange, rpo_records
from failover.requester import decode_requester, requester_fields
from failover.site_recovery import DivergentRange, PartitionOffset, RecoveryPolicy, SiteRecovery

__all__ = [
    "CHUNKED_FORMAT_VERSION",
    "RECORD_FORMAT_VERSION",
    "decode_record",
    "encode_record",
    "parse_document",
    "record_fields",
    "record_from_fields",
    "recovery_fields",
    "recovery_point",
]

RECORD_FORMAT_VERSION = 1
#: a head whose per-partition fields are in chunks (:mod:`failover.record_chunks`)
CHUNKED_FORMAT_VERSION = 2

T = TypeVar("T")

#: how the executor's step details name an epoch it wrote or found (records without "epoch")
_EPOCH_IN_DETAIL = re.compile(r"\(epoch (\d+)\)")


def group_target_fields(g: GroupTarget) -> dict[str, Any]:
    """One group partition's position on the new cluster, as records and documents show it."""
    return {
        "group": g.group,
        "topic": g.topic,
        "partition": g.partition,
        "target_offset": g.target_offset,
        "exact": g.exact,
        "source_topic": g.source_topic,
        "source_offset": g.source_offset,
        "reason": g.reason,
    }


def record_fields(record: FailoverRecord) -> dict[str, Any]:
    """The record as JSON-ready fields (also what ``--json`` output builds on)."""
    plan = record.plan
    return {
        "v": RECORD_FORMAT_VERSION,
        "id": plan.failover_id,
        "app": plan.app,
        "from": plan.from_cluster,
        "to": plan.to_cluster,
        "kind": plan.kind.value,
        "state": record.state.value,
        "request_id": plan.request_id,
        "requested_by": requester_fields(plan.requested_by),
        "created_ms": record.created_ms,
        "steps": [
            {"name": s.name.value, "on_failure": s.on_failure.value, "timeout_s": s.timeout_s}
            for s in plan.steps
        ],
        "events": [
            {"step": e.step.value, "outcome": e.outcome.value, "at_ms": e.at_ms, "detail": e.detail}
            for e in record.events
        ],
        "groups": [group_target_fields(g) for g in record.groups],
        "cutoffs": [
            {"topic": c.topic, "partition": c.partition, "offset": c.offset} for c in record.cutoffs
        ],
        "unreplicated": [
            {
                "topic": u.topic,
                "partition": u.partition,
                "first_offset": u.first_offset,
                "last_offset": u.last_offset,
            }
            for u in record.unreplicated
        ],
        "recovery": None if record.recovery is None else recovery_fields(record.recovery),
        "epoch": record.epoch,
    }


def recovery_point(record: FailoverRecord) -> tuple[int, bool, str]:
    """The failover's recovery point: records not replicated, whether that is exact, and what
    measured it. At the switch an unplanned failover sees only what crossed (the lost cluster's
    end is unknown: an open range, a lower bound); once the site returned, its recovery closed
    those ranges and counted them, which is the exact number from then on."""
    if record.recovery is not None:
        return record.recovery.records, True, "recovery"
    lost, exact = rpo_records(record.unreplicated)
    return lost, exact, "switch"


def recovery_fields(recovery: SiteRecovery) -> dict[str, Any]:
    return {
        "policy": recovery.policy.value,
        "cluster": recovery.cluster,
        "into": recovery.into,
        "started_ms": recovery.started_ms,
        "divergence": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "first_offset": r.first_offset,
                "last_offset": r.last_offset,
                "records": r.records,
            }
            for r in recovery.divergence
        ],
        "replay_from": [
            {"topic": p.topic, "partition": p.partition, "offset": p.offset}
            for p in recovery.replay_from
        ],
        "replayed": recovery.replayed,
        "completed_ms": recovery.completed_ms,
    }


def _decode_recovery(doc: Mapping[str, Any]) -> SiteRecovery:
    return SiteRecovery(
        policy=RecoveryPolicy(doc["policy"]),
        cluster=_text(doc, "cluster"),
        started_ms=int(doc["started_ms"]),
        divergence=_each(
            doc,
            "divergence",
            lambda r: DivergentRange(
                str(r["topic"]),
                int(r["partition"]),
                int(r["first_offset"]),
                int(r["last_offset"]) + 1,
            ),
        ),
        into=None if doc.get("into") is None else str(doc["into"]),
        replay_from=_each(
            doc,
            "replay_from",
            lambda p: PartitionOffset(str(p["topic"]), int(p["partition"]), int(p["offset"])),
        ),
        replayed=None if doc.get("replayed") is None else int(doc["replayed"]),
        completed_ms=None if doc.get("completed_ms") is None else int(doc["completed_ms"]),
    )


def encode_record(record: FailoverRecord) -> str:
    return json.dumps(record_fields(record), separators=(",", ":"))


def parse_document(raw: str) -> dict[str, Any]:
    """``raw`` as a JSON object; :class:`RecordFormatError` if it is not one."""
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as err:
        raise RecordFormatError(f"not valid JSON ({err.msg})") from err
    if not isinstance(doc, dict):
        raise RecordFormatError("expected a JSON object")
    return doc


def decode_record(raw: str) -> FailoverRecord:
    """The record stored as ``raw`` in one document (version 1); :class:`RecordFormatError`
    names what is wrong (a head of version 2 reads with its chunks: :mod:`.record_chunks`)."""
    doc = parse_document(raw)
    version = doc.get("v")
    if version == CHUNKED_FORMAT_VERSION:
        raise RecordFormatError(
            f"format version {CHUNKED_FORMAT_VERSION} keeps its partitions in chunks beside "
            "it: it reads only with them"
        )
    if version != RECORD_FORMAT_VERSION:
        raise RecordFormatError(
            f"format version {version!r}; this build reads {RECORD_FORMAT_VERSION} and "
            f"{CHUNKED_FORMAT_VERSION}"
        )
    return record_from_fields(doc)


def record_from_fields(doc: Mapping[str, Any]) -> FailoverRecord:
    """The record of a whole document's fields (:func:`record_fields`; ``v`` is not looked at)."""
    try:
        plan = FailoverPlan(
            failover_id=_text(doc, "id"),
            app=_text(doc, "app"),
            from_cluster=_text(doc, "from"),
            to_cluster=_text(doc, "to"),
            kind=FailoverKind(doc["kind"]),
            steps=tuple(
                Step(
                    StepName(s["name"]),
                    OnFailure(s["on_failure"]),
                    None if s.get("timeout_s") is None else float(s["timeout_s"]),
                )
                for s in _items(doc, "steps")
            ),
            request_id=doc.get("request_id"),
            requested_by=decode_requester(doc.get("requested_by")),
        )
        return FailoverRecord(
            plan=plan,
            state=FailoverState(doc["state"]),
            events=_each(
                doc,
                "events",
                lambda e: StepEvent(
                    StepName(e["step"]),
                    Outcome(e["outcome"]),
                    int(e["at_ms"]),
                    str(e.get("detail", "")),
                ),
            ),
            created_ms=int(doc.get("created_ms", 0)),
            groups=_each(
                doc,
                "groups",
                lambda g: GroupTarget(
                    group=str(g["group"]),
                    topic=str(g["topic"]),
                    partition=int(g["partition"]),
                    target_offset=int(g["target_offset"]),
                    exact=bool(g["exact"]),
                    source_topic=str(g.get("source_topic", "")),
                    source_offset=int(g.get("source_offset", -1)),
                    reason=str(g.get("reason", "")),
                ),
            ),
            cutoffs=_each(
                doc,
                "cutoffs",
                lambda c: Cutoff(str(c["topic"]), int(c["partition"]), int(c["offset"])),
            ),
            unreplicated=_each(
                doc,
                "unreplicated",
                lambda u: UnreplicatedRange(
                    str(u["topic"]),
                    int(u["partition"]),
                    int(u["first_offset"]),
                    None if u.get("last_offset") is None else int(u["last_offset"]),
                ),
            ),
            recovery=_recovery(doc),
            epoch=_epoch(doc),
        )
    except RecordFormatError:
        raise
    except (KeyError, TypeError, ValueError) as err:
        raise RecordFormatError(f"a field is missing or has the wrong type: {err!r}") from err


def _epoch(doc: Mapping[str, Any]) -> int:
    """The highest epoch the failover wrote. Records from before the field name it only in
    their steps' details (``active: none (epoch 3)``), which is as good: a record is the only
    trace of an epoch once the active key was overwritten by hand."""
    if "epoch" in doc:
        value = doc["epoch"]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RecordFormatError("'epoch' must be a non-negative integer")
        return value
    found = (
        int(m)
        for e in _items(doc, "events")
        for m in _EPOCH_IN_DETAIL.findall(str(e.get("detail", "")))
    )
    return max(found, default=0)


def _recovery(doc: Mapping[str, Any]) -> SiteRecovery | None:
    value = doc.get("recovery")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordFormatError("'recovery' must be an object or null")
    return _decode_recovery(value)


def _text(doc: Mapping[str, Any], name: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value:
        raise RecordFormatError(f"'{name}' must be a non-empty string")
    return value


def _items(doc: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    value = doc.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RecordFormatError(f"'{name}' must be a list of objects")
    return value


def _each(
    doc: Mapping[str, Any], name: str, build: Callable[[Mapping[str, Any]], T]
) -> tuple[T, ...]:
    return tuple(build(item) for item in _items(doc, name))
