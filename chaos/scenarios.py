"""The named scenarios: topology, delivery mode, workload and fault schedule (pure data).

Every scenario runs on the active/active pair ``east``/``west`` (a flow each way, prefix
policy) in one delivery mode, with a workload, a fault schedule, and then heal and catch-up
before the consistency job checks it. ``drill="site-loss"`` scenarios lose site east, let the
DR controller fail the application over to west, bring east back, recover it and fail back.
``drill="planned-moves"`` scenarios (issue 32) move the application with planned failovers and
failbacks while its own clients follow it, the schedule timing control-plane faults to the
moves' steps; their schedules have no jitter, since each fault arms itself for the move that
follows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from chaos.schedule import FaultStep

Delivery = Literal["at-least-once", "exactly-once"]
Drill = Literal["none", "site-loss", "planned-moves"]

#: the schedule's kinds that move the application (each must complete)
MOVES = frozenset({"planned-failover", "planned-failback"})

ALO: Delivery = "at-least-once"
EOS: Delivery = "exactly-once"


@dataclass(frozen=True)
class Scenario:
    """One named scenario. ``warmup_s`` of workload before the first fault, ``tail_s`` after
    the last heal before the producers stop; ``short``: part of ``chaos suite --short``."""

    name: str
    description: str
    delivery: Delivery
    steps: tuple[FaultStep, ...] = ()
    drill: Drill = "none"
    short: bool = False
    warmup_s: float = 8.0
    tail_s: float = 5.0
    rate_per_s: float = 200.0
    jitter_s: float = 1.0

    def __post_init__(self) -> None:
        if not self.steps and self.drill == "none":
            raise ValueError(f"scenario {self.name} injects no fault")

    @property
    def exactly_once(self) -> bool:
        return self.delivery == EOS

    @property
    def faults(self) -> tuple[str, ...]:
        """The fault kinds it covers, the drill's included."""
        kinds = [s.kind for s in self.steps]
        if self.drill == "site-loss":
            kinds += ["lose-site", "automated-failover", "failback"]
        return tuple(dict.fromkeys(kinds))

    @property
    def failovers_expected(self) -> int:
        """How many failovers must have completed: the drill's automated failover and
        failback, or each planned move of the schedule."""
        if self.drill == "site-loss":
            return 2
        return sum(s.kind in MOVES for s in self.steps)

    @property
    def needs_links(self) -> bool:
        return any(s.kind in ("partition", "latency") for s in self.steps)


def _step(at_s: float, kind: str, duration_s: float, **params: str) -> FaultStep:
    return FaultStep(at_s, kind, duration_s, params)


E2W = "east->west"

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "worker-kill-eos",
        "the east->west worker killed with kill -9 twice while records flow (exactly once)",
        EOS,
        (_step(2, "kill-worker", 6, flow=E2W), _step(14, "kill-worker", 6, flow=E2W)),
        short=True,
    ),
    Scenario(
        "broker-kill-source-alo",
        "east's broker killed with kill -9 and started again 8 s later (at least once)",
        ALO,
        (_step(3, "kill-broker", 8, site="east"),),
    ),
    Scenario(
        "worker-kill-alo",
        "both directions' workers killed with kill -9 (at least once)",
        ALO,
        (_step(2, "kill-worker", 6, flow=E2W), _step(10, "kill-worker", 6, flow="west->east")),
    ),
    Scenario(
        "checkpoints-kill-alo",
        "the checkpoint agent killed with kill -9 twice (at least once)",
        ALO,
        (_step(2, "kill-checkpoints", 8), _step(14, "kill-checkpoints", 8)),
    ),
    Scenario(
        "controller-kill-eos",
        "the DR controller replica killed with kill -9 twice; nothing may move (exactly once)",
        EOS,
        (_step(2, "kill-controller", 6), _step(12, "kill-controller", 6)),
    ),
    Scenario(
        "broker-kill-target-eos",
        "west's broker (the target) killed with kill -9, back 8 s later (exactly once)",
        EOS,
        (_step(3, "kill-broker", 8, site="west"),),
    ),
    Scenario(
        "broker-pause-source-eos",
        "east's broker frozen (SIGSTOP) for 6 s, then SIGCONT (exactly once)",
        EOS,
        (_step(3, "pause-broker", 6, site="east"),),
    ),
    Scenario(
        "broker-pause-target-alo",
        "west's broker frozen (SIGSTOP) for 6 s, then SIGCONT (at least once)",
        ALO,
        (_step(3, "pause-broker", 6, site="west"),),
        short=True,
    ),
    Scenario(
        "slow-commits-eos",
        "west's transaction coordinator frozen 2 s at a time, three times: slow commits on the "
        "target (exactly once)",
        EOS,
        (
            _step(2, "slow-commits", 2, site="west"),
            _step(7, "slow-commits", 2, site="west"),
            _step(12, "slow-commits", 2, site="west"),
        ),
    ),
    Scenario(
        "hanging-transaction-eos",
        "a transaction on east left open, its producer killed; the broker aborts it after "
        "10 s (exactly once)",
        EOS,
        (_step(2, "hanging-transaction", 12, site="east"),),
    ),
    Scenario(
        "hanging-transaction-alo",
        "a transaction on east left open, its producer killed; the broker aborts it after "
        "10 s (at least once)",
        ALO,
        (_step(2, "hanging-transaction", 12, site="east"),),
    ),
    Scenario(
        "consul-server-loss-alo",
        "east's Consul server killed for 15 s (the quorum of three keeps two) (at least once)",
        ALO,
        (_step(3, "lose-consul-server", 15, site="east"),),
    ),
    Scenario(
        "site-loss-failback-alo",
        "site east lost; the controller fails the application over to west; east returns, "
        "is recovered and the application fails back (at least once)",
        ALO,
        drill="site-loss",
        rate_per_s=100.0,
    ),
    Scenario(
        "site-loss-failback-eos",
        "the same drill with exactly-once flows",
        EOS,
        drill="site-loss",
        rate_per_s=100.0,
    ),
    Scenario(
        "partition-alo",
        "the network between east and west cut for 15 s (at least once)",
        ALO,
        (_step(3, "partition", 15, a="east", b="west"),),
    ),
    Scenario(
        "latency-eos",
        "200 ms (+/- 50 ms) between east and west for 20 s (exactly once)",
        EOS,
        (_step(2, "latency", 20, a="east", b="west", ms="200", jitter_ms="50"),),
    ),
)


