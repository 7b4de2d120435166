"""Who asked for a failover: kept in its record, so every switch can be traced to a person or a
process afterwards.

A requester is a kind (how the request came in) and a name within that kind: the API token's
name and its role, the operating-system user who ran the CLI, the controller replica that
decided. Never a secret: a token's name is configured next to it, never the token itself.

Records written before requesters were kept have none; they read as :data:`UNKNOWN_REQUESTER`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from failover.errors import PolicyError, RecordFormatError

__all__ = [
    "UNKNOWN_REQUESTER",
    "RequestedBy",
    "RequesterKind",
    "decode_requester",
    "requester_fields",
]

#: a name as records keep it: printable, no spaces, bounded (user names and replica ids fit)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")
_MAX_NAME = 128


class RequesterKind(StrEnum):
    #: through the HTTP API: the name is the token's name, the role its role
    API = "api"
    #: ``drsvc failover`` / ``failback``: the name is the operating-system user, if known
    CLI = "cli"
    #: the automatic failover controller: the name is the replica that decided
    CONTROLLER = "controller"
    #: not recorded (a record from before requesters were kept, or a kind a newer build wrote)
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class RequestedBy:
    kind: RequesterKind
    #: the token's name, the user, or the replica ("": not known)
    name: str = ""
    #: the API token's role (``viewer``/``operator``); None for the other kinds
    role: str | None = None

    def __post_init__(self) -> None:
        if self.name and not _NAME.match(self.name):
            raise PolicyError(
                f"requester name {self.name[:_MAX_NAME]!r}: 1 to {_MAX_NAME} letters, digits, "
                "'.', '_', '@', ':' or '-', starting with a letter or digit"
            )

    @classmethod
    def of(cls, kind: RequesterKind, name: str | None, role: str | None = None) -> RequestedBy:
        """A requester whose name may not fit the rule (an unusual OS user name): kept as
        unknown within its kind rather than refusing the failover it asks for."""
        fitting = name if name and _NAME.match(name) else ""
        return cls(kind, fitting, role)

    def describe(self) -> str:
        """``api:alice (operator)``, ``cli:bob``, ``controller:ctl-1``, ``unknown``."""
        if self.kind is RequesterKind.UNKNOWN and not self.name:
            return "unknown"
        text = f"{self.kind.value}:{self.name or '?'}"
        return f"{text} ({self.role})" if self.role else text


UNKNOWN_REQUESTER = RequestedBy(RequesterKind.UNKNOWN)


def requester_fields(requester: RequestedBy) -> dict[str, Any]:
    return {"kind": requester.kind.value, "name": requester.name, "role": requester.role}


def decode_requester(value: object) -> RequestedBy:
    """The requester a record keeps: none (an older record) reads as unknown, and so does a
    kind this build does not know (the record stays readable: the field only informs)."""
    if value is None:
        return UNKNOWN_REQUESTER
    if not isinstance(value, dict):
        raise RecordFormatError("'requested_by' must be an object or null")
    kind, name, role = value.get("kind"), value.get("name", ""), value.get("role")
    if not isinstance(name, str) or not (role is None or isinstance(role, str)):
        raise RecordFormatError("'requested_by' needs a string 'name' and a string or null 'role'")
    known = {k.value: k for k in RequesterKind}
    try:
        return RequestedBy(known.get(str(kind), RequesterKind.UNKNOWN), name, role)
    except PolicyError as err:
        raise RecordFormatError(f"'requested_by': {err}") from err
