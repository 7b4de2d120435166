"""A client factory whose admin clients a test scripts (the in-memory clusters have none).

:class:`ScriptedAdmins` is the port's :class:`~drsvc.kafka.clients.KafkaClients` with one
thing replaced: the admin client of an alias is what the test's ``build`` returns for it. Like
the real factory it builds one per alias, on first use, and hands out that one afterwards, so a
test sees how often its code asks the cluster, not how often it asks the factory. Consumers and
producers are refused: a test that needs them uses ``FakeKafkaClients``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.types import AdminClient, Consumer, Producer
from drsvc.topology.models import Topology


class ScriptedAdmins(KafkaClients):
    def __init__(self, topology: Topology, build: Callable[[str], Any]) -> None:
        super().__init__(topology)
        self._build = build
        #: (alias, admin) for every admin client built, in order
        self.built: list[tuple[str, Any]] = []

    def admin(self, alias: str) -> AdminClient:
        self.config(alias)  # an alias the topology does not have is refused, as for real
        if alias not in self._admins:
            admin = self._build(alias)
            self.built.append((alias, admin))
            self._admins[alias] = cast(AdminClient, admin)
        return self._admins[alias]

    def credentials_refused(self, alias: str) -> str | None:
        """Scripted admins are never refused (their errors are scripted as exceptions)."""
        return None

    def consumer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Consumer:
        raise NotImplementedError("ScriptedAdmins builds admin clients only")

    def producer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Producer:
        raise NotImplementedError("ScriptedAdmins builds admin clients only")
