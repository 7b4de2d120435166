"""The scenario catalogue: what issue 14 asks of it (>= 12 scenarios, every fault, both modes)."""

from __future__ import annotations

import pytest

from chaos.nemesis import FAULT_KINDS, NEEDS_LINKS
from chaos.scenarios import ALO, EOS, SCENARIOS, Scenario, find, suite
from chaos.schedule import FaultStep

DRILL_FAULTS = {"lose-site", "automated-failover", "failback"}


def test_names_are_unique() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names))


def test_at_least_twelve_scenarios_without_links_cover_every_other_fault_in_both_modes() -> None:
    runnable = [s for s in SCENARIOS if not s.needs_links]
    assert len(runnable) >= 12
    covered = {f for s in runnable for f in s.faults}
    assert covered >= (set(FAULT_KINDS) - NEEDS_LINKS) | DRILL_FAULTS
    assert {s.delivery for s in runnable} == {ALO, EOS}
    drills = {s.delivery for s in runnable if s.drill == "site-loss"}
    assert drills == {ALO, EOS}


def test_the_network_faults_have_scenarios_that_say_they_need_links() -> None:
    linked = [s for s in SCENARIOS if s.needs_links]
    assert {f for s in linked for f in s.faults} == set(NEEDS_LINKS)


def test_every_step_names_a_known_fault() -> None:
    for scenario in SCENARIOS:
        for step in scenario.steps:
            assert step.kind in FAULT_KINDS, (scenario.name, step.kind)


def test_the_short_suite_is_a_few_scenarios_without_links() -> None:
    short = suite(short=True)
    assert 2 <= len(short) <= 3
    assert not any(s.needs_links for s in short)
    assert suite(short=False) == SCENARIOS


def test_find() -> None:
    assert find("worker-kill-eos").exactly_once
    with pytest.raises(KeyError, match="known: worker-kill-eos"):
        find("nope")


def test_a_scenario_must_inject_something() -> None:
    with pytest.raises(ValueError, match="injects no fault"):
        Scenario("idle", "nothing", ALO)
    assert Scenario("drill", "d", EOS, drill="site-loss").faults == (
        "lose-site",
        "automated-failover",
        "failback",
    )
    assert Scenario("k", "k", ALO, (FaultStep(0, "partition", 1),)).needs_links
