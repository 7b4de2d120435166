"""No secret leaves where it belongs: every output of a secured ``drsvc run`` is searched for
every secret of the environment, and each role's process environment for the others' secrets.

One secured environment (two sites, SASL_SSL with SCRAM, ACLs that allow nothing by default, its
own state directory). ``drsvc run`` runs every role (replication, heartbeats, checkpoints, the
controller and the API with a tokens file) under one principal with the grants of all of them,
with records flowing; then ``drsvc status``, every GET route of the API with an operator's
token, ``/metrics``, the dashboard and its static files, each role's ``/metrics`` and a wrong
API token are asked, and a second, short run is given a wrong Kafka password. Everything they
printed, logged, answered or left in their state directories is searched for each SCRAM
password, each private key's body, each API token, each Consul token (the secured Consul's
token files once the environment has them; variables of the roles' own until then) and the
wrong password. A kind of output that was not collected fails the test: a search of nothing
proves nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from replication_support import create

from drsvc.devenv.environment import LocalEnvironment
from drsvc.kafka.acls import create_acls
from drsvc.kafka.admin import admin_client
from drsvc.ports import allocate_ports
from drsvc.settings import Settings
from drsvc.topology import load_topology_text
from failover.kafka_acls import Principals, role_grants

pytestmark = pytest.mark.timeout(600)

SITES = ("east", "west")
#: the one principal every role of the run uses (a topology names one per cluster)
PRINCIPAL = "drsvc-run"
APP = "app"
RUN_FOR_S = 30.0
#: the variable west's password comes from (east's comes from its file)
KAFKA_PASSWORD_ENV = "DRSVC_TEST_KAFKA_PASSWORD"
#: Consul token variables by role, while the environment's Consul is not secured
CONSUL_TOKEN_ENV = {
    "replicator": "DRSVC_TEST_REPLICATOR_TOKEN",
    "checkpoints": "DRSVC_TEST_CHECKPOINTS_TOKEN",
    "executor": "DRSVC_TEST_EXECUTOR_TOKEN",
}
#: which Consul role each kind of process is (heartbeats use no Consul)
CONSUL_ROLE_OF = {
    "replicate": "replicator",
    "checkpoints": "checkpoints",
    "controller": "executor",
    "api": "executor",
}
#: in the supervisor's environment, wanted by no role
UNRELATED_SECRET_ENV = "DRSVC_TEST_UNRELATED_SECRET"


@dataclass
class Secured:
    env: LocalEnvironment
    tmp: Path
    topic: str
    topology: Path
    #: the supervisor's environment: every role's variables and more
    run_env: dict[str, str]
    #: every secret, by where it comes from (for messages; never printed in full)
    secrets: dict[str, str]
    #: secrets that are environment variables' values, by variable
    env_secrets: dict[str, str]
    operator_token: str
    api_port: int
    tokens_file: Path
    admin: dict[str, tuple[str, dict[str, str]]]


@dataclass
class Scanned:
    """What the test read back, by kind of output."""

    files: dict[str, list[Path]] = field(default_factory=dict)
    #: the environment of each role's process, from /proc
    environs: dict[str, dict[str, str]] = field(default_factory=dict)

    def add(self, kind: str, path: Path) -> None:
        self.files.setdefault(kind, []).append(path)

    def save(self, kind: str, name: str, data: bytes, where: Path) -> None:
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{kind}-{len(self.files.get(kind, []))}-{name}"
        path.write_bytes(data)
        self.add(kind, path)

    def add_tree(self, kind: str, root: Path) -> None:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                self.add(kind, path)


def _key_bodies(tls_dir: Path) -> dict[str, str]:
    """Each line of each private key's PEM body (a line is 64 characters of the key)."""
    found: dict[str, str] = {}
    for key in sorted(tls_dir.glob("*.key")):
        lines = [line.strip() for line in key.read_text().splitlines()]
        body = [line for line in lines if line and not line.startswith("-----")]
        for index, line in enumerate(body):
            if len(line) >= 16:
                found[f"private key {key.name} line {index}"] = line
    return found


