"""The executor's refusals, each answered with its own status and code in the one error shape."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from drsvc.api.problems import install_problem_handlers, problem_of
from drsvc.errors import PreconditionFailedError, RefusedError, RequestMismatchError

CASES = [
    (PreconditionFailedError("the failover would be unplanned now, not planned"), 412,
     "precondition_failed"),
    (RequestMismatchError("request id r1 of orders was a failover to east"), 409,
     "request_mismatch"),
    (RefusedError("east does not answer: a planned failover needs it"), 409, "refused"),
]  # fmt: skip


@pytest.mark.parametrize(("error", "status", "code"), CASES)
def test_each_refusal_has_its_status_and_code(error: RefusedError, status: int, code: str) -> None:
    problem = problem_of(error)
    assert (problem.status, problem.code, problem.message) == (status, code, str(error))


@pytest.mark.parametrize(("error", "status", "code"), CASES)
def test_a_refusal_raised_by_a_handler_is_answered_in_the_one_shape(
    error: RefusedError, status: int, code: str
) -> None:
    app = FastAPI()
    install_problem_handlers(app)

    @app.post("/move")
    def move() -> None:
        raise error

    answer = TestClient(app, raise_server_exceptions=False).post("/move")
    assert answer.status_code == status
    assert answer.json() == {"error": {"status": status, "code": code, "message": str(error)}}
