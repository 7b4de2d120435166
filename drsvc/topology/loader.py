"""Read a topology file into a :class:`~drsvc.topology.models.Topology`, or say what is wrong.

Every failure becomes one :class:`drsvc.errors.TopologyError` naming the file and listing each
problem on its own line with its field path (``flows[0].policy: must be one of prefix, identity
(got 'prefx')``). All problems of a stage are reported together: every unset variable, then every
shape or type problem, then (once the shape is right) every cross-field problem.

Steps: read the file, parse YAML (duplicate keys are errors, not silently last-wins), replace
``${VAR}`` / ``${VAR:-default}`` in string values from the environment (``$${`` writes a literal
``${``), then validate with the models. Relative file paths inside the topology (TLS files,
password files) are resolved against the topology file's directory.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from drsvc.errors import TopologyError
from drsvc.topology import models, security
from drsvc.topology.base import BASE_DIR_CONTEXT_KEY
from drsvc.topology.models import Topology, TopologyProblems

_REFERENCE = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")
_REFERENCE_BODY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)
_MAX_SHOWN = 60


def load_topology(path: str | Path, *, env: Mapping[str, str] | None = None) -> Topology:
    """Load and validate the topology file at ``path``.

    ``env`` replaces the process environment for ``${VAR}`` interpolation (tests pass a dict).
    Raises :class:`TopologyError` for a missing or unreadable file, bad YAML, an unset variable
    or an invalid topology.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError(str(file), ["file not found"]) from None
    except IsADirectoryError:
        raise TopologyError(str(file), ["is a directory, not a topology file"]) from None
    except UnicodeDecodeError as err:
        raise TopologyError(str(file), [f"not UTF-8 text: {err.reason}"]) from err
    except OSError as err:
        raise TopologyError(str(file), [f"cannot read: {err.strerror or err}"]) from err
    return load_topology_text(text, str(file), env=env, base_dir=file.parent.resolve())


def load_topology_text(
    text: str,
    source_name: str = "<text>",
    *,
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> Topology:
    """Load a topology from YAML ``text``; ``source_name`` names it in errors.

    ``base_dir`` is where relative paths inside the topology are resolved (None keeps them
    relative to the working directory).
    """
    data = _parse_yaml(text, source_name)
    environ: Mapping[str, str] = os.environ if env is None else env
    problems: list[str] = []
    data = _interpolate(data, "", environ, problems)
    if problems:
        raise TopologyError(source_name, problems)
    try:
        return Topology.model_validate(data, context={BASE_DIR_CONTEXT_KEY: base_dir})
    except ValidationError as err:
        raise TopologyError(source_name, validation_problems(err)) from err


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML loader that refuses duplicate keys (plain YAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                first = seen[key]
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {first.line + 1})",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _parse_yaml(text: str, source_name: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = err.problem or err.context or "invalid YAML"
        raise TopologyError(source_name, [f"{where}YAML syntax error: {what}"]) from err
    except yaml.YAMLError as err:
        raise TopologyError(source_name, [f"YAML syntax error: {err}"]) from err
    if data is None:
        raise TopologyError(source_name, ["file is empty; expected a mapping with name, clusters"])
    if not isinstance(data, dict):
        raise TopologyError(
            source_name,
            [f"top level must be a mapping with name, clusters, flows (got {_kind(data)})"],
        )
    return data


def _interpolate(value: Any, path: str, env: Mapping[str, str], problems: list[str]) -> Any:
    """Replace ``${VAR}`` references in every string value; keys are left alone."""
    if isinstance(value, str):
        return _interpolate_string(value, path, env, problems)
    if isinstance(value, dict):
        return {
            key: _interpolate(item, _join(path, key), env, problems) for key, item in value.items()
        }
    if isinstance(value, list):
        return [
            _interpolate(item, f"{path}[{index}]", env, problems)
            for index, item in enumerate(value)
        ]
    return value


def _interpolate_string(text: str, path: str, env: Mapping[str, str], problems: list[str]) -> str:
    where = path or "top level"

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "$${":
            return "${"
        body = match.group(1)
        if body is None:
            problems.append(f"{where}: '${{' without a closing '}}' in {_shown(text)}")
            return token
        parsed = _REFERENCE_BODY.fullmatch(body)
        if parsed is None:
            problems.append(
                f"{where}: bad reference {token!r}; write ${{NAME}} or ${{NAME:-default}}"
            )
            return token
        name, default = parsed.group(1), parsed.group(2)
        value = env.get(name)
        if default is not None and not value:
            return default
        if value is None:
            problems.append(
                f"{where}: environment variable {name} is not set and {token} gives no default"
                f" (write ${{{name}:-default}} to give one)"
            )
            return token
        return value

    return _REFERENCE.sub(replace, text)


def validation_problems(err: ValidationError) -> list[str]:
    """Readable lines, one per problem, from a pydantic error on a topology."""
    problems: list[str] = []
    for error in err.errors():
        context = error.get("ctx") or {}
        cause = context.get("error")
        if isinstance(cause, TopologyProblems):
            problems.extend(cause.problems)
            continue
        problem = _describe(error["type"], error["loc"], error["msg"], error.get("input"))
        if problem is not None:
            problems.append(problem)
    return problems


def _describe(kind: str, loc: tuple[int | str, ...], msg: str, given: Any) -> str | None:
    path = _loc_path(loc) or "top level"
    if kind == "extra_forbidden":
        parent = _loc_path(loc[:-1]) or "top level"
        key = loc[-1]
        hint = difflib.get_close_matches(str(key), sorted(_field_names()), n=1, cutoff=0.75)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
        return f"{parent}: unknown key {key!r}{suggestion}"
    if kind == "missing":
        return f"{path}: required, but missing"
    if kind == "literal_error":
        choices = ", ".join(re.findall(r"'([^']*)'", msg.split(":", 1)[-1]))
        return f"{path}: must be one of {choices} (got {_shown(given)})"
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return f"{path}: must be a mapping (got {_kind(given)} {_shown(given)})"
    if kind in {"tuple_type", "list_type"}:
        return f"{path}: must be a list (got {_kind(given)} {_shown(given)})"
    if kind == "string_type":
        return f"{path}: must be a string (got {_kind(given)} {_shown(given)})"
    if kind in {"bool_type", "bool_parsing"}:
        return f"{path}: must be true or false (got {_shown(given)})"
    if kind == "too_short" and not given:
        return f"{path}: must not be empty"
    if kind == "too_short":
        return None  # items were rejected one by one; those problems say why
    if kind in {"value_error", "assertion_error"}:
        return f"{path}: {msg.removeprefix('Value error, ').removeprefix('Assertion failed, ')}"
    return f"{path}: {msg} (got {_shown(given)})"


def _loc_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path = f"{path}[{part}]" if isinstance(part, int) else _join(path, str(part))
    return path


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _field_names() -> set[str]:
    """Every key a topology can contain, to suggest the intended one for a typo."""
    names: set[str] = set()
    for module in (models, security):
        for item in vars(module).values():
            if isinstance(item, type) and issubclass(item, BaseModel) and item is not BaseModel:
                names.update(item.model_fields)
    return names