def _consul_secrets(secure_root: Path) -> dict[str, str]:
    """The secured Consul's tokens and keys, when the environment has them."""
    found: dict[str, str] = {}
    consul = secure_root / "consul"
    if consul.is_dir():
        for path in sorted(consul.rglob("*")):
            if path.is_file() and "accessor" not in path.name:
                value = path.read_text(errors="replace").strip()
                if value:
                    found[f"consul {path.relative_to(consul)}"] = value
    return found


def _consul_block(env: LocalEnvironment) -> dict[str, Any] | None:
    """The run's ``consul:`` block: every role's token file, when the environment's Consul is
    secured (None while it is not)."""
    merged: dict[str, Any] | None = None
    for role in CONSUL_TOKEN_ENV:
        block = env.topology_consul(role)  # type: ignore[arg-type]
        if block is None:
            return None
        if merged is None:
            merged = {k: v for k, v in block.items() if k != "tokens"} | {"tokens": {}}
        merged["tokens"].update(block.get("tokens", {}))
    return merged


def _document(
    topic: str, clusters: dict[str, dict[str, Any]], consul: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": f"hyg-{topic}",
        "clusters": clusters,
        "flows": [{"source": "east", "target": "west", "topics": {"include": [f"^{topic}$"]}}],
        "applications": [
            {"name": APP, "groups": ["g1"], "topics": [topic], "preferred": "east", "lease_s": 2.0}
        ],
        "consul": consul,
    }


def _write_topology(
    env: LocalEnvironment, bootstraps: Mapping[str, str], tmp: Path
) -> tuple[Path, str, dict[str, str], dict[str, str]]:
    """The run's topology file, its topic, the supervisor's environment and the secrets in it.

    East reads the principal's password from its file, west from a variable: both ways are
    covered. Each role's Consul token is its own file once the environment's Consul is secured,
    else a variable of its own (Consul without ACLs ignores tokens: these only prove that each
    role is handed its own variable and no other role's)."""
    security = env.topology_security(PRINCIPAL)
    assert security is not None
    password_file = Path(security["sasl"]["password_file"])  # type: ignore[index]
    west_security = json.loads(json.dumps(security))
    del west_security["sasl"]["password_file"]
    west_security["sasl"]["password_env"] = KAFKA_PASSWORD_ENV
    clusters = {
        alias: {
            "bootstrap_servers": bootstraps[alias],
            "security": security if alias == "east" else west_security,
        }
        for alias in SITES
    }
    env_secrets = {
        KAFKA_PASSWORD_ENV: password_file.read_text().strip(),
        UNRELATED_SECRET_ENV: uuid.uuid4().hex,
    }
    run_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("CONSUL_", "DRSVC_CONSUL_"))
    }
    consul_block = _consul_block(env)
    if consul_block is None:
        consul_block = {
            "tokens": {role: {"token_env": var} for role, var in CONSUL_TOKEN_ENV.items()}
        }
        env_secrets |= {var: str(uuid.uuid4()) for var in CONSUL_TOKEN_ENV.values()}
        address = env.info().consul_http_addr
        assert address is not None
        run_env["DRSVC_CONSUL_HTTP_ADDR"] = address
    else:
        # address and TLS only: a CONSUL_HTTP_TOKEN_FILE would win over each role's token
        run_env |= {
            k: v
            for k, v in env.consul_environment("executor").items()
            if not k.startswith("CONSUL_HTTP_TOKEN")
        }
    topic = f"hyg-{uuid.uuid4().hex[:6]}"
    topology = tmp / "run.json"
    topology.write_text(json.dumps(_document(topic, clusters, consul_block), indent=2))
    return topology, topic, run_env, env_secrets


def _grant_every_role(
    env: LocalEnvironment, topology: Path, topic: str, environ: Mapping[str, str]
) -> dict[str, tuple[str, dict[str, str]]]:
    """The topic on east, and the grants of every role for the run's one principal; returns
    each cluster's administration (bootstrap servers and settings)."""
    loaded = load_topology_text(topology.read_text(), env=environ)
    principals = Principals(
        replicator=f"User:{PRINCIPAL}",
        heartbeats=f"User:{PRINCIPAL}",
        checkpoints=f"User:{PRINCIPAL}",
        executor=f"User:{PRINCIPAL}",
    )
    admin: dict[str, tuple[str, dict[str, str]]] = {}
    for alias in SITES:
        bootstrap, admin_settings = env.admin_settings(alias)
        admin[alias] = (bootstrap, admin_settings)
        if alias == "east":
            create(bootstrap, topic, 2, admin_settings)
        client = admin_client(bootstrap, admin_settings)
        for role in ("replicator", "heartbeats", "checkpoints", "executor"):
            grants = role_grants(loaded, role, alias, principals=principals)  # type: ignore[arg-type]
            create_acls(client, grants, cluster=alias)
    return admin


