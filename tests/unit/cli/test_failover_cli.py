"""``drsvc failover`` / ``failback`` / ``recover``: the request id rule, the dry run's
preconditions and how they reach the executor, and what a refusal prints and exits with (an
in-memory coordinator and fake clusters; no Consul, no brokers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from failover_topologies import Clock, caught_up, east_west_document, orders_and_payments
from fake_failover_clusters import FakeFailoverClusters
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.cli import failover as failover_cli
from drsvc.cli.main import EXIT_BAD_INPUT, main
from drsvc.runtime.failover.executor import FailoverExecutor, LockTiming
from drsvc.topology.models import Topology
from failover.failover_plan import (
    FailoverKind,
    FailoverPlan,
    FailoverRecord,
    FailoverRequest,
    FailoverState,
)
from failover.requester import RequestedBy, RequesterKind

NS = "shop"
#: the operating-system user the tests run the CLI as
USER = "alice"
BY_USER = RequestedBy(RequesterKind.CLI, USER)

TOPOLOGY = east_west_document(NS, *orders_and_payments())


class SpyExecutor(FailoverExecutor):
    """The real executor's reads and plans; ``start`` only keeps what it was asked."""

    def __init__(self, store: MemoryCoordinator, clusters: FakeFailoverClusters) -> None:
        super().__init__(
            Topology.model_validate(TOPOLOGY),
            store,
            clusters,
            clock=Clock(),
            lock_timing=LockTiming(ttl_s=10, lock_delay_s=5),
        )
        self.started: list[FailoverRequest] = []

    def start(self, request: FailoverRequest, on_created: Any = None) -> FailoverRecord:
        self.started.append(request)
        kind = FailoverKind.UNPLANNED if request.force else FailoverKind.PLANNED
        by = request.requested_by
        plan = FailoverPlan("f-1", request.app, "east", request.to, kind, (), requested_by=by)
        return FailoverRecord(plan, state=FailoverState.COMPLETED)


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch) -> SpyExecutor:
    spy = SpyExecutor(MemoryCoordinator(FakeClock()), caught_up())
    built: list[SpyExecutor] = []

    def build(*_args: Any, **_kwargs: Any) -> SpyExecutor:
        built.append(spy)
        return spy

    monkeypatch.setattr(failover_cli, "build_executor", build)
    monkeypatch.setattr(failover_cli, "os_user", lambda: USER)
    spy.built = built  # type: ignore[attr-defined]
    return spy


@pytest.fixture
def topology_file(tmp_path: Path) -> Path:
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(TOPOLOGY))
    return path


def _run(*args: str) -> int:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    code = exited.value.code
    return 0 if code is None else int(code)


@pytest.mark.parametrize(
    "request_id", ["../apps/payments/failover", "..", ".", "a/b", "-r", "r" * 129]
)
def test_a_request_id_that_breaks_the_rule_is_bad_input_and_changes_nothing(
    executor: SpyExecutor,
    topology_file: Path,
    capsys: pytest.CaptureFixture[str],
    request_id: str,
) -> None:
    code = _run(
        "failover", "-t", str(topology_file), "--app", "orders", "--to", "west",
        "--request-id", request_id,
    )  # fmt: skip
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"drsvc: error: --request-id: request id {request_id!r}: 1 to 128"), err
    assert "starting with a letter or digit" in err
    assert executor.started == []
    assert executor.built == []  # type: ignore[attr-defined]  # refused before Consul is asked


def test_a_good_request_id_reaches_the_executor(executor: SpyExecutor, topology_file: Path) -> None:
    code = _run(
        "failover", "-t", str(topology_file), "--app", "orders", "--to", "west",
        "--request-id", "change-4711:orders.v2",
    )  # fmt: skip
    assert code == 0
    assert [r.request_id for r in executor.started] == ["change-4711:orders.v2"]


def test_the_dry_run_answers_what_to_send_back_and_the_failover_takes_it(
    executor: SpyExecutor, topology_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("-t", str(topology_file), "--app", "orders", "--to", "west")
    assert _run("failover", *base, "--dry-run", "--json") == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["kind"], plan["epoch"]) == ("planned", 0)
    assert _run("failover", *base, "--dry-run") == 0
    text = capsys.readouterr().out
    assert "planned failover of orders from east to west at epoch 0" in text
    assert "--expect-kind planned --expect-epoch 0" in text
    assert executor.started == []
    code = _run(
        "failover", *base, "--expect-kind", plan["kind"], "--expect-epoch", str(plan["epoch"])
    )
    assert code == 0
    assert executor.started == [
        FailoverRequest(
            "orders",
            "west",
            expect_kind=FailoverKind.PLANNED,
            expect_epoch=0,
            requested_by=BY_USER,
        )
    ]


