"""Rules across fields of a topology, each problem reported with its field path.

A single field cannot know that a flow names a cluster that does not exist, that two flows are the
same, or that an identity flow gives a target partition two writers. These checks run once the
file has the right shape and return every problem at once, as lines like
``flows[1].target: unknown cluster 'north' (known: east, west)``.

Why the identity rule: with identity naming, a topic written on both clusters (a flow each way, or
several flows into one target) has two writers per partition, so no offset on one cluster
corresponds to a position on the other and exact failover is impossible. Identity is therefore
allowed only when the target has exactly this one inbound flow and nothing leads back from the
target to the source, directly or through other clusters; the one exception is an active/passive
pair: an identity flow and its direct way back marked ``standby``, of which drsvc's failovers run
only one direction per application topic at a time.

Why one separator: a prefix flow recognises remote topics by splitting on its separator; a flow
splitting on ``.`` does not see that ``west_orders`` came from west, would copy it back and loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from failover.errors import PolicyError
from failover.replication_policy import PrefixPolicy

if TYPE_CHECKING:
    from collections.abc import Sequence

    from drsvc.topology.models import Flow, Topology

IDENTITY_WHY = (
    "no offset on one cluster corresponds to a position on the other, so exact failover is"
    " impossible; identity is allowed only for one-way flows (migration, active/passive)"
)


def cross_field_problems(topology: Topology) -> list[str]:
    """Every cross-field problem of ``topology``, in file order within each kind."""
    return [
        *_flow_problems(topology),
        *_identity_problems(topology),
        *_standby_problems(topology),
        *_application_problems(topology),
    ]


def _unknown_alias(topology: Topology, path: str, alias: str) -> str | None:
    if alias in topology.clusters:
        return None
    known = ", ".join(sorted(topology.clusters))
    return f"{path}: unknown cluster {alias!r} (known: {known})"


def _flow_problems(topology: Topology) -> list[str]:
    problems: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    first_separator: tuple[int, str] | None = None
    checked_separators: set[str] = set()
    names = topology.internal_names()
    for index, flow in enumerate(topology.flows):
        path = f"flows[{index}]"
        unknown = [
            problem
            for problem in (
                _unknown_alias(topology, f"{path}.source", flow.source),
                _unknown_alias(topology, f"{path}.target", flow.target),
            )
            if problem is not None
        ]
        problems.extend(unknown)
        if flow.source == flow.target:
            problems.append(
                f"{path}: source and target are both {flow.source!r}; a flow joins two clusters"
            )
            continue
        pair = (flow.source, flow.target)
        if pair in seen:
            problems.append(
                f"{path}: duplicate flow {flow.id} (already flows[{seen[pair]}]); merge their"
                " filters into one flow"
            )
            continue
        seen[pair] = index
        if unknown:
            continue
        try:
            names.offset_syncs_topic(flow.source)
            names.checkpoints_topic(flow.source)
        except PolicyError as err:
            problems.append(f"internal_topics: {err}")
        if flow.policy != "prefix":
            continue
        if first_separator is None:
            first_separator = (index, flow.separator)
        elif flow.separator != first_separator[1]:
            other, separator = first_separator
            problems.append(
                f"{path}.separator: {flow.separator!r} differs from {separator!r} in"
                f" flows[{other}]; all prefix flows must share one separator, or a flow"
                " would not recognise topics another flow copied and could loop"
            )
            continue
        if flow.separator not in checked_separators:
            checked_separators.add(flow.separator)
            try:
                PrefixPolicy(aliases=topology.aliases, separator=flow.separator)
            except PolicyError as err:
                problems.append(f"{path}.separator: {err}")
    return problems


def _identity_problems(topology: Topology) -> list[str]:
    problems: list[str] = []
    for index, flow in enumerate(topology.flows):
        if flow.policy != "identity" or flow.source == flow.target:
            continue
        path = f"flows[{index}].policy"
        others = [
            f"flows[{i}] ({other.id})"
            for i, other in enumerate(topology.flows)
            if other.target == flow.target and i != index
        ]
        if others:
            problems.append(
                f"{path}: identity flow {flow.id} shares its target with {', '.join(others)},"
                f" so '{flow.target}' would have two writers per topic; {IDENTITY_WHY}"
            )
            continue
        if _standby_pair(topology, flow):
            continue
        way_back = flow_path(topology, flow.target, flow.source)
        if way_back is not None:
            problems.append(
                f"{path}: identity flow {flow.id} has a way back ({' -> '.join(way_back)}),"
                f" so the same topic name is written on both clusters; {IDENTITY_WHY}"
            )
    return problems


def _standby_pair(topology: Topology, flow: Flow) -> bool:
    """An identity flow and its direct way back, one of them ``standby``: drsvc's failovers
    run only one of the two per application topic at a time (docs/failover.md), so the pair
    never writes one topic on both clusters at once."""
    back = [f for f in topology.flows if (f.source, f.target) == (flow.target, flow.source)]
    if len(back) != 1 or back[0].policy != "identity":
        return False
    if flow.standby == back[0].standby:
        return False
    # Nothing else may lead back: a third cluster in the loop would write the topic too.
    others = [f for f in topology.flows if f is not back[0]]
    return flow_path_in(others, flow.target, flow.source) is None


def flow_path(topology: Topology, start: str, goal: str) -> list[str] | None:
    """Shortest chain of flows from ``start`` to ``goal``, as aliases, or None if there is none."""
    return flow_path_in(topology.flows, start, goal)


def flow_path_in(flows: Sequence[Flow], start: str, goal: str) -> list[str] | None:
    """:func:`flow_path` over the given ``flows`` only."""
    previous: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for alias in frontier:
            for flow in flows:
                if flow.source != alias or flow.target in previous:
                    continue
                previous[flow.target] = alias
                if flow.target == goal:
                    path = [goal]
                    step = previous[goal]
                    while step is not None:
                        path.append(step)
                        step = previous[step]
                    return path[::-1]
                following.append(flow.target)
        frontier = following
    return None


def _standby_problems(topology: Topology) -> list[str]:
    return [
        f"flows[{index}].standby: flow {flow.id} can only stand by as the way back of an"
        f" identity flow {flow.target}->{flow.source} that is not standby itself, with both"
        " flows identity and no other way back"
        for index, flow in enumerate(topology.flows)
        if flow.standby and not (flow.policy == "identity" and _standby_pair(topology, flow))
    ]


def _application_problems(topology: Topology) -> list[str]:
    problems: list[str] = []
    app_index: dict[str, int] = {}
    group_owner: dict[str, int] = {}
    for index, app in enumerate(topology.applications):
        path = f"applications[{index}]"
        if app.name in app_index:
            problems.append(
                f"{path}.name: application {app.name!r} is already"
                f" applications[{app_index[app.name]}]"
            )
        app_index.setdefault(app.name, index)
        unknown = _unknown_alias(topology, f"{path}.preferred", app.preferred)
        if unknown is not None:
            problems.append(unknown)
        elif app.auto_failover and not topology.flows_from(app.preferred):
            problems.append(
                f"{path}.auto_failover: no flow leaves {app.preferred!r}, so there is no"
                " cluster to fail over to"
            )
        if unknown is None and app.sync_group_offsets:
            problems.extend(_group_sync_problems(topology, index))
        for group in app.groups:
            owner = group_owner.setdefault(group, index)
            if owner != index:
                problems.append(
                    f"{path}.groups: group {group!r} already belongs to applications[{owner}]"
                    f" ({topology.applications[owner].name}); a group fails over with one"
                    " application only"
                )
    return problems


def _group_sync_problems(topology: Topology, index: int) -> list[str]:
    """An application that opts in to group offset sync needs a flow that carries its groups'
    positions away from its preferred cluster; otherwise the option silently does nothing."""
    app = topology.applications[index]
    path = f"applications[{index}].sync_group_offsets"
    leaving = topology.flows_from(app.preferred)
    if not leaving:
        return [
            f"{path}: application {app.name!r}: no flow leaves {app.preferred!r}, so no cluster"
            " receives its groups' offsets"
        ]
    flow_ids = ", ".join(flow.id for flow in leaving)
    return [
        f"{path}: application {app.name!r}: group {group!r} is excluded by the groups filter of"
        f" every flow leaving {app.preferred!r} ({flow_ids}), so its offsets would never be"
        " synced"
        for group in app.groups
        if not any(flow.groups.to_filter().matches(group) for flow in leaving)
    ]
