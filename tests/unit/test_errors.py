"""drsvc's one error tree: the drawing in ``drsvc/errors.py`` is the real hierarchy."""

from __future__ import annotations

import inspect
import re

from drsvc import errors

_TREE_CHARS = " │├└─"
_NAME = re.compile(r"[A-Z][A-Za-z]*Error\b")


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
