"""Restart decisions of the supervisor, on a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drsvc.errors import ConfigError
from drsvc.runtime.supervisor.restart_policy import (
    ExitAction,
    RestartPolicy,
    RoleLifecycle,
    RoleState,
    describe_exit,
)

POLICY = RestartPolicy(
    initial_backoff_s=1.0, max_backoff_s=60.0, factor=2.0, stable_after_s=30.0, crash_loop_after=3
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def started_role(clock: FakeClock) -> RoleLifecycle:
    role = RoleLifecycle(POLICY, clock.now)
    assert role.should_start(clock.now)
    role.started(clock.now)
    return role


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 32.0), (7, 60.0), (50, 60.0), (5000, 60.0)],
)
def test_backoff_doubles_up_to_the_cap(failures: int, delay: float) -> None:
    assert POLICY.backoff_s(failures) == delay


@given(st.integers(min_value=1, max_value=100_000))
def test_backoff_never_exceeds_the_cap_and_never_shrinks(failures: int) -> None:
    assert POLICY.initial_backoff_s <= POLICY.backoff_s(failures) <= POLICY.max_backoff_s
    assert POLICY.backoff_s(failures + 1) >= POLICY.backoff_s(failures)


def test_first_start_is_due_at_once_and_only_once() -> None:
    clock = FakeClock()
    role = RoleLifecycle(POLICY, clock.now)
    states = [role.state]
    assert role.should_start(clock.now)
    role.started(clock.now)
    states.append(role.state)
    assert states == [RoleState.WAITING, RoleState.RUNNING]
    assert not role.should_start(clock.advance(100))
    assert role.restarts == 0


def test_quick_crashes_back_off_exponentially_and_become_a_crash_loop() -> None:
    clock = FakeClock()
    role = started_role(clock)
    delays = []
    for expected in (1.0, 2.0, 4.0, 8.0):
        verdict = role.exited(clock.advance(0.5), 1)
        assert verdict.action is ExitAction.RESTART
        assert verdict.delay_s == expected
        delays.append(verdict.delay_s)
        assert role.state is RoleState.WAITING
        assert not role.should_start(clock.advance(expected - 0.1))
        assert role.restart_in_s(clock.now) == pytest.approx(0.1)
        assert role.should_start(clock.advance(0.1))
        role.started(clock.now)
    assert delays == [1.0, 2.0, 4.0, 8.0]
    assert role.restarts == 4
    assert role.crashes == 4
    assert role.consecutive_failures == 4


def test_the_configured_number_of_quick_failures_is_a_crash_loop_still_retried() -> None:
    clock = FakeClock()
    role = started_role(clock)
    verdicts = []
    for _ in range(4):
        verdict = role.exited(clock.advance(1), 1)
        verdicts.append(verdict)
        role.started(clock.advance(verdict.delay_s))
    assert [v.crash_loop for v in verdicts] == [False, False, True, True]
    assert all(v.action is ExitAction.RESTART for v in verdicts)
    assert "crash loop: 3 quick failures in a row" in verdicts[2].reason
    assert "crash loop" not in verdicts[1].reason


def test_a_stable_run_resets_the_backoff() -> None:
    clock = FakeClock()
    role = started_role(clock)
    for _ in range(5):
        verdict = role.exited(clock.advance(1), 1)
        role.started(clock.advance(verdict.delay_s))
    assert role.consecutive_failures == 5
    verdict = role.exited(clock.advance(POLICY.stable_after_s), 1)
    assert verdict.action is ExitAction.RESTART
    assert verdict.delay_s == POLICY.initial_backoff_s
    assert not verdict.crash_loop
    assert role.consecutive_failures == 1


def test_a_clean_exit_of_a_role_that_should_run_is_restarted_too() -> None:
    clock = FakeClock()
    role = started_role(clock)
    verdict = role.exited(clock.advance(5), 0)
    assert verdict.action is ExitAction.RESTART
    assert "exited with code 0" in verdict.reason


def test_bad_input_at_startup_is_not_restarted() -> None:
    clock = FakeClock()
    role = started_role(clock)
    verdict = role.exited(clock.advance(2), 2)
    assert verdict.action is ExitAction.GIVE_UP
    assert "bad input" in verdict.reason and "not restarting" in verdict.reason
    assert role.state is RoleState.FAILED
    assert not role.should_start(clock.advance(3600))
    assert role.restart_in_s(clock.now) is None


def test_bad_input_after_a_stable_run_is_a_crash() -> None:
    clock = FakeClock()
    role = started_role(clock)
    verdict = role.exited(clock.advance(POLICY.stable_after_s + 1), 2)
    assert verdict.action is ExitAction.RESTART
    assert role.state is RoleState.WAITING


def test_exits_while_stopping_are_expected() -> None:
    clock = FakeClock()
    role = started_role(clock)
    role.stopping()
    states = [role.state]
    verdict = role.exited(clock.advance(1), -15)
    states.append(role.state)
    assert verdict.action is ExitAction.NONE
    assert states == [RoleState.STOPPING, RoleState.STOPPED]
    assert role.crashes == 0
    assert not role.should_start(clock.advance(100))


def test_a_waiting_role_is_not_started_once_stopping() -> None:
    clock = FakeClock()
    role = started_role(clock)
    role.exited(clock.advance(1), 1)
    role.stopping()
    assert role.state is RoleState.STOPPED
    assert not role.should_start(clock.advance(100))


def test_uptime_counts_from_the_current_start() -> None:
    clock = FakeClock()
    role = started_role(clock)
    assert role.uptime_s(clock.advance(12)) == 12
    verdict = role.exited(clock.now, 1)
    assert role.uptime_s(clock.now) is None
    role.started(clock.advance(verdict.delay_s))
    assert role.uptime_s(clock.advance(3)) == 3


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (-9, "killed by SIGKILL"),
        (-15, "killed by SIGTERM"),
        (1, "exited with code 1"),
        (2, "exited with code 2 (bad input)"),
        (0, "exited with code 0"),
    ],
)
def test_exit_descriptions(code: int, text: str) -> None:
    assert describe_exit(code) == text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_backoff_s": 0},
        {"initial_backoff_s": 10, "max_backoff_s": 5},
        {"factor": 0.5},
        {"crash_loop_after": 0},
        {"stable_after_s": 0},
    ],
)
def test_nonsense_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RestartPolicy(**kwargs)  # type: ignore[arg-type]
