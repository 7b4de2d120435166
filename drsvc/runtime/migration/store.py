"""The migration's state in the coordination store (:mod:`failover.migration_state`)."""

from __future__ import annotations

from dataclasses import dataclass

from drsvc.adapters.coordination import Coordinator, Entry
from drsvc.errors import ConfigError
from failover.errors import FormatError
from failover.migration_state import MigrationState, migration_key


@dataclass(frozen=True)
class StoredState:
    """The state as read, with the index a conditional write compares against (0: absent)."""

    state: MigrationState | None
    index: int


class MigrationStore:
    def __init__(self, coordinator: Coordinator, namespace: str) -> None:
        self._store = coordinator
        self._ns = namespace

    @property
    def coordinator(self) -> Coordinator:
        return self._store

    def key(self, name: str) -> str:
        return migration_key(self._ns, name)

    def read(self, name: str) -> StoredState:
        entry: Entry | None = self._store.get(self.key(name))
        if entry is None:
            return StoredState(None, 0)
        try:
            return StoredState(MigrationState.from_json(entry.value), entry.index)
        except FormatError as err:
            raise ConfigError(f"migration {name}: {self.key(name)}: {err}") from err
