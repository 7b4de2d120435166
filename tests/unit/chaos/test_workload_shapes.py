"""The workload's records: seeded, identified by their value, shaped as configured."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.workload import ProducerSpec, Shape, Workload
from chaos.workload.shapes import RecordFactory
from drsvc.verify.identity import parse, value_prefix


def test_one_seed_gives_the_same_records() -> None:
    a = RecordFactory("p0", ("t1", "t2"), Shape(), seed=7)
    b = RecordFactory("p0", ("t1", "t2"), Shape(), seed=7)
    other = RecordFactory("p0", ("t1", "t2"), Shape(), seed=8)
    first = [a.record(i) for i in range(50)]
    assert first == [b.record(i) for i in range(50)]
    assert first != [other.record(i) for i in range(50)]


def test_records_carry_their_identity_and_the_shape() -> None:
    shape = Shape(value_size_median=50, value_size_max=200, headers_max=4, null_key_ratio=0.2)
    factory = RecordFactory("p-1", ("a", "b", "c"), shape, seed=1)
    records = [factory.record(seq) for seq in range(2000)]
    assert [parse(r.value) for r in records] == [("p-1", seq) for seq in range(2000)]
    sizes = [len(r.value) - len(value_prefix("p-1", seq)) for seq, r in enumerate(records)]
    assert max(sizes) <= 200 and 30 <= sorted(sizes)[1000] <= 80
    assert {r.topic for r in records} == {"a", "b", "c"}
    assert 0.1 < sum(r.key is None for r in records) / 2000 < 0.3
    headers = [h for r in records for h in r.headers]
    assert max(len(r.headers) for r in records) == 4
    assert any(v is None for _, v in headers) and any(v == b"" for _, v in headers)
    assert any(len({k for k, _ in r.headers}) < len(r.headers) for r in records)  # repeated keys


def test_identity_parsing_rejects_other_values() -> None:
    assert parse(b"p0:12:rest:with:colons") == ("p0", 12)
    for value in (None, b"", b"p0", b"p0:x:", b":1:", b"p0:1", b"\xff:1:"):
        assert parse(value) is None


@pytest.mark.parametrize("bad", ["", "a:b", "ü"])
def test_producer_ids_that_cannot_start_a_value_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="producer id"):
        RecordFactory(bad, ("t",), Shape(), seed=0)


def test_a_workload_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    spec = ProducerSpec("p0", "east", ("t",))
    with pytest.raises(ValueError, match="unique"):
        Workload(tmp_path, {"east": "x"}, [spec, spec])
    with pytest.raises(ValueError, match="cluster 'east'"):
        Workload(tmp_path, {}, [spec])
    with pytest.raises(ValueError, match="abort_ratio"):
        ProducerSpec("p1", "east", ("t",), abort_ratio=2)
