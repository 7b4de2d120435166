"""Prometheus metrics of the DR controller (``drsvc controller --metrics-port``).

They are created on first use, once per registry (the process's default registry unless a test
passes its own), like the other roles' metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

__all__ = ["FAILOVER_OUTCOMES", "ControllerMetrics", "controller_metrics"]

#: The ``outcome`` label of ``drsvc_controller_failovers_total``: the state the failover's record
#: ended in when the executor returned (``running`` when it stopped with its record unfinished,
#: ``rolling_back`` likewise), ``refused`` (the executor refused to start or resume it),
#: ``error`` (it stopped on an error, for example Consul unreachable or the lead lost) or ``held``
#: (it never started: the fresh look just before a failover no longer found the cluster down or
#: the target up, or the application had moved; or a failover to resume had found an executor).
FAILOVER_OUTCOMES = (
    "completed",
    "rolled_back",
    "running",
    "rolling_back",
    "refused",
    "error",
    "held",
)


@dataclass(frozen=True)
class ControllerMetrics:
    """The collectors."""

    decisions: Counter
    """``drsvc_controller_decisions_total{app, action}``: one per application per cycle of the
    leader, ``action`` one of failover, resume, hold."""
    leader: Gauge
    """``drsvc_controller_leader{replica}``: 1 while this replica holds the controller lock."""
    failovers: Counter
    """``drsvc_controller_failovers_total{app, action, outcome}``: failovers the controller
    started (``action="failover"``) or resumed (``action="resume"``), by how they ended."""


@cache
def controller_metrics(registry: CollectorRegistry = REGISTRY) -> ControllerMetrics:
    """The controller collectors of ``registry``, registered there on the first call."""
    return ControllerMetrics(
        decisions=Counter(
            "drsvc_controller_decisions",
            "Decisions of the leading controller, one per application and cycle, by action"
            " (failover, resume, hold).",
            ["app", "action"],
            registry=registry,
        ),
        leader=Gauge(
            "drsvc_controller_leader",
            "1 while this controller replica holds the controller lock (leads), else 0.",
            ["replica"],
            registry=registry,
        ),
        failovers=Counter(
            "drsvc_controller_failovers",
            "Failovers the controller started (action=failover) or resumed (action=resume), by"
            " outcome: the record's state when the executor returned (completed, rolled_back,"
            " running, rolling_back), refused, error, or held (stood down just before it"
            " started).",
            ["app", "action", "outcome"],
            registry=registry,
        ),
    )
