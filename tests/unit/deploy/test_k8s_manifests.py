"""deploy/k8s: manifests valid against the Kubernetes schemas, and wired to the real CLI, the
topology in the ConfigMap, the metrics ports and the probes."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from deploy_assets import DEPLOY, parse_command_line

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


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_prometheus_scrapes_the_role_metrics(deployment: dict[str, Any]) -> None:
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    port = int(annotations["prometheus.io/port"])
    (container,) = _drsvc_containers(deployment)
    command, params = parse_command_line(container["args"])
    if command == "api":  # serves /metrics on its own port, on every interface
        assert params["host"] == "0.0.0.0"
        assert params["port"] == port
        return
    # role commands serve metrics on 127.0.0.1 only: a sidecar forwards the annotated port
    metrics_port = params["metrics_port"]
    assert metrics_port is not None and metrics_port != port
    containers = deployment["spec"]["template"]["spec"]["containers"]
    forwarders = [c for c in containers if c.get("command", [None])[0] == "socat"]
    assert len(forwarders) == 1
    assert forwarders[0]["command"][1:] == [
        f"TCP-LISTEN:{port},fork,reuseaddr",
        f"TCP:127.0.0.1:{metrics_port}",
    ]
    assert {p["containerPort"] for p in forwarders[0]["ports"]} == {port}


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["metadata"]["name"])
def test_probes(deployment: dict[str, Any]) -> None:
    (container,) = _drsvc_containers(deployment)
    command, params = parse_command_line(container["args"])
    live, ready = container["livenessProbe"], container["readinessProbe"]
    if command == "api":
        assert live["httpGet"]["path"] == "/healthz"
        assert ready["httpGet"]["path"] == "/readyz"
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports[live["httpGet"]["port"]] == params["port"]
        return
    for probe in (live, ready):
        script = probe["exec"]["command"]
        assert script[:2] == ["python", "-c"]
        assert f"http://127.0.0.1:{params['metrics_port']}/metrics" in script[2]
        compile(script[2], "probe", "exec")


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
