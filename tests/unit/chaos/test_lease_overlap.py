"""Two clusters held at once by clients' leases: the intervals and their overlaps."""

from __future__ import annotations

import pytest

from chaos.lease_overlap import (
    LeaseSample,
    held_by_cluster,
    longest_overlap_s,
    merged,
    overlaps,
)


def sample(cluster: str | None, sent: float, lease: float = 3.0, took: float = 0.01) -> LeaseSample:
    return LeaseSample(sent, sent + took, cluster, 1, sent + lease)


def test_a_sample_holds_its_cluster_from_the_answer_to_the_lease_deadline() -> None:
    assert sample("east", 10.0).held == (10.01, 13.0)
    assert sample(None, 10.0).held is None
    # an answer that came back after its lease had run out holds nothing
    assert LeaseSample(10.0, 14.0, "east", 1, 13.0).held is None


def test_merged_joins_touching_and_overlapping_intervals() -> None:
    assert merged([(5, 6), (1, 2), (2, 3), (2.5, 4)]) == [(1, 4), (5, 6)]
    assert merged([]) == []


def test_a_switch_that_waited_out_every_lease_has_no_overlap() -> None:
    samples = [sample("east", t) for t in (0.0, 0.1, 0.2)]
    samples += [sample(None, t) for t in (0.3, 1.0, 2.0, 3.0)]
    samples += [sample("west", t) for t in (4.3, 4.4)]
    assert held_by_cluster(samples) == {"east": [(0.01, 3.2)], "west": [(4.31, 7.4)]}
    assert overlaps(samples) == []
    assert longest_overlap_s(samples) == 0.0


def test_a_client_that_read_the_old_cluster_just_before_none_committed_overlaps_the_new() -> None:
    # east read at 4.9 (just before a late "none" commit), west activated at 5.5
    samples = [sample("east", 0.0), sample("east", 4.9), sample("west", 5.5)]
    found = overlaps(samples)
    assert len(found) == 1
    assert (found[0].first, found[0].second) == ("east", "west")
    assert found[0].start_s == pytest.approx(5.51)
    assert found[0].end_s == pytest.approx(7.9)
    assert longest_overlap_s(samples) == pytest.approx(2.39)


def test_overlaps_between_three_clusters_are_each_reported() -> None:
    samples = [sample("east", 0.0), sample("west", 1.0), sample("south", 2.0)]
    assert {(o.first, o.second) for o in overlaps(samples)} == {
        ("east", "west"),
        ("east", "south"),
        ("south", "west"),
    }


def test_samples_survive_their_file_rows() -> None:
    one = sample("east", 1.5)
    assert LeaseSample.of_row(one.row()) == one
