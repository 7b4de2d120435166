"""SCRAM credentials of a cluster's users, set through the admin API (KIP-554).

A KRaft cluster keeps SCRAM credentials in its metadata log; once the quorum runs they are set
with AlterUserScramCredentials by a principal allowed to alter the cluster. Setting one that
exists replaces it (an upsert), so calling this again with the same passwords changes nothing
that matters and a rotated password takes effect at once. Passwords never leave this call: not
in errors, not in logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from drsvc.errors import ConfigError
from drsvc.kafka.errors import translated

#: the mechanisms a cluster's users may get (Kafka's own names)
MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
#: Kafka's default iteration count for SCRAM (the minimum it accepts is 4096)
ITERATIONS = 8192


def upsert_scram_users(
    admin: AdminClient,
    passwords: Mapping[str, str],
    *,
    mechanism: str = "SCRAM-SHA-512",
    cluster: str | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Give each user of ``passwords`` that password for ``mechanism`` on the admin's cluster."""
    if not passwords:
        return
    found = MECHANISMS.get(mechanism)
    if found is None:
        raise ConfigError(
            f"SCRAM mechanism {mechanism!r} is not one of {', '.join(sorted(MECHANISMS))}"
        )
    info = ScramCredentialInfo(found, ITERATIONS)
    alterations: list[Any] = [
        UserScramCredentialUpsertion(user, info, password.encode())
        for user, password in sorted(passwords.items())
    ]
    with translated("setting SCRAM credentials", cluster):
        futures = admin.alter_user_scram_credentials(alterations, request_timeout=timeout_s)
    for user, future in sorted(futures.items()):
        with translated(f"setting the SCRAM credentials of {user}", cluster):
            future.result(timeout=timeout_s)
