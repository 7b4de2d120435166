"""A migration's state, as kept in the coordination store, and what each command may do (pure).

The document lives at ``drsvc/<namespace>/migrations/<name>`` (:func:`migration_key`) as JSON::

    {"state": "copying", "started_ms": 1700000000000, "finished_ms": null,
     "created_topics": ["mig.orders"], "takeover": null}

``state`` is ``copying`` from ``drsvc migrate start`` on and ``finished`` after ``drsvc migrate
finish`` (the flow stopped; nothing was deleted anywhere). No document means: not started.

An application of the migration is in one of these phases, read from its active-cluster
document: ``on-source`` (not cut over yet), ``switching`` (a cutover is running: the active
cluster is none), ``on-target`` (cut over), or ``elsewhere`` (active on a third cluster).

Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from failover.errors import FormatError
from failover.naming import consul_prefix

MigrationStateName = Literal["copying", "finished"]
AppPhase = Literal["on-source", "switching", "on-target", "elsewhere"]


def migration_key(namespace: str, name: str) -> str:
    """Where the state of migration ``name`` is kept."""
    return f"{consul_prefix(namespace)}/migrations/{name}"


@dataclass(frozen=True)
class MigrationState:
    """What the store says about one migration."""

    state: MigrationStateName
    started_ms: int
    finished_ms: int | None = None
    created_topics: tuple[str, ...] = ()
    #: where the flow started when it took over from MirrorMaker 2 (topic -> partition -> offset)
    takeover: Mapping[str, Mapping[int, int]] | None = None

    def to_json(self) -> str:
        takeover = None
        if self.takeover is not None:
            takeover = {
                topic: {str(p): o for p, o in sorted(parts.items())}
                for topic, parts in sorted(self.takeover.items())
            }
        return json.dumps(
            {
                "state": self.state,
                "started_ms": self.started_ms,
                "finished_ms": self.finished_ms,
                "created_topics": sorted(self.created_topics),
                "takeover": takeover,
            }
        )

    def as_dict(self) -> dict[str, object]:
        loaded: dict[str, object] = json.loads(self.to_json())
        return loaded

    @classmethod
    def from_json(cls, text: str) -> MigrationState:
        try:
            raw = json.loads(text)
            state = raw["state"]
            if state not in ("copying", "finished"):
                raise ValueError(f"unknown state {state!r}")
            finished = raw.get("finished_ms")
            takeover_raw = raw.get("takeover")
            takeover = None
            if takeover_raw is not None:
                takeover = {
                    str(t): {int(p): int(o) for p, o in parts.items()}
                    for t, parts in takeover_raw.items()
                }
            return cls(
                state=state,
                started_ms=int(raw["started_ms"]),
                finished_ms=None if finished is None else int(finished),
                created_topics=tuple(str(t) for t in raw.get("created_topics", [])),
                takeover=takeover,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise FormatError(f"unreadable migration state: {err}") from err


def start_refusal(current: MigrationState | None, conflicts: Iterable[str]) -> str | None:
    """Why ``drsvc migrate start`` must not start (None: it may). ``conflicts`` are the plan's
    conflict reasons, one line per topic. Starting again while copying is fine: it resumes."""
    found = list(conflicts)
    if found:
        return (
            f"the plan has {len(found)} conflict(s); resolve them first (drsvc migrate plan): "
            + "; ".join(found)
        )
    if current is not None and current.state == "finished":
        return "the migration is finished: its flow was stopped for good"
    return None


def started(current: MigrationState | None, now_ms: int, created: Iterable[str]) -> MigrationState:
    """The state after a (re)start that created ``created`` on the target."""
    if current is None:
        return MigrationState("copying", now_ms, created_topics=tuple(sorted(set(created))))
    merged = tuple(sorted(set(current.created_topics) | set(created)))
    return MigrationState("copying", current.started_ms, None, merged, current.takeover)


def app_phase(active: str | None, source: str, target: str) -> AppPhase:
    """An application's phase in the migration from its active cluster (None: switching)."""
    if active is None:
        return "switching"
    if active == source:
        return "on-source"
    if active == target:
        return "on-target"
    return "elsewhere"


@dataclass(frozen=True)
class FinishDecision:
    """Whether ``drsvc migrate finish`` may stop the flow, and why not."""

    allowed: bool
    reason: str
    not_moved: tuple[str, ...] = field(default=())


def finish_decision(
    current: MigrationState | None, phases: Mapping[str, AppPhase]
) -> FinishDecision:
    """The flow may stop once the migration started and every application of it left the
    source: one still there (or switching) would lose its copy on the target."""
    if current is None:
        return FinishDecision(False, "the migration was never started")
    if current.state == "finished":
        return FinishDecision(True, "already finished")
    waiting = tuple(sorted(app for app, phase in phases.items() if phase != "on-target"))
    if waiting:
        shown = ", ".join(f"{app} ({phases[app]})" for app in waiting)
        return FinishDecision(
            False,
            f"not every application is cut over: {shown}; cut them over first (the flow keeps"
            " their copies current until then)",
            waiting,
        )
    return FinishDecision(True, "every application is on the target")
