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


def test_the_topology_names_secrets_the_pods_provide() -> None:
    needed = set()
    for cluster in _topology().clusters.values():
        sasl = cluster.security.sasl
        if sasl is not None and sasl.password_env is not None:
            needed.add(sasl.password_env)
        tls = cluster.security.tls
        if tls is not None and tls.ca_file is not None:
            assert Path(tls.ca_file).parent == Path("/etc/drsvc/tls")
    assert needed
    for deployment in DEPLOYMENTS:
        (container,) = _drsvc_containers(deployment)
        env = {e["name"] for e in container["env"]}
        assert needed <= env, deployment["metadata"]["name"]


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
    # the kubelet probes the pod IP: the role's own metrics port (served beyond loopback)
    for probe in (live, ready):
        assert probe["httpGet"]["path"] == "/metrics"
        assert ports[probe["httpGet"]["port"]] == params["metrics_port"]


def test_the_api_token_comes_from_a_secret() -> None:
    (api,) = [d for d in DEPLOYMENTS if _role(d) == "api"]
    (container,) = _drsvc_containers(api)
    env = {e["name"]: e for e in container["env"]}
    assert "secretKeyRef" in env["DRSVC_API_TOKEN"]["valueFrom"]
    service = next(d for _, d in DOCUMENTS if d["kind"] == "Service")
    assert (
        service["spec"]["selector"].items() <= api["spec"]["template"]["metadata"]["labels"].items()
    )


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
