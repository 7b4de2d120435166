"""deploy/k8s: manifests valid against the Kubernetes schemas, and wired to the real CLI, the
topology in the ConfigMap, the metrics ports (served beyond loopback) and the probes."""

from __future__ import annotations

import copy
import ipaddress
import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from deploy_assets import DEPLOY, parse_command_line

from drsvc.settings import Settings
from drsvc.topology.loader import load_topology_text

K8S = DEPLOY / "k8s"
#: A Kubernetes version kubernetes-validate bundles schemas for (strict: no unknown fields).
KUBERNETES_VERSION = "1.33.0"
IMAGE = "drsvc:"
TOPOLOGY_PATH = "/etc/drsvc/topology.yaml"


def _documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document:
                found.append((path.name, document))
    return found


DOCUMENTS = _documents()
DEPLOYMENTS = [doc for _, doc in DOCUMENTS if doc["kind"] == "Deployment"]


def _id(item: tuple[str, dict[str, Any]]) -> str:
    return f"{item[0]}:{item[1]['kind']}"


def _drsvc_containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    """Containers that run a drsvc command (the image's entrypoint, no command override)."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return [c for c in containers if c["image"].startswith(IMAGE) and "command" not in c]


def _role(deployment: dict[str, Any]) -> str:
    return str(deployment["metadata"]["labels"]["app.kubernetes.io/component"])


def _topology() -> Any:
    configmap = next(doc for _, doc in DOCUMENTS if doc["kind"] == "ConfigMap")
    return load_topology_text(configmap["data"]["topology.yaml"], "drsvc-topology", env={})


@pytest.mark.parametrize("item", DOCUMENTS, ids=_id)
def test_manifest_is_valid_for_kubernetes(item: tuple[str, dict[str, Any]]) -> None:
    kubernetes_validate.validate(item[1], KUBERNETES_VERSION, strict=True)


def test_the_schema_check_rejects_an_unknown_field() -> None:
    broken = copy.deepcopy(DEPLOYMENTS[0])
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    listed = set(kustomization["resources"])
    present = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_deployment_selector_matches_its_pods(deployment: dict[str, Any]) -> None:
    selector = deployment["spec"]["selector"]["matchLabels"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_commands_exist_with_these_options(deployment: dict[str, Any]) -> None:
    flows = {flow.id for flow in _topology().flows}
    (container,) = _drsvc_containers(deployment)
    command, params = parse_command_line(container["args"])
    assert command == _role(deployment)
    assert str(params["topology_file"]) == TOPOLOGY_PATH
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert TOPOLOGY_PATH in mounts
    if "flow_id" in params and params["flow_id"] is not None:
        assert params["flow_id"] in flows
    assert params["log_format"] == "json"


def test_every_flow_has_workers_and_a_checkpoint_stream() -> None:
    by_role: dict[str, set[str]] = {"replicate": set(), "checkpoints": set()}
    for deployment in DEPLOYMENTS:
        if _role(deployment) in by_role:
            (container,) = _drsvc_containers(deployment)
            _, params = parse_command_line(container["args"])
            by_role[_role(deployment)].add(params["flow_id"])
    flows = {flow.id for flow in _topology().flows}
    assert by_role == {"replicate": flows, "checkpoints": flows}


def _secret_mounts(deployment: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """Mount path -> Secret name, for the container's mounts of Secret volumes."""
    volumes = {
        v["name"]: v["secret"]["secretName"]
        for v in deployment["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }
    return {
        m["mountPath"]: volumes[m["name"]]
        for m in container.get("volumeMounts", [])
        if m["name"] in volumes
    }


#: the Kafka principal (and its Secret) of each role: the ACLs of failover.kafka_acls
KAFKA_PRINCIPAL = {
    "replicate": "replicator",
    "heartbeats": "replicator",
    "checkpoints": "checkpoints",
    "controller": "executor",
    "api": "executor",
}


def test_the_topology_reads_passwords_from_files_the_pods_mount() -> None:
    """Passwords are files (a variable shows in the pod's spec and every child's environment);
    each pod mounts its own principal's Secret where the topology looks, and names that
    principal in the variable the topology reads the user name from."""
    files, variables = set(), set()
    for cluster in _topology().clusters.values():
        sasl = cluster.security.sasl
        assert sasl is not None and sasl.password_env is None
        assert sasl.password_file is not None
        files.add(Path(sasl.password_file))
        if sasl.username_env is not None:
            variables.add(sasl.username_env)
        tls = cluster.security.tls
        if tls is not None and tls.ca_file is not None:
            assert Path(tls.ca_file).parent == Path("/etc/drsvc/tls")
    assert files and variables
    for deployment in DEPLOYMENTS:
        (container,) = _drsvc_containers(deployment)
        principal = KAFKA_PRINCIPAL[_role(deployment)]
        mounts = _secret_mounts(deployment, container)
        for file in files:
            assert mounts.get(str(file.parent)) == f"drsvc-kafka-{principal}", file
        env = {e["name"]: e for e in container["env"]}
        for name in variables:
            assert env[name]["value"] == f"drsvc-{principal}"


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_no_secret_is_an_environment_variable(deployment: dict[str, Any]) -> None:
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        for variable in container.get("env", []):
            assert "secretKeyRef" not in variable.get("valueFrom", {}), variable["name"]


#: the Consul token of each role that uses Consul (the heartbeat emitters do not)
CONSUL_TOKEN = {
    "replicate": "replicator",
    "checkpoints": "checkpoints",
    "controller": "executor",
    "api": "executor",
}


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_each_role_mounts_its_own_consul_token_alone(deployment: dict[str, Any]) -> None:
    (container,) = _drsvc_containers(deployment)
    env = {e["name"]: e for e in container["env"]}
    mounts = _secret_mounts(deployment, container)
    consul_secrets = {path: s for path, s in mounts.items() if s.startswith("drsvc-consul-token")}
    role = CONSUL_TOKEN.get(_role(deployment))
    if role is None:
        assert not consul_secrets
        assert "CONSUL_HTTP_TOKEN_FILE" not in env
        return
    token_file = Path(env["CONSUL_HTTP_TOKEN_FILE"]["value"])
    assert consul_secrets == {str(token_file.parent): f"drsvc-consul-token-{role}"}


def _metrics_host(container: dict[str, Any]) -> str:
    """Where the role serves --metrics-port: DRSVC_METRICS_HOST of the container as the real
    settings read it (loopback when unset); a downward-API pod IP stands for itself."""
    environ = {}
    for variable in container.get("env", []):
        if "value" in variable:
            environ[variable["name"]] = variable["value"]
        elif variable.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
            environ[variable["name"]] = "$(status.podIP)"
    return Settings.from_env(environ).metrics_host


def _reachable_from_other_pods(host: str) -> bool:
    if host == "$(status.podIP)":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a name, e.g. localhost: not what a pod should bind its metrics to
        return False
    return not address.is_loopback


def _scraped_role_containers() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(deployment, container) for every scraped pod whose drsvc command takes --metrics-port."""
    found = []
    for deployment in DEPLOYMENTS:
        annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
        if annotations.get("prometheus.io/scrape") != "true":
            continue
        for container in _drsvc_containers(deployment):
            _, params = parse_command_line(container["args"])
            if "metrics_port" in params:
                found.append((deployment, container))
    return found


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_pods_run_only_drsvc(deployment: dict[str, Any]) -> None:
    """No sidecars: each pod is its drsvc command, with the image's entrypoint."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert containers == _drsvc_containers(deployment)
    assert len(containers) == 1


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_prometheus_scrapes_the_role_metrics(deployment: dict[str, Any]) -> None:
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    port = int(annotations["prometheus.io/port"])
    (container,) = _drsvc_containers(deployment)
    command, params = parse_command_line(container["args"])
    declared = {p["containerPort"] for p in container["ports"]}
    if command == "api":  # serves /metrics on its own port, on every interface
        assert params["host"] == "0.0.0.0"
        assert params["port"] == port
        assert port in declared
        return
    # the role serves the annotated port itself (on DRSVC_METRICS_HOST, checked below)
    assert params["metrics_port"] == port
    assert port in declared


def test_every_role_pod_is_scraped() -> None:
    scraped = {deployment["metadata"]["name"] for deployment, _ in _scraped_role_containers()}
    roles = {d["metadata"]["name"] for d in DEPLOYMENTS if _role(d) != "api"}
    assert scraped == roles


@pytest.mark.parametrize(
    "scraped", _scraped_role_containers(), ids=lambda item: item[0]["metadata"]["name"]
)
def test_scraped_roles_serve_metrics_beyond_loopback(
    scraped: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """Role commands serve --metrics-port on 127.0.0.1 unless DRSVC_METRICS_HOST says otherwise:
    Prometheus (another pod) and the kubelet's probes could not reach it."""
    _, container = scraped
    host = _metrics_host(container)
    assert _reachable_from_other_pods(host), host


def test_the_metrics_host_check_rejects_loopback() -> None:
    _, container = _scraped_role_containers()[0]
    unset = copy.deepcopy(container)
    unset["env"] = [e for e in unset["env"] if e["name"] != "DRSVC_METRICS_HOST"]
    assert _metrics_host(unset) == "127.0.0.1"
    assert not _reachable_from_other_pods(_metrics_host(unset))
    for loopback in ("127.0.0.1", "::1", "localhost"):
        pinned = copy.deepcopy(unset)
        pinned["env"].append({"name": "DRSVC_METRICS_HOST", "value": loopback})
        assert not _reachable_from_other_pods(_metrics_host(pinned)), loopback
    for everywhere in ("0.0.0.0", "::"):
        assert _reachable_from_other_pods(everywhere)


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_probes(deployment: dict[str, Any]) -> None:
    (container,) = _drsvc_containers(deployment)
    command, params = parse_command_line(container["args"])
    live, ready = container["livenessProbe"], container["readinessProbe"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    if command == "api":
        assert live["httpGet"]["path"] == "/healthz"
        assert ready["httpGet"]["path"] == "/readyz"
        assert ports[live["httpGet"]["port"]] == params["port"]
        return
    # the kubelet probes the pod IP: the role's own metrics port (served beyond loopback);
    # liveness asks whether the role's loops turn, not only whether its process serves
    assert live["httpGet"]["path"] == "/healthz"
    assert ready["httpGet"]["path"] == "/metrics"
    for probe in (live, ready):
        assert ports[probe["httpGet"]["port"]] == params["metrics_port"]


def _api() -> dict[str, Any]:
    (api,) = [d for d in DEPLOYMENTS if _role(d) == "api"]
    return api


def test_the_api_protects_reads_and_reads_its_tokens_from_a_secret() -> None:
    """--tokens-file is a copy (mode 600, in memory) an init container makes of the Secret
    drsvc-api-tokens: the API refuses a group-readable file, which a Secret volume under fsGroup
    is."""
    api = _api()
    (container,) = _drsvc_containers(api)
    _, params = parse_command_line(container["args"])
    assert params["public_reads"] is False
    tokens = Path(params["tokens_file"])
    pod = api["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    copy_volume = mounts[str(tokens.parent)]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[copy_volume]["emptyDir"]["medium"] == "Memory"
    (init,) = pod["initContainers"]
    init_mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert init_mounts[copy_volume] == str(tokens.parent)
    secret_volume = next(name for name in init_mounts if "secret" in volumes[name])
    assert volumes[secret_volume]["secret"]["secretName"] == "drsvc-api-tokens"
    script = init["command"][-1]
    assert f"{init_mounts[secret_volume]}/tokens" in script and str(tokens) in script
    assert "-m 600" in script
    service = next(d for _, d in DOCUMENTS if d["kind"] == "Service")
    assert (
        service["spec"]["selector"].items() <= api["spec"]["template"]["metadata"]["labels"].items()
    )


def test_the_api_keeps_a_replica_through_rollouts_and_disruptions() -> None:
    api = _api()
    assert api["spec"]["replicas"] == 2
    rolling = api["spec"]["strategy"]["rollingUpdate"]
    assert (rolling["maxSurge"], rolling["maxUnavailable"]) == (1, 0)
    (budget,) = [
        d
        for _, d in DOCUMENTS
        if d["kind"] == "PodDisruptionBudget"
        and d["spec"]["selector"]["matchLabels"].items()
        <= api["spec"]["template"]["metadata"]["labels"].items()
    ]
    assert budget["spec"]["minAvailable"] == 1


POLICIES = [doc for _, doc in DOCUMENTS if doc["kind"] == "NetworkPolicy"]


def _selects(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether ``policy`` applies to pods with ``labels`` (matchLabels, and In expressions)."""
    selector = policy["spec"]["podSelector"]
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    expressions = selector.get("matchExpressions", [])
    assert all(e["operator"] == "In" for e in expressions), "only In is checked here"
    return all(labels.get(e["key"]) in e["values"] for e in expressions)


def test_network_policies_deny_by_default() -> None:
    deny = [p for p in POLICIES if p["spec"]["podSelector"] == {}]
    assert len(deny) == 1
    assert set(deny[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny[0]["spec"] and "egress" not in deny[0]["spec"]


def _ingress_from(labels: dict[str, str], port: int) -> list[dict[str, Any]]:
    """The peers allowed to reach ``port`` of pods with ``labels``."""
    peers: list[dict[str, Any]] = []
    for policy in POLICIES:
        if not _selects(policy, labels):
            continue
        for rule in policy["spec"].get("ingress", []):
            if any(p["port"] == port for p in rule.get("ports", [])):
                peers += rule.get("from", [])
    return peers


def _namespaces(peers: list[dict[str, Any]]) -> set[str]:
    return {
        f"{key}={value}"
        for peer in peers
        for key, value in peer.get("namespaceSelector", {}).get("matchLabels", {}).items()
    }


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_metrics_are_reachable_from_the_monitoring_namespace_alone(
    deployment: dict[str, Any],
) -> None:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    port = int(deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"])
    namespaces = _namespaces(_ingress_from(labels, port))
    assert "kubernetes.io/metadata.name=monitoring" in namespaces
    if _role(deployment) != "api":
        assert namespaces == {"kubernetes.io/metadata.name=monitoring"}
    else:
        assert "drsvc.io/api-access=true" in namespaces


def test_roles_may_reach_kafka_consul_and_dns_only() -> None:
    for deployment in DEPLOYMENTS:
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        ports = {
            p["port"]
            for policy in POLICIES
            if _selects(policy, labels)
            for rule in policy["spec"].get("egress", [])
            for p in rule.get("ports", [])
        }
        assert ports == {53, 9093, 8500, 8501}, deployment["metadata"]["name"]
    for cluster in _topology().clusters.values():
        for server in (cluster.bootstrap_servers or "").split(","):
            assert int(server.rsplit(":", 1)[1]) == 9093, server


def test_controller_runs_replicas_named_after_their_pods() -> None:
    (controller,) = [d for d in DEPLOYMENTS if _role(d) == "controller"]
    assert controller["spec"]["replicas"] >= 2
    (container,) = _drsvc_containers(controller)
    _, params = parse_command_line(container["args"])
    assert params["replica"] == "$(POD_NAME)"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_consul_is_the_nodes_agent_where_the_role_uses_it(deployment: dict[str, Any]) -> None:
    (container,) = _drsvc_containers(deployment)
    env = {e["name"]: e for e in container["env"]}
    if _role(deployment) in {"controller", "api", "replicate", "checkpoints"}:
        assert env["DRSVC_CONSUL_HTTP_ADDR"]["value"] == "$(HOST_IP):8500"
        names = [e["name"] for e in container["env"]]
        assert names.index("HOST_IP") < names.index("DRSVC_CONSUL_HTTP_ADDR")


def test_pods_run_as_the_images_non_root_user() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    user = next(
        shlex.split(line)[1] for line in dockerfile.splitlines() if line.startswith("USER ")
    )
    for deployment in DEPLOYMENTS:
        security = deployment["spec"]["template"]["spec"]["securityContext"]
        assert security["runAsNonRoot"] is True
        assert f"{security['runAsUser']}:{security['runAsGroup']}" == user
