"""One local KRaft Kafka node: its configuration, storage format and process.

Each node runs broker and controller in one JVM; a cluster of three nodes has a three-voter
controller quorum. The settings below are tuned so that several clusters share a 2-core machine:
small heap, serial GC, one or two network/IO threads, internal topics with few partitions and no
initial rebalance delay.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from drsvc.components import KafkaInstall
from drsvc.devenv import secure
from drsvc.devenv.link_plan import listener_name
from drsvc.devenv.processes import ProcessHandle, spawn
from drsvc.devenv.state import BrokerNode, KafkaSite, LinkListener
from drsvc.errors import ConfigError, ProcessStartError

LOG4J2_TEMPLATE = """\
Configuration:
  status: warn
  Appenders:
    RollingFile:
      name: server
      fileName: "{log_dir}/server.log"
      filePattern: "{log_dir}/server.log.%i"
      PatternLayout: {{pattern: "[%d] %p %m (%c)%n"}}
      Policies: {{SizeBasedTriggeringPolicy: {{size: 20MB}}}}
      DefaultRolloverStrategy: {{max: 3}}
  Loggers:
    Root: {{level: INFO, AppenderRef: [{{ref: server}}]}}
    Logger:
      - {{name: kafka.request.logger, level: WARN}}
      - {{name: org.apache.kafka.controller, level: INFO}}
      - {{name: state.change.logger, level: WARN}}
"""

READY_MARKER = "Kafka Server started"

#: properties that follow from the site's layout (ids, ports, quorum, data directory): an
#: override of one of them would break the cluster rather than tune it
RESERVED_PROPERTIES = frozenset(
    {
        "process.roles",
        "node.id",
        "controller.quorum.voters",
        "listeners",
        "advertised.listeners",
        "controller.listener.names",
        "inter.broker.listener.name",
        "listener.security.protocol.map",
        "log.dirs",
        # a secured site's authorization is the environment's to set
        "authorizer.class.name",
        "allow.everyone.if.no.acl.found",
        "super.users",
    }
)
_PROPERTY_NAME = re.compile(r"^[a-z][a-z0-9]*([._-][a-z0-9]+)*$")


def check_broker_overrides(alias: str, overrides: Mapping[str, object]) -> dict[str, str]:
    """Validated broker property overrides for site ``alias``, as strings.

    Raises :class:`ConfigError` naming the property for a malformed name, a value that would not
    fit on one line of ``server.properties``, or a property the environment derives itself.
    """
    checked: dict[str, str] = {}
    for key, raw in overrides.items():
        if not isinstance(key, str) or not _PROPERTY_NAME.match(key):
            raise ConfigError(f"cluster {alias!r}: {key!r} is not a broker property name")
        if key in RESERVED_PROPERTIES:
            raise ConfigError(
                f"cluster {alias!r}: broker property {key} is set by the local environment "
                "(ids, ports and data directories follow from the site) and cannot be overridden"
            )
        if isinstance(raw, bool):
            value = "true" if raw else "false"  # Kafka's spelling, not Python's
        else:
            value = raw if isinstance(raw, str) else str(raw)
        if "\n" in value or "\r" in value:
            raise ConfigError(
                f"cluster {alias!r}: broker property {key} needs a one-line string value, "
                f"got {raw!r}"
            )
        checked[key] = value
    return checked


def node_dir(state_dir: Path, site: KafkaSite, node: BrokerNode) -> Path:
    return state_dir / "sites" / site.alias / f"kafka-{node.node_id}"


def server_properties(
    site: KafkaSite,
    node: BrokerNode,
    data_dir: Path,
    link_listeners: Sequence[LinkListener] = (),
    secured: Mapping[str, str] | None = None,
) -> str:
    """Render server.properties for ``node`` of ``site``, with the site's broker overrides.

    ``link_listeners`` (an environment with links) add a listener per other site, advertised at
    the address of the proxy that site's clients go through. ``secured``: the TLS, SASL and
    authorization settings of a secured site (:func:`drsvc.devenv.secure.broker_properties`),
    whose listeners are then SASL_SSL for clients and mutual TLS between brokers and for the
    controllers: no plaintext listener is left."""
    if site.secure and (secured is None or node.mtls_port is None):
        raise ConfigError(f"cluster {site.alias!r} is secured but has no TLS settings or port")
    host = site.host
    voters = ",".join(f"{n.node_id}@{host}:{n.controller_port}" for n in site.nodes)
    replicas = min(3, len(site.nodes))
    min_isr = 2 if replicas >= 3 else 1
    client = "SASL_SSL" if site.secure else "PLAINTEXT"
    listeners = [f"{client}://{host}:{node.broker_port}"]
    advertised = [f"{client}://{host}:{node.broker_port}"]
    protocols = [f"{client}:{client}"]
    if site.secure:
        listeners.append(f"SSL://{host}:{node.mtls_port}")
        advertised.append(f"SSL://{host}:{node.mtls_port}")
        protocols.append("SSL:SSL")
    per_listener: dict[str, str] = {}
    for link in link_listeners:
        name = listener_name(link.client_site)
        listeners.append(f"{name}://{host}:{link.listener_port}")
        advertised.append(f"{name}://{host}:{link.proxy_port}")
        protocols.append(f"{name}:{client}")
        if site.secure:
            per_listener.update(secure.listener_login(name))
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": ",".join([*listeners, f"CONTROLLER://{host}:{node.controller_port}"]),
        "advertised.listeners": ",".join(advertised),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "SSL" if site.secure else "PLAINTEXT",
        "listener.security.protocol.map": ",".join(
            [*protocols, f"CONTROLLER:{'SSL' if site.secure else 'PLAINTEXT'}"]
        ),
        "log.dirs": str(data_dir),
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "2",
        "num.partitions": "1",
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(min_isr),
        "offsets.topic.replication.factor": str(replicas),
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min_isr),
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(min_isr),
        "share.coordinator.state.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        "log.retention.hours": "168",
        "log.segment.bytes": str(64 * 1024 * 1024),
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
    }
    if secured is not None:
        props.update(secured)
        props.update(per_listener)
    # The site's overrides come last: a test cluster may, say, expire group offsets in a minute.
    props.update(site.broker_overrides)
    return "".join(f"{key}={value}\n" for key, value in props.items())


def java_command(
    java: str, kafka: KafkaInstall, heap: str, log4j_file: Path, main_class: str, *args: str
) -> list[str]:
    return [
        java,
        f"-Xmx{heap}",
        "-Xms64m",
        "-XX:+UseSerialGC",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j_file}",
        "-cp",
        kafka.classpath,
        main_class,
        *args,
    ]


def prepare(
    state_dir: Path,
    site: KafkaSite,
    node: BrokerNode,
    java: str,
    kafka: KafkaInstall,
    link_listeners: Sequence[LinkListener] = (),
    secured: Mapping[str, str] | None = None,
) -> Path:
    """Write the node's config and format its storage once; return the properties file."""
    base = node_dir(state_dir, site, node)
    data_dir = base / "data"
    log_dir = base / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    props_file = base / "server.properties"
    props_file.write_text(server_properties(site, node, data_dir, link_listeners, secured))
    log4j_file = base / "log4j2.yaml"
    log4j_file.write_text(LOG4J2_TEMPLATE.format(log_dir=log_dir))
    if not (data_dir / "meta.properties").exists():
        cmd = java_command(
            java,
            kafka,
            "256m",
            log4j_file,
            "kafka.tools.StorageTool",
            "format",
            # One argument each: a cluster id may start with '-', which would read as a flag.
            f"--cluster-id={site.cluster_id}",
            f"--config={props_file}",
        )
        result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if result.returncode != 0:
            format_log = log_dir / "format.log"
            format_log.write_text(result.stdout + result.stderr)
            raise ProcessStartError(
                f"Kafka storage format for {site.alias} node {node.node_id}",
                f"exit code {result.returncode}",
                format_log,
            )
    return props_file


