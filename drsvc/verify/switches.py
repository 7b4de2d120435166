"""The ``switches`` history row of one failover, from its record as Consul stores it.

A scenario reads ``failovers/<id>`` (the JSON of :func:`failover.failover_record.record_fields`)
and writes one :class:`~drsvc.verify.histories.Switch` per failover. The times are the ``at_ms``
of each step's ``ok`` event: the executor records an event after the step's write was
acknowledged, so ``activate_ms`` is no earlier than the moment the new cluster became active.
The epochs are the ones the executor names in the ``deactivate`` and ``activate`` events'
details (``active: west (epoch 9)``, or ``west is active already (epoch 9)`` on a resume); a
detail without one (a resume that found its own write) leaves the epoch null.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from drsvc.verify.histories import Switch

_EPOCH = re.compile(r"\(epoch (\d+)\)")


def _ok_event(events: Sequence[Mapping[str, Any]], step: str) -> Mapping[str, Any] | None:
    """The last ``ok`` event of ``step`` (a resumed step may be recorded more than once)."""
    found = [e for e in events if e.get("step") == step and e.get("outcome") == "ok"]
    return found[-1] if found else None


def _time(event: Mapping[str, Any] | None) -> int | None:
    return None if event is None else int(event["at_ms"])


def _epoch(event: Mapping[str, Any] | None) -> int | None:
    if event is None:
        return None
    match = _EPOCH.search(str(event.get("detail", "")))
    return None if match is None else int(match.group(1))


def switch_row(record: Mapping[str, Any]) -> Switch:
    """The ``switches`` row of one failover record (its JSON fields)."""
    events: Sequence[Mapping[str, Any]] = record.get("events") or []
    deactivate = _ok_event(events, "deactivate")
    activate = _ok_event(events, "activate")
    return Switch(
        failover_id=str(record["id"]),
        app=str(record["app"]),
        from_cluster=str(record["from"]),
        to_cluster=str(record["to"]),
        planned=record["kind"] == "planned",
        deactivate_ms=_time(deactivate),
        set_offsets_ms=_time(_ok_event(events, "set-offsets")),
        activate_ms=_time(activate),
        none_epoch=_epoch(deactivate),
        to_epoch=_epoch(activate),
    )
