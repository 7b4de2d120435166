"""The OpenAPI document names what each role gets: every change documents the viewer's 403 (and
the missing token's 401), every protected read its 401 and 403, and failover answers say who
asked. Schemathesis holds the running API to these (tests/integration/test_api.py)."""

from __future__ import annotations

from typing import Any

from drsvc.api.reference import openapi_document


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in doc["paths"].items()
        for method, operation in item.items()
    ]


def test_every_change_documents_the_viewers_403_and_the_missing_tokens_401() -> None:
    changes = [(m, p, op) for m, p, op in _operations(openapi_document()) if m == "POST"]
    assert changes
    for method, path, operation in changes:
        assert {"401", "403"} <= set(operation["responses"]), f"{method} {path}"
        assert "viewer" in operation["responses"]["403"]["description"], f"{method} {path}"


def test_every_protected_read_documents_401_and_403() -> None:
    open_paths = {"/healthz", "/readyz"}
    for method, path, operation in _operations(openapi_document()):
        if method == "GET" and path not in open_paths:
            assert {"401", "403"} <= set(operation["responses"]), f"{method} {path}"


def test_failover_answers_document_who_asked() -> None:
    doc = openapi_document()
    answer = doc["components"]["schemas"]["FailoverAnswer"]
    assert "requested_by" in answer["required"]
    one = doc["paths"]["/v1/failovers/{failover_id}"]["get"]["responses"]["200"]
    assert one["content"]["application/json"]["schema"]["$ref"].endswith("/FailoverAnswer")
    started = doc["paths"]["/v1/apps/{app}/failover"]["post"]["responses"]["202"]
    assert started["content"]["application/json"]["schema"]["$ref"].endswith("/FailoverAnswer")
