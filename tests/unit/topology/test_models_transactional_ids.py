"""An application declares the transactional ids a failover fences: a list of plain ids,
empty by default, none of them drsvc's own."""

from __future__ import annotations

import pytest

from drsvc.errors import TopologyError
from drsvc.topology import load_topology_text


def topology(transactional_ids: str | None) -> str:
    line = "" if transactional_ids is None else f"\n    transactional_ids: {transactional_ids}"
    return f"""
name: aa
clusters:
  east: {{bootstrap_servers: "127.0.0.1:1"}}
  west: {{bootstrap_servers: "127.0.0.1:2"}}
flows:
  - {{source: east, target: west}}
  - {{source: west, target: east}}
applications:
  - name: orders
    groups: [orders-consumer]
    topics: [orders]
    preferred: east{line}
"""


def test_an_application_declares_none_by_default() -> None:
    assert load_topology_text(topology(None)).application("orders").transactional_ids == ()


def test_declared_ids_load_in_order() -> None:
    app = load_topology_text(topology('["orders-tx-0", "orders.tx/1"]')).application("orders")
    assert app.transactional_ids == ("orders-tx-0", "orders.tx/1")


@pytest.mark.parametrize(
    ("ids", "complaint"),
    [
        ('["a", "a"]', "listed twice"),
        ('[""]', "1 to 249 characters"),
        (f'["{"x" * 250}"]', "1 to 249 characters"),
        ('["orders tx"]', "without spaces"),
        ('["drsvc.east-west.3"]', "drsvc keeps for itself"),
        ('["drsvc-fence"]', "drsvc keeps for itself"),
        ('"orders-tx"', "transactional_ids"),
    ],
)
def test_bad_ids_are_refused_naming_the_field(ids: str, complaint: str) -> None:
    with pytest.raises(TopologyError) as err:
        load_topology_text(topology(ids))
    assert complaint in str(err.value) and "transactional_ids" in str(err.value)
