"""The topology file reference in markdown, generated from the typed models
(``docs/topology-reference.md``): every field with its type, default and description.

Regenerate with ``python -m drsvc.topology.reference > docs/topology-reference.md``; a unit test
fails when the committed file is out of date.
"""

from __future__ import annotations

import json
from typing import Any

from drsvc.topology.models import Topology

__all__ = ["topology_reference"]


def topology_reference() -> str:
    schema = Topology.model_json_schema()
    lines = [
        "# Topology file reference",
        "",
        "Generated from drsvc's typed models (`python -m drsvc.topology.reference`). A topology",
        "is YAML (or JSON); `drsvc topology validate FILE` checks one and names every problem.",
        "Examples: `topologies/`. Unknown fields are refused.",
        "",
    ]
    lines += _section("Topology (the file)", schema)
    for name, definition in sorted(schema.get("$defs", {}).items()):
        lines += _section(name, definition)
    return "\n".join(lines).rstrip() + "\n"


def _section(title: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"## {title}", ""]
    description = " ".join((schema.get("description") or "").split())
    if description:
        lines += [description, ""]
    if "enum" in schema:
        lines += ["One of: " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".", ""]
    props: dict[str, Any] = schema.get("properties", {})
    if not props:
        return lines
    required = set(schema.get("required", []))
    lines += ["| field | type | default | description |", "| --- | --- | --- | --- |"]
    for field, spec in props.items():
        default = "required" if field in required else _default(spec)
        text = " ".join((spec.get("description") or "").split()).replace("|", "\\|")
        lines.append(f"| `{field}` | {_type(spec)} | {default} | {text} |")
    return [*lines, ""]


def _default(spec: dict[str, Any]) -> str:
    if "default" not in spec:
        return ""
    return f"`{json.dumps(spec['default'])}`"


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        return str(spec["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in spec:
        return " or ".join(_type(s) for s in spec["anyOf"])
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {_type(spec.get('items', {}))}"
    if kind == "object" and "additionalProperties" in spec:
        return f"map of {_type(spec['additionalProperties'])}"
    return str(kind)


if __name__ == "__main__":
    print(topology_reference(), end="")
