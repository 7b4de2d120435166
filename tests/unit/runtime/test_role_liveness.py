"""A role's ``/healthz``: healthy while its loops tick, unhealthy once one stops; ``/metrics``
beside it."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

import pytest

from drsvc.runtime.liveness import LoopLiveness, loop_liveness
from drsvc.runtime.metrics_server import role_app, serve_metrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_healthy_before_any_tick_and_while_every_loop_ticks() -> None:
    clock = Clock()
    liveness = LoopLiveness(clock)
    assert liveness.verdict().healthy
    liveness.tick("replication", stale_after_s=30)
    liveness.tick("flow-control", stale_after_s=10)
    clock.now += 9
    verdict = liveness.verdict()
    assert verdict.healthy, verdict.detail
    assert "flow-control ok: last tick 9.0s ago (limit 10s)" in verdict.detail


def test_one_loop_without_a_tick_past_its_limit_makes_the_role_unhealthy() -> None:
    clock = Clock()
    liveness = LoopLiveness(clock)
    liveness.tick("replication", stale_after_s=30)
    liveness.tick("flow-control", stale_after_s=10)
    clock.now += 11
    liveness.tick("replication", stale_after_s=30)
    verdict = liveness.verdict()
    assert not verdict.healthy
    assert "flow-control STALE: last tick 11.0s ago" in verdict.detail
    # a loop that ended on purpose no longer counts
    liveness.forget("flow-control")
    assert liveness.verdict().healthy


def test_a_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="stale_after_s must be positive"):
        LoopLiveness().tick("loop", stale_after_s=0)


def call(app: Any, path: str) -> tuple[str, bytes]:
    seen: dict[str, str] = {}

    def start_response(status: str, _headers: list[tuple[str, str]]) -> None:
        seen["status"] = status

    body: Iterable[bytes] = app({"PATH_INFO": path, "REQUEST_METHOD": "GET"}, start_response)
    return seen["status"], b"".join(body)


def test_healthz_answers_the_verdict_and_every_other_path_goes_to_the_metrics() -> None:
    clock = Clock()
    liveness = LoopLiveness(clock)

    def metrics(_environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b"metrics"]

    app = role_app(liveness, metrics)
    liveness.tick("engine", stale_after_s=5)
    assert call(app, "/healthz") == ("200 OK", b"ok\nengine ok: last tick 0.0s ago (limit 5s)\n")
    clock.now += 6
    status, body = call(app, "/healthz")
    assert status.startswith("503") and body.startswith(b"unhealthy\n")
    assert call(app, "/metrics") == ("200 OK", b"metrics")


def test_a_role_s_port_serves_metrics_and_liveness() -> None:
    port = serve_metrics(0, "127.0.0.1")
    assert port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        assert b"python_info" in answer.read()
    # Other tests of this process (the integration tests run the roles' loops in-process too)
    # may have left loops behind that are stale by now: this test judges its own loop alone.
    for loop in list(loop_liveness()._last):
        loop_liveness().forget(loop)
    loop_liveness().tick("unit-test-loop", stale_after_s=60)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            assert answer.status == 200
            assert b"unit-test-loop ok" in answer.read()
    except urllib.error.HTTPError as err:  # another test's loop of this process went stale
        raise AssertionError(err.read().decode()) from None
    finally:
        loop_liveness().forget("unit-test-loop")
