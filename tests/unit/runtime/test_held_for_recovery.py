"""Which topics a flow must not copy yet: those an unplanned failover moved away from its
source while records had not crossed, until the recovery deals with them."""

from __future__ import annotations

from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.runtime.failover.app_states import held_for_recovery
from drsvc.topology.models import Topology
from failover import naming
from failover.active import ActiveDocument
from failover.failover_plan import (
    FailoverRecord,
    FailoverRequest,
    FailoverState,
    Situation,
    plan_failover,
)
from failover.failover_record import encode_record

TOPOLOGY = Topology.model_validate(
    {
        "name": "held",
        "clusters": {
            "east": {"bootstrap_servers": "e:9092"},
            "west": {"bootstrap_servers": "w:9092"},
        },
        "flows": [{"source": "east", "target": "west"}, {"source": "west", "target": "east"}],
        "applications": [
            {
                "name": "orders",
                "groups": ["g"],
                "topics": ["orders", "refunds"],
                "preferred": "east",
            }
        ],
    }
)


def _record(failover_id: str, *, unplanned: bool, state: FailoverState) -> FailoverRecord:
    situation = Situation(frozenset({"east", "west"}), ActiveDocument("east"), not unplanned)
    request = FailoverRequest("orders", "west", force=unplanned)
    return FailoverRecord(plan_failover(request, situation, failover_id), state)


def _store(*records: FailoverRecord) -> MemoryCoordinator:
    store = MemoryCoordinator(FakeClock())
    for record in records:
        key = naming.failover_record_key(TOPOLOGY.namespace, record.plan.failover_id)
        store.put(key, encode_record(record))
    return store


def test_an_unplanned_failover_holds_its_application_s_topics_on_the_flow_it_left() -> None:
    store = _store(_record("f-1", unplanned=True, state=FailoverState.COMPLETED))
    assert held_for_recovery(TOPOLOGY, store, "east", "west") == {
        "orders": "f-1",
        "refunds": "f-1",
    }
    assert held_for_recovery(TOPOLOGY, store, "west", "east") == {}


def test_planned_or_unfinished_failovers_hold_nothing() -> None:
    store = _store(
        _record("f-2", unplanned=False, state=FailoverState.COMPLETED),
        _record("f-3", unplanned=True, state=FailoverState.RUNNING),
    )
    assert held_for_recovery(TOPOLOGY, store, "east", "west") == {}
