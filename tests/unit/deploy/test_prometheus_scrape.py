"""deploy/prometheus/scrape-configs.yaml: the API is scraped with a token read from a file, the
roles without one, each pod by one job."""

from __future__ import annotations

import re
from typing import Any

import yaml
from deploy_assets import DEPLOY

SCRAPE = DEPLOY / "prometheus" / "scrape-configs.yaml"


def _jobs() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(SCRAPE.read_text(encoding="utf-8"))
    return {job["job_name"]: job for job in document["scrape_configs"]}


def _component_rule(job: dict[str, Any]) -> tuple[str, str]:
    (rule,) = [
        r
        for r in job["relabel_configs"]
        if r["source_labels"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_component"]
        and r.get("action") in {"keep", "drop"}
    ]
    return rule["action"], rule["regex"]


def test_the_api_is_scraped_with_a_bearer_token_from_a_file() -> None:
    api = _jobs()["drsvc-api"]
    authorization = api["authorization"]
    assert authorization["type"] == "Bearer"
    assert authorization["credentials_file"].startswith("/")
    assert "credentials" not in authorization  # never the token itself
    assert _component_rule(api) == ("keep", "api")


def test_the_roles_job_leaves_the_api_to_its_own_job() -> None:
    roles = _jobs()["drsvc-roles"]
    assert "authorization" not in roles
    assert _component_rule(roles) == ("drop", "api")


def test_the_address_rewrite_takes_the_annotated_port() -> None:
    (rule,) = [
        r
        for r in _jobs()["drsvc-roles"]["relabel_configs"]
        if r.get("target_label") == "__address__"
    ]
    joined = "10.0.0.7:8080;9400"
    assert re.fullmatch(rule["regex"], joined)
    assert re.sub(rule["regex"], rule["replacement"].replace("$", "\\"), joined) == "10.0.0.7:9400"
