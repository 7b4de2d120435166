"""The seam between the replication engine and its delivery modes: one way only.

The engine (:mod:`.engine`) calls a delivery mode (:mod:`.at_least_once`, :mod:`.exactly_once`)
through :class:`Delivery`; a mode never calls the engine back. What a mode wants of the engine
(lanes added or dropped, a lane's state machine stepped, a seek, flow control followed for new
lanes, lanes halted) it says with an :data:`Effect` put in its :class:`Effects`; the engine
executes them, in order, after each call into the mode that can make some (never per record: the
hot-path calls make none unless a delivery failed). Callbacks a mode registers with a client (a
rebalance, a delivery report, a commit's answer) run inside calls the engine or the mode makes,
and say what they want the same way.

What a mode needs besides its own clients it is handed at construction (:class:`ModeContext`):
the settings, the Kafka boundary, the clock, the worker's counters, a read-only view of the lanes
the engine copies now, the flow's topics (which it may rediscover at once), where new lanes start
and how they are made. None of these is the engine.

Each mode keeps its own records of the lanes it serves (at least once: the sync writes' tickets,
:class:`.sync_writer.SyncTickets`; exactly once: the slot a lane belongs to and its target
offsets, :class:`.exactly_once.SlotLane`); :class:`.lane.Lane` holds only what both share.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from drsvc.kafka.clock import Clock
from drsvc.kafka.types import Consumer, KafkaError, Message, Producer
from drsvc.runtime.replication.boundary import KafkaBoundary, TopicCatalog
from drsvc.runtime.replication.discovery import FlowTopics
from drsvc.runtime.replication.lane import Lane, LaneFactory
from drsvc.runtime.replication.metrics import WorkerStats
from drsvc.runtime.replication.settings import WorkerSettings
from drsvc.runtime.replication.start_positions import StartPositions
from drsvc.runtime.replication.topics import MirroredTopic
from failover.partition_state import Action, Event

# ---------------------------------------------------------------------------------- effects


@dataclass(frozen=True)
class AddLanes:
    """Copy these new lanes from now on (each replaces a lane of the same partition)."""

    lanes: tuple[Lane, ...]


@dataclass(frozen=True)
class DropLanes:
    """Stop copying these lanes (a lane already replaced by a newer one stays)."""

    lanes: tuple[Lane, ...]


@dataclass(frozen=True)
class Apply:
    """Step the lane's state machine with ``event`` (:mod:`failover.partition_state`)."""

    lane: Lane
    event: Event


@dataclass(frozen=True)
class Seek:
    """Seek the source consumer to ``position`` for ``lane``; once it worked, step the lane's
    state machine with ``then`` (if any). A seek that fails is asked for again by the machine."""

    lane: Lane
    position: int
    then: Event | None = None


@dataclass(frozen=True)
class FollowControl:
    """Pause, resume or floor these lanes as the flow's control document says (new lanes start
    unpaused)."""

    lanes: tuple[Lane, ...]


@dataclass(frozen=True)
class HaltLanes:
    """These lanes copy nothing more (exactly once: their slot's transaction cannot commit);
    records read meanwhile are skipped. The lanes are dropped soon after."""

    lanes: tuple[Lane, ...]


Effect: TypeAlias = AddLanes | DropLanes | Apply | Seek | FollowControl | HaltLanes

#: what a mode wants the engine to do, oldest first (the engine takes them from the left)
Effects: TypeAlias = deque[Effect]


# ---------------------------------------------------------------------------------- context


@dataclass(frozen=True)
class ModeContext:
    """What a delivery mode is handed by the engine that builds it (none of it is the engine)."""

    settings: WorkerSettings
    kafka: KafkaBoundary
    clock: Clock
    stats: WorkerStats
    #: the lanes the engine copies now, by (source topic, partition): read only
    lanes: Mapping[tuple[str, int], Lane]
    topics: FlowTopics
    starts: StartPositions
    new_lane: LaneFactory
    #: set when the worker is stopping
    stop: threading.Event
    #: where the mode puts what it wants done (see the module docstring)
    effects: Effects


# ---------------------------------------------------------------------------------- the mode


class Delivery(Protocol):
    """What a delivery mode does for the engine (see the module docstring).

    The engine calls the hot-path methods (:meth:`open`, :meth:`queue_full`, :meth:`refused`,
    :meth:`copied` and the delivery callbacks) without a check per record: they are its only
    calls per stretch of records of one partition."""

    #: a name for logs: "at-least-once" or "exactly-once"
    mode: str

    def prepare(self, catalog: TopicCatalog) -> None:
        """Create the internal topics (before any client starts)."""
        ...

    def source_config(self) -> dict[str, Any]:
        """The source consumer's own settings (the factory adds the source cluster's)."""
        ...

    def start(self, consumer: Consumer) -> None:
        """Create the delivery's clients; ``consumer`` is the engine's source consumer, whose
        assignment the mode manages."""
        ...

    def topics_changed(self, mirrored: dict[str, MirroredTopic]) -> None:
        """Discovery ran: follow new, removed and recreated topics."""
        ...

    def reading(self) -> bool:
        """Does the source consumer have anything to read (or a group to join)?"""
        ...

    def before_batch(self, now: float) -> None: ...

    def idle(self, timeout_s: float) -> None:
        """Nothing to read: wait up to ``timeout_s``, serving callbacks and membership."""
        ...

    def open(self, lane: Lane, now: float) -> Producer | None:
        """The producer to copy ``lane``'s records with now (None: skip them)."""
        ...

    def on_delivery(
        self, lane: Lane, source_offset: int, err: KafkaError | None, msg: Message
    ) -> None: ...

    def queue_full(self, lane: Lane, producer: Producer) -> bool:
        """The producer queue is full: serve delivery reports; may the record be tried again?"""
        ...

    def refused(self, lane: Lane, offset: int, epoch: int, err: KafkaError) -> None:
        """The producer refused a record before sending it."""
        ...

    def copied(self, lane: Lane, records: int) -> None: ...

    def serve(self, timeout_s: float) -> None:
        """Hold-back: wait up to ``timeout_s`` serving reports (and due commits)."""
        ...

    def after_batch(self, now: float) -> None:
        """Periodic work of the mode: seal, write syncs, commit."""
        ...

    def position_deleted(self, lane: Lane) -> None:
        """The next record to copy was deleted by retention on the source (the engine looked for
        a recreated topic first)."""
        ...

    def execute(self, lane: Lane, action: Action) -> None:
        """An action of the lane's state machine that only the mode knows how to do."""
        ...

    def skip_below(self, floors: list[tuple[Lane, int]]) -> None:
        """Copy nothing of each lane below its floor (the control document's ``skip_below``
        rose above the lane's position): restart its progress there."""
        ...

    def reassign(self, lane: Lane, position: int) -> None:
        """Assign ``lane`` again at ``position`` (a seek the consumer refused); raises
        KafkaException when the consumer refuses that too."""
        ...

    def replicated_offset(self, lane: Lane) -> int:
        """Next source offset whose copies (and syncs) are durable: what status shows. Runs on a
        metrics scrape's thread: reads plain values only."""
        ...

    def shutdown(self) -> None:
        """Settle and commit what can be, then let the delivery's clients go."""
        ...
