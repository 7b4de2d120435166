"""The committed topology reference is the one the models generate."""

from __future__ import annotations

from pathlib import Path

from drsvc.topology.reference import topology_reference


def test_the_committed_topology_reference_is_up_to_date() -> None:
    committed = Path(__file__).resolve().parents[3] / "docs" / "topology-reference.md"
    assert committed.read_text() == topology_reference(), (
        "docs/topology-reference.md is out of date: python -m drsvc.topology.reference > "
        "docs/topology-reference.md"
    )


def test_every_field_of_an_application_is_documented() -> None:
    text = topology_reference()
    for field in ("auto_failover", "lease_s", "on_recovery", "unreachable_after_s", "standby"):
        assert f"`{field}`" in text, field