def _files_secrets(secure_root: Path) -> dict[str, str]:
    """Every SCRAM password, private key body and Consul token the environment keeps."""
    secrets: dict[str, str] = {}
    for file in sorted((secure_root / "kafka").glob("*.password")):
        secrets[f"SCRAM password of {file.stem}"] = file.read_text().strip()
    return secrets | _key_bodies(secure_root / "tls") | _consul_secrets(secure_root)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    state_dir = tmp_path_factory.mktemp("drsvc-hygiene-state")
    tmp = tmp_path_factory.mktemp("hygiene")
    env = LocalEnvironment(Settings.from_env(state_dir=state_dir, consul_layout="single"))
    try:
        info = env.up(list(SITES), secure=True)
        env.add_principal(PRINCIPAL)
        topology, topic, run_env, env_secrets = _write_topology(env, info.clusters, tmp)
        admin = _grant_every_role(env, topology, topic, {**run_env, **env_secrets})

        operator_token, viewer_token = uuid.uuid4().hex, uuid.uuid4().hex
        tokens_file = tmp / "api-tokens"
        tokens_file.write_text(f"ops operator {operator_token}\nwatch viewer {viewer_token}\n")
        tokens_file.chmod(0o600)
        env_secrets["DRSVC_API_TOKEN"] = uuid.uuid4().hex
        api_port = allocate_ports("127.0.0.1", 1)[0]
        run_env |= env_secrets | {"DRSVC_API_PORT": str(api_port)}

        secrets = {
            **_files_secrets(state_dir / "secure"),
            "API token ops": operator_token,
            "API token watch": viewer_token,
            **{f"variable {k}": v for k, v in env_secrets.items() if k != KAFKA_PASSWORD_ENV},
        }
        assert len(secrets) >= 10, sorted(secrets)
        yield Secured(
            env,
            tmp,
            topic,
            topology,
            run_env,
            secrets,
            env_secrets,
            operator_token,
            api_port,
            tokens_file,
            admin,
        )
    finally:
        env.down()


class Run:
    """``drsvc run --plain`` with its own state directory, its output in a file."""

    def __init__(self, secured: Secured, name: str, topology: Path, roles: str) -> None:
        self.state_dir = secured.tmp / f"{name}-state"
        self.output = secured.tmp / f"{name}.out"
        with self.output.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "drsvc.cli.main", "run", "--topology", str(topology),
                 "--roles", roles, "--plain", "--summary-every-s", "5", "--grace-s", "20",
                 "--state-dir", str(self.state_dir),
                 "--api-tokens-file", str(secured.tokens_file)],
                stdout=out, stderr=subprocess.STDOUT, env=secured.run_env,
            )  # fmt: skip

    def roles(self) -> dict[str, dict[str, Any]]:
        try:
            document = json.loads((self.state_dir / "run" / "roles.json").read_text())
        except (OSError, ValueError):
            return {}
        return {role["name"]: role for role in document["roles"]}

    def tail(self) -> str:
        return "\n".join(self.output.read_text(errors="replace").splitlines()[-40:])

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"drsvc run did not stop:\n{self.tail()}") from None


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=15) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
    except (urllib.error.URLError, OSError) as err:
        return 0, str(err).encode()


def _produce(secured: Secured, count: int) -> None:
    bootstrap, settings = secured.admin["east"]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **settings})
    for seq in range(count):
        producer.produce(secured.topic, f"record-{seq}".encode(), f"k{seq}".encode())
        if seq % 100 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _wait(predicate: Any, timeout_s: float, what: str, run: Run) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}:\n{run.tail()}")


