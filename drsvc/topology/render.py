"""What a topology will do, for people (rich tables) and programs (one JSON-able dict).

Both forms come from :func:`describe_topology`, so ``drsvc topology show`` and ``show --json``
never disagree. Besides restating the file, the description answers the questions operators ask
before turning a flow on: which names will the copies have on the target, which topics will not
be copied back (and why), and which internal topics will appear where.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from drsvc.topology.models import Cluster, Flow, NameFilterConfig, Topology

FROM_DEV_ENV = "(from drsvc dev)"


def example_topics(topology: Topology, flow: Flow) -> list[str]:
    """Topic names on ``flow``'s source worth showing: the applications' topics, heartbeats, and
    the copies of those that other flows bring to the source (to show they are not sent back)."""
    local = sorted({topic for app in topology.applications for topic in app.topics})
    local.append(topology.internal_names().heartbeats)
    names = list(local)
    for inbound in topology.flows_into(flow.source):
        for topic in local:
            verdict = topology.topic_verdict(inbound, topic)
            if verdict.replicate and verdict.target_topic is not None:
                names.append(verdict.target_topic)
    return list(dict.fromkeys(names))


def describe_topology(topology: Topology) -> dict[str, Any]:
    """Everything ``show`` prints, as plain JSON-able data."""
    names = topology.internal_names()
    return {
        "name": topology.name,
        "namespace": topology.namespace,
        "heartbeats_topic": names.heartbeats,
        "clusters": [_describe_cluster(c) for c in topology.clusters.values()],
        "flows": [_describe_flow(topology, flow) for flow in topology.flows],
        "applications": [
            {
                "name": app.name,
                "preferred": app.preferred,
                "auto_failover": app.auto_failover,
                "sync_group_offsets": app.sync_group_offsets,
                "on_unknown_translation": app.on_unknown_translation,
                "groups": list(app.groups),
                "topics": list(app.topics),
            }
            for app in topology.applications
        ],
    }


def _describe_cluster(cluster: Cluster) -> dict[str, Any]:
    security = cluster.security
    return {
        "alias": cluster.alias,
        "bootstrap_servers": cluster.bootstrap_servers,
        "bootstrap_from": "topology" if cluster.bootstrap_servers else "drsvc dev",
        "security_protocol": security.protocol,
        "sasl_mechanism": security.sasl.mechanism if security.sasl is not None else None,
    }


def _describe_flow(topology: Topology, flow: Flow) -> dict[str, Any]:
    names = topology.internal_names()
    examples = []
    for topic in example_topics(topology, flow):
        verdict = topology.topic_verdict(flow, topic)
        examples.append(
            {
                "topic": topic,
                "replicate": verdict.replicate,
                "target_topic": verdict.target_topic,
                "reason": verdict.reason,
            }
        )
    return {
        "id": flow.id,
        "source": flow.source,
        "target": flow.target,
        "policy": flow.policy,
        "separator": flow.separator if flow.policy == "prefix" else None,
        "delivery": flow.delivery,
        "start": flow.start.describe(),
        "multi_hop": flow.multi_hop,
        "standby": flow.standby,
        "topics": _describe_filter(flow.topics),
        "groups": _describe_filter(flow.groups),
        "internal_topics": {
            "cluster": flow.target,
            "offset_syncs": names.offset_syncs_topic(flow.source),
            "checkpoints": names.checkpoints_topic(flow.source),
        },
        "examples": examples,
    }


def _describe_filter(config: NameFilterConfig) -> dict[str, list[str]]:
    return {"include": list(config.include), "exclude": list(config.exclude)}


def render_topology(topology: Topology, console: Console) -> None:
    """Print the description of ``topology`` as tables."""
    data = describe_topology(topology)
    console.print(
        Text.assemble(
            ("Topology ", "bold"),
            (data["name"], "bold cyan"),
            f" (Consul namespace {data['namespace']})",
        )
    )
    console.print(Text(f"Heartbeats topic on every cluster: {data['heartbeats_topic']}"))
    console.print(_clusters_table(data["clusters"]))
    if not data["flows"]:
        console.print(Text("No flows: nothing is replicated.", style="yellow"))
    for flow in data["flows"]:
        console.print(_flow_table(flow))
        console.print(_examples_table(flow))
    if data["applications"]:
        console.print(_applications_table(data["applications"]))


def _table(title: str, *columns: str) -> Table:
    """A table that wraps long cells instead of cutting them: names must be shown whole."""
    table = Table(title=title, title_justify="left", title_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _clusters_table(clusters: list[dict[str, Any]]) -> Table:
    table = _table("Clusters", "alias", "bootstrap servers", "security")
    for cluster in clusters:
        security = cluster["security_protocol"]
        if cluster["sasl_mechanism"]:
            security += f" ({cluster['sasl_mechanism']})"
        table.add_row(
            Text(cluster["alias"]),
            Text(cluster["bootstrap_servers"] or FROM_DEV_ENV),
            Text(security),
        )
    return table


def _flow_table(flow: dict[str, Any]) -> Table:
    table = _table(f"Flow {flow['id']}", "setting", "value")
    policy = flow["policy"]
    if flow["separator"] is not None:
        policy += f" (separator {flow['separator']!r})"
    internal = flow["internal_topics"]
    rows = [
        ("policy", policy),
        ("delivery", flow["delivery"]),
        ("start", flow["start"]),
        ("multi-hop", "yes" if flow["multi_hop"] else "no"),
        (
            "standby",
            "yes (copies an application's topics only while it is failed over to the source)"
            if flow["standby"]
            else "no",
        ),
        ("topics", _filter_text(flow["topics"])),
        ("groups", _filter_text(flow["groups"])),
        (
            f"internal topics on {internal['cluster']}",
            f"{internal['offset_syncs']}\n{internal['checkpoints']}",
        ),
    ]
    for setting, value in rows:
        table.add_row(Text(setting), Text(value))
    return table


def _filter_text(rules: dict[str, list[str]]) -> str:
    text = "include " + ", ".join(rules["include"])
    if rules["exclude"]:
        text += "\nexclude " + ", ".join(rules["exclude"])
    return text


def _examples_table(flow: dict[str, Any]) -> Table:
    table = _table(
        f"Topic names for {flow['id']}", f"on {flow['source']}", f"on {flow['target']}", "why"
    )
    for example in flow["examples"]:
        target = example["target_topic"] if example["replicate"] else "(not copied)"
        style = "" if example["replicate"] else "dim"
        table.add_row(
            Text(example["topic"]), Text(target, style=style), Text(example["reason"], style=style)
        )
    return table


def _applications_table(applications: list[dict[str, Any]]) -> Table:
    table = _table(
        "Applications",
        "name",
        "preferred",
        "auto failover",
        "offset sync",
        "if unknown",
        "groups",
        "topics",
    )
    for app in applications:
        table.add_row(
            Text(app["name"]),
            Text(app["preferred"]),
            Text("yes" if app["auto_failover"] else "no"),
            Text("yes" if app["sync_group_offsets"] else "no"),
            Text(app["on_unknown_translation"]),
            Text(", ".join(app["groups"])),
            Text(", ".join(app["topics"])),
        )
    return table
