"""The shapes of the API's failover answers, for the OpenAPI document.

The handlers answer with the documents of :mod:`drsvc.runtime.failover.views` (one shape for
the CLI's ``--json`` and the API); these models describe the fields a client relies on, and
allow the rest, so the document never claims less than an answer holds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FailoverAnswer", "Requester"]


class Requester(BaseModel):
    """Who asked for a failover: never a secret."""

    kind: Literal["api", "cli", "controller", "unknown"] = Field(
        description="How the request came in: `api` (a token), `cli` (drsvc failover), "
        "`controller` (automatic failover), `unknown` (a record from before requesters were "
        "kept)."
    )
    name: str = Field(
        description="The API token's name, the operating-system user of the CLI, or the "
        "controller replica that decided (empty: not known)."
    )
    role: str | None = Field(description="The API token's role (`viewer`, `operator`); null else.")


class FailoverAnswer(BaseModel):
    """A failover's record as the API answers it (more fields follow: steps, events, groups,
    cut-offs, the unreplicated ranges, the recovery)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str
    app: str
    from_cluster: str = Field(alias="from")
    to: str
    kind: Literal["planned", "unplanned"]
    state: str
    request_id: str | None
    requested_by: Requester
    rpo_records: int = Field(
        description="Records not replicated (the recovery point): a lower bound while "
        "`rpo_exact` is false."
    )
    rpo_exact: bool
    rpo_measured_by: Literal["switch", "recovery"] = Field(
        description="`switch`: what the failover saw (an unplanned failover cannot see the "
        "lost cluster's end); `recovery`: counted when the returned site was recovered, exact."
    )