def _route_paths(openapi: Mapping[str, Any], values: Mapping[str, str]) -> list[str]:
    """Every GET route of the API, path parameters filled in from ``values``."""
    paths: list[str] = []
    for path, methods in openapi["paths"].items():
        if "get" not in methods:
            continue
        filled = path
        for name, value in values.items():
            filled = filled.replace(f"{{{name}}}", value)
        assert "{" not in filled, f"no value for a parameter of {path}"
        paths.append(filled)
    return paths


def _read_environs(run: Run, found: Scanned) -> None:
    for name, role in run.roles().items():
        raw = Path(f"/proc/{role['pid']}/environ").read_bytes()
        pairs = [item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item]
        found.environs[name] = {k.decode(): v.decode(errors="replace") for k, v in pairs}


def _ask_the_api(secured: Secured, found: Scanned, answers: Path) -> None:
    """Every GET route with an operator's token, the dashboard and its files, ``/metrics``, and
    wrong tokens (a random one, the operator's with one character changed, none)."""
    base = f"http://127.0.0.1:{secured.api_port}"
    token = secured.operator_token
    status, document = _get(f"{base}/openapi.json", token)
    assert status == 200, document[:300]
    found.save("api", "openapi.json", document, answers)
    values = {"app": APP, "group": "g1", "name": "none", "failover_id": "f-none"}
    routes = _route_paths(json.loads(document), values)
    for path in [*routes, f"/v1/apps/{APP}?exposure=true", "/dashboard", "/"]:
        status, body = _get(base + path, token)
        assert status < 500 or path == "/readyz", (path, status, body[:300])
        found.save(
            "api", path.strip("/").replace("/", "_").replace("?", "_") or "root", body, answers
        )
    for static in ("dashboard.js", "dashboard.css", "dashboard.html"):
        status, body = _get(f"{base}/static/{static}", token)
        assert status == 200, (static, status)
        found.save("api", f"static-{static}", body, answers)
    status, body = _get(f"{base}/metrics", token)
    assert status == 200, body[:300]
    found.save("metrics", "api", body, answers)
    for bad in (uuid.uuid4().hex, token[:-1] + ("0" if token[-1] != "0" else "1"), None):
        status, body = _get(f"{base}/v1/apps", bad)
        assert status in (401, 403), (status, body[:300])
        found.save("errors", f"api-{status}", body, answers)


def _ask_the_roles(run: Run, secured: Secured, found: Scanned, answers: Path) -> None:
    """Each role's ``/metrics`` and ``/healthz``, and ``drsvc status``."""
    for name, role in run.roles().items():
        if role.get("metrics_port"):
            for path in ("metrics", "healthz"):
                status, body = _get(f"http://127.0.0.1:{role['metrics_port']}/{path}")
                assert status == 200, (name, path, body[:300])
                found.save("metrics", f"{name}-{path}", body, answers)
    # an operator's shell: the executor's Consul token, when Consul is secured
    operator_env = {**secured.run_env, **secured.env.consul_environment("executor")}
    status_run = subprocess.run(
        [sys.executable, "-m", "drsvc.cli.main", "status", "--topology",
         str(secured.topology), "--json", "--state-dir", str(run.state_dir)],
        capture_output=True, timeout=120, env=operator_env, check=False,
    )  # fmt: skip
    assert status_run.returncode == 0, status_run.stderr.decode(errors="replace")[-2000:]
    found.save("status", "stdout", status_run.stdout, answers)
    found.save("status", "stderr", status_run.stderr, answers)


def _run_with_a_wrong_password(secured: Secured, found: Scanned) -> None:
    """A short run of the heartbeats with a wrong password: the brokers refuse it, and neither
    it nor any other secret is in what that run wrote."""
    wrong = uuid.uuid4().hex
    secured.secrets["the wrong password"] = wrong
    wrong_file = secured.tmp / "wrong.password"
    wrong_file.write_text(wrong + "\n")
    wrong_file.chmod(0o600)
    document = json.loads(secured.topology.read_text())
    for cluster in document["clusters"].values():
        cluster["security"]["sasl"].pop("password_env", None)
        cluster["security"]["sasl"]["password_file"] = str(wrong_file)
    wrong_topology = secured.tmp / "wrong.json"
    wrong_topology.write_text(json.dumps(document))
    failing = Run(secured, "wrong-password", wrong_topology, "heartbeats")
    try:
        log = failing.state_dir / "run" / "heartbeats.log"

        def refused() -> bool:
            text = log.read_text(errors="replace").lower() if log.is_file() else ""
            return "authentication" in text or "sasl" in text

        _wait(refused, 60, "the brokers to refuse the wrong password", failing)
    finally:
        failing.stop()
    found.add("errors", failing.output)
    found.add_tree("errors", failing.state_dir)


