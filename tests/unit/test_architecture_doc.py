"""``docs/architecture.md`` cannot fall behind silently: every name the naming table builds (and
the migration key) is in its state tables, and every import contract of ``.importlinter``,
switched on or still commented out, is in its list of contracts."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from failover import migration_state, naming

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"

#: rules for names, not names of state: the doc names them under the state tables
_RULES = {"REQUEST_ID_PATTERN", "check_key_segment", "check_request_id"}


def _section(title: str) -> str:
    """The text of the doc's ``## title`` section, up to the next ``## `` heading."""
    text = DOC.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : None if end < 0 else end]


def _naming_table() -> list[str]:
    """Every public name ``failover.naming`` defines: its functions and its constants."""
    names = []
    for name, value in vars(naming).items():
        if name.startswith("_"):
            continue
        if inspect.isfunction(value):
            if value.__module__ == naming.__name__:
                names.append(name)
        elif name.isupper():
            names.append(name)
    return sorted(names)


def _contracts() -> list[str]:
    text = (ROOT / ".importlinter").read_text()
    return re.findall(r"^#?\s*\[importlinter:contract:([\w-]+)\]", text, flags=re.MULTILINE)


def test_the_naming_table_is_read_as_expected() -> None:
    names = _naming_table()

    assert {"app_active_key", "controller_lock_key", "flow_stale_records_key"} <= set(names)
    assert {"OWN_GROUP_PREFIX", "SYNC_REPAIR_GROUP", "DEFAULT_OFFSET_SYNCS_TOPIC"} <= set(names)
    assert "PolicyError" not in names and "annotations" not in names


def test_every_name_of_the_naming_table_is_in_the_state_tables() -> None:
    state = _section("Where state lives")
    names = [n for n in _naming_table() if n not in _RULES]
    names.append(migration_state.migration_key.__name__)

    missing = [n for n in names if not re.search(rf"\b{re.escape(n)}\b", state)]

    assert not missing, f"docs/architecture.md, 'Where state lives', does not name {missing}"


def test_the_rules_for_names_are_named_too() -> None:
    state = _section("Where state lives")

    assert all(re.search(rf"\b{rule}\b", state) for rule in _RULES)


def test_every_import_contract_is_in_the_doc() -> None:
    contracts = _contracts()
    listed = _section("Import contracts")

    assert {"packages", "pure-core", "kafka-port"} <= set(contracts)
    missing = [c for c in contracts if f"`{c}`" not in listed]
    assert not missing, f"docs/architecture.md, 'Import contracts', does not name {missing}"