def start(
    state_dir: Path, site: KafkaSite, node: BrokerNode, java: str, kafka: KafkaInstall, heap: str
) -> ProcessHandle:
    """Start the node's JVM (config must be prepared); returns without waiting for readiness."""
    base = node_dir(state_dir, site, node)
    cmd = java_command(
        java, kafka, heap, base / "log4j2.yaml", "kafka.Kafka", str(base / "server.properties")
    )
    handle, _ = spawn(cmd, log_file=base / "logs" / "stdout.log", cwd=base)
    return handle


def server_log(state_dir: Path, site: KafkaSite, node: BrokerNode) -> Path:
    return node_dir(state_dir, site, node) / "logs" / "server.log"


def failure_reason(state_dir: Path, site: KafkaSite, node: BrokerNode) -> tuple[str, Path]:
    """Why a node died, and the log that says so: the broker log, else the JVM's own output
    (a JVM that cannot start, e.g. for a bad heap size, never reaches the broker log)."""
    logs = node_dir(state_dir, site, node) / "logs"
    # The broker log's newest error is the cause; the JVM prints its cause first, then a summary.
    for log, newest in ((logs / "server.log", True), (logs / "stdout.log", False)):
        line = last_error_line(log, newest=newest)
        if line is not None:
            return line, log
    return "the process exited without logging an error", logs / "stdout.log"


ERROR_WORDS = re.compile(r"\b(ERROR|FATAL|Error|Exception|Invalid)\b")


def last_error_line(log_file: Path, newest: bool = True) -> str | None:
    """The newest (or, for JVM output, the first) error of a log file's tail, to quote in a start
    failure. The JVM states a start failure on two lines, so the first is joined with the next."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()[-400:]
    except OSError:
        return None
    order = range(len(lines) - 1, -1, -1) if newest else range(len(lines))
    for i in order:
        if ERROR_WORDS.search(lines[i]):
            text = lines[i].strip()
            if not newest and i + 1 < len(lines):
                text = f"{text}: {lines[i + 1].strip()}"
            return text[:300]
    return None
