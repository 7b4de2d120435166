"""The flow control document: round trip, refusals naming the field, standby flows, floors."""

from __future__ import annotations

import pytest

from drsvc.errors import ConfigError
from drsvc.runtime.failover.flow_switch import start_topics, stop_topics
from drsvc.runtime.replication.control import ControlFollower, FlowControl

KEY = "drsvc/t/flows/east/west/control"


def test_every_field_round_trips() -> None:
    control = FlowControl(
        paused=False,
        paused_topics=frozenset({"a"}),
        throttle_bytes_per_s=5_000,
        started_topics=frozenset({"orders"}),
        skip_below={("orders", 0): 42, ("orders", 3): 7},
    )
    assert FlowControl.from_json(control.to_json(), KEY) == control


def test_documents_of_older_builds_read_as_nothing_started_and_no_floors() -> None:
    control = FlowControl.from_json('{"paused": false, "paused_topics": ["x"]}', KEY)
    assert control.started_topics == frozenset() and dict(control.skip_below) == {}


@pytest.mark.parametrize(
    ("skip_below", "names"),
    [
        ('{"orders": {"x": 1}}', "partition 'x' is not a number"),
        ('{"orders": {"0": -1}}', "skip_below.orders.0: -1 is not an offset"),
        ('{"orders": {"0": "5"}}', "is not an offset"),
        ('{"orders": [1]}', "skip_below.orders must be an object"),
        ("[1]", "skip_below must be an object"),
    ],
)
def test_bad_floors_are_refused_naming_the_document_and_field(skip_below: str, names: str) -> None:
    with pytest.raises(ConfigError, match=KEY) as err:
        FlowControl.from_json(f'{{"skip_below": {skip_below}}}', KEY)
    assert names in str(err.value)


def test_a_standby_flow_copies_only_started_topics() -> None:
    follower = ControlFollower("west->east", lambda: None, None, standby=True)
    assert follower.topic_paused("orders")  # no document: nothing started
    follower.control = FlowControl(started_topics=frozenset({"orders"}))
    assert not follower.topic_paused("orders") and follower.topic_paused("payments")
    follower.control = FlowControl(paused=True, started_topics=frozenset({"orders"}))
    assert follower.topic_paused("orders")
    plain = ControlFollower("east->west", lambda: None, None)
    assert not plain.topic_paused("orders")


def test_starting_and_stopping_topics_keeps_the_rest_and_floors_only_rise() -> None:
    control = FlowControl(
        paused_topics=frozenset({"orders", "other"}), skip_below={("orders", 0): 50}
    )
    started = start_topics(control, ["orders"], {("orders", 0): 40, ("orders", 1): 9})
    assert started.paused_topics == frozenset({"other"})
    assert started.started_topics == frozenset({"orders"})
    assert dict(started.skip_below) == {("orders", 0): 50, ("orders", 1): 9}
    stopped = stop_topics(started, ["orders"])
    assert stopped.paused_topics == frozenset({"orders", "other"})
    assert stopped.started_topics == frozenset()
    assert stopped.skip_below == started.skip_below
