"""drsvc's one error tree: the drawing in ``drsvc/errors.py`` is the real hierarchy, and the
interfaces (commands, API, controller) handle drsvc's errors only, never the core's."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

import drsvc
from drsvc import errors
from failover import errors as core_errors

_TREE_CHARS = " │├└─"
_NAME = re.compile(r"[A-Z][A-Za-z]*Error\b")

#: where the interfaces live: what they catch must be drsvc's
_INTERFACES = ("cli", "api", "runtime/controller")


def _drawn(doc: str) -> list[tuple[str, str | None, str]]:
    """Each class the docstring's tree draws, in order: its name, the class it is drawn under
    (by column) and the tree characters before its name."""
    drawing = doc.split("::", 1)[1].split("\n\n", 2)[1]
    rows: list[tuple[str, str | None, str]] = []
    open_at: list[tuple[int, str]] = []  # (column, name) of the branches above this line
    indent = len(drawing) - len(drawing.lstrip())
    for line in drawing.splitlines():
        rest = line.lstrip(_TREE_CHARS)
        found = _NAME.match(rest)
        if found is None:
            continue  # a description carried over to its own line
        column = len(line) - len(rest)
        while open_at and open_at[-1][0] >= column:
            open_at.pop()
        rows.append((found.group(), open_at[-1][1] if open_at else None, line[indent:column]))
        open_at.append((column, found.group()))
    return rows


def _branches(name: str, parents: dict[str, str | None], children: dict[str, list[str]]) -> str:
    """The tree characters that belong before ``name``: a bar for every ancestor with a later
    sibling, then a tee (a later sibling follows) or a corner (the last child)."""
    lasts = []
    while (parent := parents[name]) is not None:
        lasts.append(children[parent][-1] == name)
        name = parent
    if not lasts:
        return ""
    above = "".join("    " if last else "│   " for last in reversed(lasts[1:]))
    return above + ("└── " if lasts[0] else "├── ")


def test_the_drawn_tree_is_the_class_hierarchy() -> None:
    assert errors.__doc__ is not None
    rows = _drawn(errors.__doc__)
    parents = {name: parent for name, parent, _ in rows}
    defined = {
        name: value
        for name, value in inspect.getmembers(errors, inspect.isclass)
        if issubclass(value, errors.DrsvcError)
    }
    assert set(parents) == set(defined)
    children: dict[str, list[str]] = {}
    for name, parent, _ in rows:
        (base,) = defined[name].__bases__
        assert (base.__name__ if name != "DrsvcError" else None) == parent, name
        if parent is not None:
            children.setdefault(parent, []).append(name)
    for name, _, drawn in rows:
        assert drawn == _branches(name, parents, children), name


_ROOT = Path(drsvc.__file__).parent


def _interface_modules() -> list[Path]:
    found = [path for part in _INTERFACES for path in sorted((_ROOT / part).rglob("*.py"))]
    assert found, "no interface modules found: the scan is broken"
    return found


def _of_the_core(module: str | None) -> bool:
    return module is not None and (module == "failover" or module.startswith("failover."))


@pytest.mark.parametrize(
    "path", _interface_modules(), ids=lambda p: p.relative_to(_ROOT).as_posix()
)
def test_an_interface_imports_none_of_the_cores_errors(path: Path) -> None:
    # By name, through any module of the core: failover_plan, for one, re-exports its refusal.
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not any(a.name == core_errors.__name__ for a in node.names), path
        if not isinstance(node, ast.ImportFrom) or not _of_the_core(node.module):
            continue
        module = importlib.import_module(str(node.module))
        for alias in node.names:
            value = getattr(module, alias.name, None)
            if value is None:  # a submodule (``from failover import naming``)
                value = importlib.import_module(f"{node.module}.{alias.name}")
            assert value is not core_errors, f"{path}:{node.lineno} imports failover.errors"
            is_core_error = isinstance(value, type) and issubclass(value, core_errors.CoreError)
            assert not is_core_error, f"{path}:{node.lineno} imports {alias.name} of the core"
