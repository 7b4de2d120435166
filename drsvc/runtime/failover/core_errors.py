"""The core's failover errors as drsvc's, mapped where the runtime calls the core.

``failover`` cannot import drsvc, so its plan refuses with its own
:class:`failover.errors.FailoverRefused` (and the kinds below it), and its naming rules reject
with :class:`failover.errors.PolicyError`. Mapping both here, with the message kept and the
original as ``__cause__``, lets the commands, the API and the controller catch drsvc's errors
only (:mod:`drsvc.errors`), and keeps each kind of refusal distinct, so the API still answers
412 for a failed precondition and 409 for a reused request id.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from drsvc.errors import (
    ConfigError,
    PreconditionFailedError,
    RefusedError,
    RequestMismatchError,
    TooLargeError,
)
from failover.errors import (
    FailoverRefused,
    PolicyError,
    PreconditionFailed,
    RecordTooLarge,
    RequestMismatch,
)
from failover.naming import check_request_id

__all__ = ["REFUSAL_KINDS", "checked_request_id", "core_refusals", "refusal"]

#: each kind of the core's refusal and drsvc's for it; a kind not listed maps as a plain refusal
REFUSAL_KINDS: tuple[tuple[type[FailoverRefused], type[RefusedError]], ...] = (
    (PreconditionFailed, PreconditionFailedError),
    (RequestMismatch, RequestMismatchError),
    (RecordTooLarge, TooLargeError),
)


def refusal(err: FailoverRefused) -> RefusedError:
    """drsvc's refusal for the core's ``err``, with its message (raise it ``from err``)."""
    ours = next((drsvc for core, drsvc in REFUSAL_KINDS if isinstance(err, core)), RefusedError)
    return ours(str(err))


@contextmanager
def core_refusals() -> Iterator[None]:
    """Around calls into the core's failover plan: its refusals leave as drsvc's."""
    try:
        yield
    except FailoverRefused as err:
        raise refusal(err) from err


def checked_request_id(request_id: str) -> str:
    """``request_id`` if it may name a request (it becomes part of a Consul key); a
    :class:`ConfigError` naming the core's rule if not."""
    try:
        return check_request_id(request_id)
    except PolicyError as err:
        raise ConfigError(str(err)) from err
