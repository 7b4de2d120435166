"""The control-plane scenarios of issue 32: what they move, what they strike, how they pass."""

from __future__ import annotations

from chaos import rules
from chaos.lease_overlap import Overlap
from chaos.nemesis.catalogue import CONTROL_PLANE_KINDS
from chaos.scenarios import CONTROL_PLANE_SCENARIOS, SCENARIOS, suite
from chaos.schedule import events

FAULTS_OF_ISSUE_32 = {
    "slow-consul-writes",
    "cut-client-consul",
    "pause-producer",
    "kill-api",
    "step-clock",
}


def test_at_least_five_scenarios_cover_every_control_plane_fault() -> None:
    assert len(CONTROL_PLANE_SCENARIOS) >= 5
    assert all(s in SCENARIOS for s in CONTROL_PLANE_SCENARIOS)
    covered = {f for s in CONTROL_PLANE_SCENARIOS for f in s.faults}
    assert covered >= FAULTS_OF_ISSUE_32
    assert covered <= CONTROL_PLANE_KINDS


def test_each_moves_the_application_there_and_back_and_expects_both_moves() -> None:
    for scenario in CONTROL_PLANE_SCENARIOS:
        moves = [s for s in scenario.steps if s.kind in ("planned-failover", "planned-failback")]
        assert [m.params["to"] for m in moves] == ["west", "east"], scenario.name
        assert scenario.failovers_expected == 2
        assert scenario.drill == "planned-moves"


def test_each_fault_is_armed_before_the_move_it_strikes() -> None:
    """Without jitter: a fault that waits for "the next failover" must be armed before the
    move starts, or it would strike the failback instead."""
    for scenario in CONTROL_PLANE_SCENARIOS:
        assert scenario.jitter_s == 0.0
        starts = [
            scenario.steps[e.index].kind
            for e in events(scenario.steps, seed=14, jitter_s=scenario.jitter_s)
            if e.action == "start"
        ]
        fault = next(k for k in starts if k in FAULTS_OF_ISSUE_32)
        assert starts.index(fault) < starts.index("planned-failover"), scenario.name


def test_the_short_suite_grows_by_one_control_plane_scenario() -> None:
    assert [s.name for s in suite(short=True) if s in CONTROL_PLANE_SCENARIOS] == [
        "slow-none-write-alo"
    ]


def test_two_active_records_or_overlapping_leases_fail_a_scenario() -> None:
    verdict = {"checks": {"two_active": 3}, "counts": {"acknowledged": 10}}
    reasons = rules.judge(verdict, exactly_once=False, faults=[], expected_faults=[])
    assert reasons == ["two_active: 3"]
    clean = {"checks": {"two_active": 0}, "counts": {"acknowledged": 10}}
    assert rules.judge(clean, exactly_once=False, faults=[], expected_faults=[]) == []
    held = [Overlap("east", "west", 10.0, 12.5), Overlap("east", "west", 20.0, 20.5)]
    reasons = rules.judge(clean, exactly_once=False, faults=[], expected_faults=[], overlaps=held)
    assert reasons == [
        "two clusters held at once by clients' leases 2 time(s), the longest 2.50 s (east and west)"
    ]
    document = rules.scenario_document("s", 14, [], verdict, None, "r")
    assert document["checks"]["two_active"] == 3
