"""What the deploy tests check the assets against: the metric names drsvc's code defines, the
command line of the real CLI, and the metric names a PromQL expression reads.

Nothing here is a hand-written list: metric names come from the prometheus_client definitions in
the code (found by parsing it), commands and options from the Typer app.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import promql_parser
import typer.main

from drsvc.cli.main import build_app

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
PACKAGE = REPO / "drsvc"

#: prometheus_client's metric classes (and the metric families of custom collectors) by the type
#: that decides which series they expose.
_METRIC_TYPES = {
    "Counter": "counter",
    "Gauge": "gauge",
    "Histogram": "histogram",
    "Summary": "summary",
    "Info": "info",
    "Enum": "stateset",
    "CounterMetricFamily": "counter",
    "GaugeMetricFamily": "gauge",
    "HistogramMetricFamily": "histogram",
    "GaugeHistogramMetricFamily": "gaugehistogram",
    "SummaryMetricFamily": "summary",
    "InfoMetricFamily": "info",
    "StateSetMetricFamily": "stateset",
}
_PROMETHEUS_MODULES = ("prometheus_client", "prometheus_client.core", "prometheus_client.metrics")


class UnresolvedMetricName(Exception):
    """A metric definition whose name this scanner cannot work out."""


@dataclass(frozen=True)
class MetricDefinition:
    name: str
    type: str
    where: str

    def series_names(self) -> set[str]:
        """The sample names Prometheus sees for this metric (prometheus_client's exposition)."""
        name = self.name
        if self.type == "counter":
            base = name.removesuffix("_total")
            return {f"{base}_total", f"{base}_created"}
        if self.type in {"histogram", "gaugehistogram"}:
            suffixes = ("_bucket", "_sum", "_count", "_created", "_gsum", "_gcount")
            return {name + suffix for suffix in suffixes}
        if self.type == "summary":
            return {name, f"{name}_sum", f"{name}_count", f"{name}_created"}
        if self.type == "info":
            return {f"{name}_info"}
        return {name}


def metric_definitions(root: Path = PACKAGE) -> list[MetricDefinition]:
    """Every prometheus_client metric defined in the Python files under ``root``."""
    found: list[MetricDefinition] = []
    for path in sorted(root.rglob("*.py")):
        found.extend(_definitions_in(path, root))
    return found


@cache
def exported_series() -> frozenset[str]:
    """Every series name drsvc's processes can expose."""
    return frozenset(
        series for definition in metric_definitions() for series in definition.series_names()
    )


def _definitions_in(path: Path, root: Path) -> Iterator[MetricDefinition]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    local_names = _prometheus_imports(tree)
    if not local_names:
        return
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _called_name(node.func, local_names)
        if called is None:
            continue
        where = f"{path.relative_to(root.parent)}:{node.lineno}"
        name_node = node.args[0] if node.args else _keyword(node, "name")
        if name_node is None:
            raise UnresolvedMetricName(f"{where}: {called}(...) without a name")
        for name in _names(name_node, parents, module, where):
            yield MetricDefinition(name, _METRIC_TYPES[called], where)


def _prometheus_imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> prometheus_client class, for the metric classes this module imports."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in _PROMETHEUS_MODULES:
            for alias in node.names:
                if alias.name in _METRIC_TYPES:
                    names[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _PROMETHEUS_MODULES:
                    names[f"{alias.asname or alias.name}."] = ""
    return names


def _called_name(func: ast.expr, local_names: dict[str, str]) -> str | None:
    if isinstance(func, ast.Name) and func.id in local_names:
        return local_names[func.id]
    if isinstance(func, ast.Attribute) and func.attr in _METRIC_TYPES:
        prefix = ast.unparse(func.value) + "."
        if prefix in local_names:
            return func.attr
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _names(
    node: ast.expr, parents: dict[ast.AST, ast.AST], module: str, where: str
) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
        return
    if isinstance(node, ast.JoinedStr):
        yield from _resolve_fstring(node, parents, module, where)
        return
    raise UnresolvedMetricName(f"{where}: metric name {ast.unparse(node)} is not a literal")


def _resolve_fstring(
    node: ast.JoinedStr, parents: dict[ast.AST, ast.AST], module: str, where: str
) -> Iterator[str]:
    """An f-string name inside a comprehension over a module constant: evaluate it for every
    element of that constant (as the code does)."""
    parent = parents.get(node)
    while parent is not None and not isinstance(
        parent, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp
    ):
        parent = parents.get(parent)
    if parent is None or len(parent.generators) != 1:
        raise UnresolvedMetricName(f"{where}: f-string metric name outside a simple comprehension")
    generator = parent.generators[0]
    if not isinstance(generator.iter, ast.Name) or generator.ifs:
        raise UnresolvedMetricName(f"{where}: comprehension is not over a module constant")
    values: Any = getattr(importlib.import_module(module), generator.iter.id)
    code = compile(ast.Expression(node), where, "eval")
    target = ast.unparse(generator.target)
    for value in values:
        bound: dict[str, Any] = {}
        exec(f"{target} = __value", {"__value": value}, bound)
        yield str(eval(code, {}, bound))


# --- PromQL ------------------------------------------------------------------------------------


def metric_names_in(expr: str) -> set[str]:
    """The metric names an expression reads; raises on a parse error or a selector without a
    metric name (``{__name__=~...}``), which could match anything."""
    tree = promql_parser.parse(expr)
    names: set[str] = set()
    nameless: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            else:
                nameless.append(str(node))

    promql_parser.walk(tree, visit)
    if nameless:
        raise ValueError(f"selectors without a metric name in {expr!r}: {nameless}")
    return names


# --- the CLI -----------------------------------------------------------------------------------


class CommandLineError(Exception):
    """A command line the CLI would refuse."""


@cache
def cli() -> Any:
    """The CLI's command group (Typer's own click)."""
    return typer.main.get_command(build_app())


def parse_command_line(args: list[str]) -> tuple[str, dict[str, Any]]:
    """Parse ``args`` (after ``drsvc``) as the CLI would, without running anything: the
    subcommand must exist and every option must be one of its own, with a valid value.
    Returns the command's name and its parsed parameters."""
    if not args:
        raise CommandLineError("no command")
    name, *rest = args
    command = cli().commands.get(name)
    if command is None:
        raise CommandLineError(f"no such command: {name!r} (have {sorted(cli().commands)})")
    try:
        context = command.make_context(f"drsvc {name}", list(rest))
    except Exception as err:  # Typer's click raises its own UsageError/BadParameter
        raise CommandLineError(f"drsvc {name}: {err}") from err
    return name, dict(context.params)