def _move(at_s: float, to: str, executor: str = "cli") -> FaultStep:
    """A planned move to ``to``; its heal, a second later, waits until it completed."""
    kind = "planned-failback" if to == "east" else "planned-failover"
    return _step(at_s, kind, 1, to=to, executor=executor)


CONTROL_PLANE_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "slow-none-write-alo",
        "a planned failover whose executor's Consul requests arrive 4 s late while it writes "
        "none (longer than the lease margin), then a failback (at least once)",
        ALO,
        (
            _step(0, "slow-consul-writes", 1, ms="4000"),
            _move(0.5, "west"),
            _move(3, "east"),
        ),
        drill="planned-moves",
        short=True,
        jitter_s=0.0,
        rate_per_s=100.0,
    ),
    Scenario(
        "client-consul-cut-alo",
        "the application's clients cut off from Consul for 15 s (five leases) across a planned "
        "failover; they must stop at the end of their lease and follow once back, then a "
        "failback (at least once)",
        ALO,
        (
            _step(0, "cut-client-consul", 15),
            _move(0.5, "west"),
            _move(17, "east"),
        ),
        drill="planned-moves",
        jitter_s=0.0,
        rate_per_s=100.0,
    ),
    Scenario(
        "paused-producer-alo",
        "a producer process lingering 1 s frozen (SIGSTOP) with its queue full across a "
        "planned failover, thawed 1 s after the activation, then a failback (at least once)",
        ALO,
        (
            _step(0, "pause-producer", 1, after_s="1"),
            _move(0.3, "west"),
            _move(4, "east"),
        ),
        drill="planned-moves",
        jitter_s=0.0,
        rate_per_s=100.0,
    ),
    Scenario(
        "api-kill-wait-lease-alo",
        "a planned failover through the API, the API killed with kill -9 while it waits out "
        "the lease, resumed and completed, then a failback (at least once)",
        ALO,
        (
            _step(0, "kill-api", 1),
            _move(0.5, "west", executor="api"),
            _move(4, "east"),
        ),
        drill="planned-moves",
        jitter_s=0.0,
        rate_per_s=100.0,
    ),
    Scenario(
        "clock-step-alo",
        "a planned failover whose executor's wall clock steps 5 s forward during the lease "
        "wait, then a failback (at least once)",
        ALO,
        (
            _step(0, "step-clock", 3, s="5"),
            _move(0.5, "west", executor="stepped-clock"),
            _move(5, "east"),
        ),
        drill="planned-moves",
        jitter_s=0.0,
        rate_per_s=100.0,
    ),
    Scenario(
        "slow-none-write-eos",
        "the slow none write of slow-none-write-alo with exactly-once flows",
        EOS,
        (
            _step(0, "slow-consul-writes", 1, ms="4000"),
            _move(0.5, "west"),
            _move(3, "east"),
        ),
        drill="planned-moves",
        jitter_s=0.0,
        rate_per_s=100.0,
    ),
)

SCENARIOS = SCENARIOS + CONTROL_PLANE_SCENARIOS


def find(name: str, scenarios: Sequence[Scenario] = SCENARIOS) -> Scenario:
    for scenario in scenarios:
        if scenario.name == name:
            return scenario
    known = ", ".join(s.name for s in scenarios)
    raise KeyError(f"no scenario named {name!r} (known: {known})")


def suite(short: bool, scenarios: Sequence[Scenario] = SCENARIOS) -> tuple[Scenario, ...]:
    """The scenarios of ``chaos suite`` (``--short``: the few marked short)."""
    return tuple(s for s in scenarios if s.short or not short)
