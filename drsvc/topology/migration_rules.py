"""Rules across fields of a topology's ``migrations``, each problem reported with its field path.

A migration names two different known clusters, a name no other migration has, and only
applications the topology defines; problems come back as lines like
``migrations[0].target: unknown cluster 'north' (known: east, west)``, as
:mod:`drsvc.topology.rules` reports the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drsvc.topology.models import Topology


def migration_problems(topology: Topology) -> list[str]:
    """Every problem of ``topology.migrations``, in file order."""
    problems: list[str] = []
    known_clusters = ", ".join(sorted(topology.clusters))
    app_names = {app.name for app in topology.applications}
    known_apps = ", ".join(sorted(app_names)) or "none"
    seen: dict[str, int] = {}
    for index, migration in enumerate(topology.migrations):
        path = f"migrations[{index}]"
        if migration.name in seen:
            problems.append(
                f"{path}.name: migration {migration.name!r} is already"
                f" migrations[{seen[migration.name]}]"
            )
        seen.setdefault(migration.name, index)
        for field, alias in (("source", migration.source), ("target", migration.target)):
            if alias not in topology.clusters:
                problems.append(
                    f"{path}.{field}: unknown cluster {alias!r} (known: {known_clusters})"
                )
        if migration.source == migration.target:
            problems.append(
                f"{path}: source and target are both {migration.source!r}; a migration moves"
                " topics from one cluster to another"
            )
        for app_index, app in enumerate(migration.applications):
            if app not in app_names:
                problems.append(
                    f"{path}.applications[{app_index}]: unknown application {app!r}"
                    f" (known: {known_apps})"
                )
            elif migration.applications.index(app) != app_index:
                problems.append(f"{path}.applications[{app_index}]: {app!r} is listed twice")
    return problems