def test_the_record_says_which_user_asked(
    executor: SpyExecutor, topology_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("failover", "-t", str(topology_file), "--app", "orders", "--to", "west") == 0
    assert "requested by cli:alice" in capsys.readouterr().out
    base = ("-t", str(topology_file), "--app", "orders", "--to", "west")
    assert _run("failover", *base, "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["requested_by"] == {"kind": "cli", "name": USER, "role": None}


def test_a_user_name_that_does_not_fit_is_kept_as_unknown() -> None:
    assert RequestedBy.of(RequesterKind.CLI, "DOMAIN\\some one").name == ""
    assert RequestedBy.of(RequesterKind.CLI, None).describe() == "cli:?"


def test_a_failback_takes_the_preconditions_too(executor: SpyExecutor, topology_file: Path) -> None:
    code = _run(
        "failback", "-t", str(topology_file), "--app", "orders", "--to", "west",
        "--expect-kind", "unplanned", "--expect-epoch", "3", "--force",
    )  # fmt: skip
    assert code == 0
    assert executor.started == [
        FailoverRequest(
            "orders",
            "west",
            True,
            expect_kind=FailoverKind.UNPLANNED,
            expect_epoch=3,
            requested_by=BY_USER,
        )
    ]


@pytest.mark.parametrize(
    "extra",
    [("--expect-epoch", "2"), ("--expect-kind", "planned"), ("--request-id", "r1")],
)
def test_resume_takes_no_request_options(
    executor: SpyExecutor,
    topology_file: Path,
    capsys: pytest.CaptureFixture[str],
    extra: tuple[str, str],
) -> None:
    code = _run("failover", "-t", str(topology_file), "--resume", "f-1", *extra)
    assert code == EXIT_BAD_INPUT
    assert "--resume takes no" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [("--expect-epoch", "-1"), ("--expect-kind", "sideways")])
def test_bad_preconditions_are_usage_errors(
    executor: SpyExecutor, topology_file: Path, extra: tuple[str, str]
) -> None:
    code = _run("failover", "-t", str(topology_file), "--app", "orders", "--to", "west", *extra)
    assert code == EXIT_BAD_INPUT
    assert executor.started == []


# -- refusals: exit 1 and the plan's reason, as text or as a document ---------------------------

ALREADY_ON_EAST = "application orders is already active on east"
STALE_EPOCH = (
    "application orders is at epoch 0, not 3 as expected: it changed since the plan was shown; "
    "look at the plan again"
)


@pytest.mark.parametrize(
    ("to", "extra", "reason"),
    [("east", (), ALREADY_ON_EAST), ("west", ("--expect-epoch", "3"), STALE_EPOCH)],
)
def test_a_failover_the_plan_refuses_exits_1_with_its_reason(
    executor: SpyExecutor,
    topology_file: Path,
    capsys: pytest.CaptureFixture[str],
    to: str,
    extra: tuple[str, ...],
    reason: str,
) -> None:
    # A dry run: it plans as the failover does (the spy's start does not plan).
    base = ("failover", "-t", str(topology_file), "--app", "orders", "--to", to, "--dry-run",
            *extra)  # fmt: skip
    assert _run(*base) == 1
    assert capsys.readouterr() == ("", f"drsvc: refused: {reason}\n")
    assert _run(*base, "--json") == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"app": "orders", "to": to, "state": "refused", "reason": reason}
    assert err == f"drsvc: refused: {reason}\n"
    assert executor.started == []


def test_a_recovery_with_nothing_to_recover_exits_1_with_its_reason(
    executor: SpyExecutor, topology_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = "application orders has no unplanned failover waiting for recovery"
    base = ("recover", "-t", str(topology_file), "--app", "orders")
    assert _run(*base) == 1
    assert capsys.readouterr() == ("", f"drsvc: refused: {reason}\n")
    assert _run(*base, "--json") == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"app": "orders", "state": "refused", "reason": reason}
    assert err == f"drsvc: refused: {reason}\n"
