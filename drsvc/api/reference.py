"""The API reference in markdown, generated from the OpenAPI document (``docs/api-reference.md``).

Regenerate with ``python -m drsvc.api.reference > docs/api-reference.md``; a unit test fails when
the committed file is out of date.
"""

from __future__ import annotations

import json
from typing import Any, cast

from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth
from drsvc.api.events import EventLog
from drsvc.api.service import ApiService

__all__ = ["openapi_document", "reference_markdown"]


class _RoutesOnly:
    """What building the routes reads of a service; none of its routes is ever called."""

    def __init__(self) -> None:
        self.events = EventLog()

    def refresh_events(self) -> None:
        raise NotImplementedError("the API reference reads the routes only")


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document (no service behind it: only the routes are read)."""
    app = create_app(cast(ApiService, _RoutesOnly()), ApiAuth())
    return app.openapi()


def reference_markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the API's OpenAPI document (`python -m drsvc.api.reference`); the",
        "service serves the same document at `/openapi.json`. Concepts, authentication and errors:",
        "`docs/api.md`.",
        "",
    ]
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            lines += [f"## `{method.upper()} {path}`", ""]
            summary = (op.get("description") or op.get("summary") or "").strip()
            if summary:
                lines += [" ".join(summary.split()), ""]
            if op.get("security"):
                lines += [
                    "Needs an operator's token."
                    if method == "post"
                    else "Needs a viewer's or an operator's token, unless the API runs with "
                    "`--public-reads`.",
                    "",
                ]
            params = op.get("parameters", [])
            if params:
                lines += ["| parameter | in | type | description |", "| --- | --- | --- | --- |"]
                for p in params:
                    schema = p.get("schema", {})
                    kind = schema.get("type") or _any_of(schema)
                    extra = f" (pattern `{schema['pattern']}`)" if "pattern" in schema else ""
                    text = (p.get("description") or schema.get("description") or "").strip()
                    lines.append(f"| `{p['name']}` | {p['in']} | {kind} | {text}{extra} |")
                lines.append("")
            body = op.get("requestBody")
            if body:
                ref = body["content"]["application/json"]["schema"]
                name = ref.get("$ref", "").rsplit("/", 1)[-1] or _any_of(ref)
                lines += [
                    f"Body: `{name}` (JSON){'' if body.get('required') else ', optional'}.",
                    "",
                ]
            codes = ", ".join(sorted(op.get("responses", {})))
            lines += [f"Answers: {codes}.", ""]
    lines += ["## Schemas", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        if name.startswith(("HTTPValidationError", "ValidationError")):
            continue
        lines += [f"### `{name}`", "", (schema.get("description") or "").strip(), ""]
        props = schema.get("properties", {})
        if props:
            lines += ["| field | type | default | description |", "| --- | --- | --- | --- |"]
            for field, spec in props.items():
                kind = spec.get("type") or _any_of(spec)
                default = json.dumps(spec.get("default")) if "default" in spec else ""
                lines.append(f"| `{field}` | {kind} | {default} | {spec.get('description', '')} |")
            lines.append("")
    return "\n".join(line for line in lines).rstrip() + "\n"


def _any_of(schema: dict[str, Any]) -> str:
    kinds = [
        s.get("type") or s.get("$ref", "?").rsplit("/", 1)[-1] for s in schema.get("anyOf", [])
    ]
    return " or ".join(k for k in kinds if k) or "object"


if __name__ == "__main__":
    print(reference_markdown(openapi_document()), end="")
