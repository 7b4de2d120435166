"""The naming table: names are state, so each one is pinned here (renaming one orphans it)."""

from __future__ import annotations

import pytest

from failover import naming
from failover.errors import PolicyError
from failover.slots import SlotNames
from failover.topic_rules import InternalTopicNames


def test_flow_names_on_kafka() -> None:
    assert naming.replicator_group("east", "west") == "drsvc-replicator.east-west"
    assert naming.progress_reader_group("east", "west") == "drsvc-replicator.east-west.reader"
    assert naming.slot_membership_group("east", "west") == "drsvc-slots.east-west"
    assert naming.slots_topic("east", "west") == "drsvc.slots.east-west.internal"
    assert naming.transactional_id("east", "west", 3) == "drsvc.east-west.3"
    assert naming.heartbeat_copier_group("east", "west") == "drsvc-heartbeats.east-west"
    assert naming.heartbeat_observer_group("west") == "drsvc-heartbeat-observer.west"
    assert naming.checkpoints_app_id("west", ".east-west") == "drsvc-checkpoints.west.east-west"
    assert naming.checkpoints_app_suffix("east->west") == ".east-west"
    assert naming.CHECKPOINTS_READER_GROUP == "drsvc-checkpoints-reader"
    assert naming.TRANSLATE_READER_GROUP == "drsvc-translate"
    assert naming.SYNC_REPAIR_GROUP == "drsvc-sync-repair"
    # the name the takeover from MirrorMaker 2 has always read with
    assert naming.MM2_TAKEOVER_READER_GROUP == "drsvc-mm2-takeover"


def test_every_group_is_recognised_as_drsvc_own() -> None:
    # The checkpoint stream skips groups by this prefix: a group without it would be
    # checkpointed and synced as if it were an application's.
    groups = [
        naming.replicator_group("a", "b"),
        naming.progress_reader_group("a", "b"),
        naming.slot_membership_group("a", "b"),
        naming.heartbeat_copier_group("a", "b"),
        naming.heartbeat_observer_group("a"),
        naming.checkpoints_app_id("a"),
        naming.CHECKPOINTS_READER_GROUP,
        naming.TRANSLATE_READER_GROUP,
        naming.SYNC_REPAIR_GROUP,
        naming.MM2_TAKEOVER_READER_GROUP,
        naming.DEMO_READER_GROUP,
        naming.smoke_group("t"),
    ]
    assert all(group.startswith(naming.OWN_GROUP_PREFIX) for group in groups)


def test_client_ids() -> None:
    assert naming.flow_client_id("east->west") == "drsvc-east->west"
    assert naming.flow_client_id("east->west", "slot-2") == "drsvc-east->west-slot-2"
    assert naming.heartbeats_client_id("east") == "drsvc-heartbeats-east"
    assert naming.heartbeat_observer_client_id("west") == "drsvc-heartbeat-observer-west"


def test_consul_keys_live_under_the_namespace() -> None:
    assert naming.app_active_key("prod", "orders") == "drsvc/prod/apps/orders/active"
    assert naming.flow_control_key("prod", "east", "west") == "drsvc/prod/flows/east/west/control"
    assert naming.app_active_key("prod", "x").startswith(naming.consul_prefix("prod") + "/")


def test_the_slot_names_and_default_topic_names_come_from_the_table() -> None:
    names = SlotNames("east", "west")
    assert names.progress_group == naming.replicator_group("east", "west")
    assert names.membership_group == naming.slot_membership_group("east", "west")
    assert names.slots_topic == naming.slots_topic("east", "west")
    assert names.transactional_id(0) == naming.transactional_id("east", "west", 0)
    topics = InternalTopicNames()
    assert topics.heartbeats == "heartbeats"
    assert topics.offset_syncs_topic("east") == "drsvc.offset-syncs.east"
    assert topics.checkpoints_topic("east") == "east.checkpoints.internal"


def test_request_ids_are_keyed_per_application_and_checked() -> None:
    assert (
        naming.failover_request_key("prod", "orders", "r-42")
        == "drsvc/prod/failover-requests/orders/r-42"
    )
    assert naming.failover_request_key("prod", "orders", "r-42") != (
        naming.failover_request_key("prod", "payments", "r-42")
    )
    for bad in ("../apps/payments/failover", "..", ".", "", "a/b", "-x", "x" * 129):
        with pytest.raises(PolicyError, match="request id"):
            naming.failover_request_key("prod", "orders", bad)
    for bad_app in ("..", ".", "a/b"):
        with pytest.raises(PolicyError, match="application"):
            naming.failover_request_key("prod", bad_app, "r-1")