@pytest.fixture(scope="module")
def scanned(secured: Secured) -> Scanned:
    found = Scanned()
    answers = secured.tmp / "answers"
    kinds = "replicate,heartbeats,checkpoints,controller,api"
    run = Run(secured, "run", secured.topology, kinds)
    try:
        _produce(secured, 500)
        expected = {"replicate.east-to-west.1", "heartbeats", "checkpoints", "controller", "api"}

        def all_running() -> bool:
            roles = run.roles()
            return set(roles) == expected and all(r["state"] == "running" for r in roles.values())

        _wait(all_running, 60, "every role running", run)
        health = f"http://127.0.0.1:{secured.api_port}/healthz"
        _wait(lambda: _get(health)[0] == 200, 60, "the API", run)
        started = time.monotonic()
        _read_environs(run, found)
        _produce(secured, 500)
        _ask_the_api(secured, found, answers)
        _ask_the_roles(run, secured, found, answers)
        time.sleep(max(0.0, RUN_FOR_S - (time.monotonic() - started)))
    finally:
        code = run.stop()
    assert code == 0, run.tail()
    found.add("logs", run.output)
    found.files["logs"] += sorted((run.state_dir / "run").glob("*.log"))
    found.add_tree("state", run.state_dir)
    _run_with_a_wrong_password(secured, found)
    return found


def test_no_secret_appears_in_any_output_of_a_secured_run(
    secured: Secured, scanned: Scanned
) -> None:
    counts: dict[str, tuple[int, int]] = {}
    leaks: list[str] = []
    needles = {name: value.encode() for name, value in secured.secrets.items()}
    for kind, paths in scanned.files.items():
        total = 0
        for path in paths:
            data = path.read_bytes()
            total += len(data)
            leaks += [f"{name} in {path}" for name, value in needles.items() if value in data]
        counts[kind] = (len(paths), total)
    print(  # the numbers behind the verdict, shown with -s or on failure
        f"scanned for {len(needles)} secrets: "
        + ", ".join(f"{kind} {n} files {size} bytes" for kind, (n, size) in sorted(counts.items()))
    )
    for kind in ("logs", "state", "status", "api", "metrics", "errors"):
        files, size = counts.get(kind, (0, 0))
        assert files > 0 and size > 0, f"nothing of kind {kind} was scanned: {counts}"
    assert not leaks, "secrets found:\n" + "\n".join(sorted(set(leaks)))


def test_each_role_s_process_holds_only_its_own_secrets(secured: Secured, scanned: Scanned) -> None:
    assert len(scanned.environs) == 5, sorted(scanned.environs)
    by_value = {value: name for name, value in secured.env_secrets.items()}
    for role, environ in scanned.environs.items():
        kind = role.split(".", 1)[0]
        allowed = {KAFKA_PASSWORD_ENV}
        consul_role = CONSUL_ROLE_OF.get(kind)
        if consul_role is not None:
            allowed.add(CONSUL_TOKEN_ENV[consul_role])
        if kind == "api":
            allowed.add("DRSVC_API_TOKEN")
        held = {by_value[v] for v in environ.values() if v in by_value}
        assert held <= allowed, f"{role} holds {sorted(held - allowed)}"
        # a secured Consul's tokens are files: the role's own, and no other
        token_file = environ.get("CONSUL_HTTP_TOKEN_FILE")
        if consul_role is None:
            assert token_file is None and "CONSUL_HTTP_TOKEN" not in environ, role
        elif token_file is not None:
            assert Path(token_file).name == f"{consul_role}.token", (role, token_file)
        assert KAFKA_PASSWORD_ENV in held, f"{role} lacks the password it needs"
        assert UNRELATED_SECRET_ENV not in environ
        assert environ.get("DRSVC_ROLE") == role
