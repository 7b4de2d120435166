"""The core's refusals leave the runtime as drsvc's: each kind as its own class (the API answers
each with its own status), the message unchanged (operators read it), the original kept as the
cause."""

from __future__ import annotations

import inspect

import pytest

from drsvc.errors import (
    ConfigError,
    PreconditionFailedError,
    RefusedError,
    RequestMismatchError,
    TooLargeError,
)
from drsvc.runtime.failover.core_errors import checked_request_id, core_refusals, refusal
from failover import errors as core
from failover.errors import (
    FailoverRefused,
    PolicyError,
    PreconditionFailed,
    RecordTooLarge,
    RequestMismatch,
)

MAPPING: dict[type[FailoverRefused], type[RefusedError]] = {
    FailoverRefused: RefusedError,
    PreconditionFailed: PreconditionFailedError,
    RequestMismatch: RequestMismatchError,
    RecordTooLarge: TooLargeError,
}


def test_every_kind_of_the_cores_refusal_has_its_row() -> None:
    # A new kind in the core must be given its drsvc class here (or knowingly left plain).
    kinds = {
        value
        for _, value in inspect.getmembers(core, inspect.isclass)
        if issubclass(value, FailoverRefused)
    }
    assert kinds == set(MAPPING)


@pytest.mark.parametrize(("core_class", "drsvc_class"), MAPPING.items())
def test_a_core_refusal_becomes_its_drsvc_class_with_its_message_and_cause(
    core_class: type[FailoverRefused], drsvc_class: type[RefusedError]
) -> None:
    original = core_class("application orders is already active on west")
    with pytest.raises(RefusedError) as raised, core_refusals():
        raise original
    assert type(raised.value) is drsvc_class
    assert str(raised.value) == "application orders is already active on west"
    assert raised.value.__cause__ is original
    assert type(refusal(original)) is drsvc_class


def test_errors_other_than_refusals_pass_through_unchanged() -> None:
    with pytest.raises(PolicyError), core_refusals():
        raise PolicyError("not a refusal")


def test_a_request_id_the_naming_rule_rejects_is_a_config_error_from_the_rule() -> None:
    assert checked_request_id("change-4711:orders.v2") == "change-4711:orders.v2"
    with pytest.raises(ConfigError, match=r"request id '\.\.': 1 to 128") as raised:
        checked_request_id("..")
    assert isinstance(raised.value.__cause__, PolicyError)
