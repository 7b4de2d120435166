from __future__ import annotations

import socket
from pathlib import Path

import pytest

from drsvc.errors import PortInUseError
from drsvc.ports import (
    DEFAULT_EPHEMERAL_RANGE,
    LOWEST_PORT,
    allocate_ports,
    candidate_ports,
    ensure_free,
    ephemeral_range,
    port_accepts,
    port_is_free,
)


def test_allocated_ports_are_distinct_and_free() -> None:
    ports = allocate_ports("127.0.0.1", 8)
    assert len(set(ports)) == 8
    assert all(port_is_free("127.0.0.1", p) for p in ports)


def test_a_listening_port_is_reported_taken_by_name() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not port_is_free("127.0.0.1", port)
        assert port_accepts("127.0.0.1", port)
        with pytest.raises(PortInUseError) as caught:
            ensure_free("127.0.0.1", port, "Kafka east node 1")
    assert caught.value.port == port
    assert f"port {port} for Kafka east node 1 is already in use" in str(caught.value)


def test_ports_are_allocated_outside_the_ephemeral_range() -> None:
    # An outgoing connection may take any free port of that range as its local port before a
    # server binds the port chosen for it.
    low, high = ephemeral_range()
    assert all(not low <= p <= high for p in allocate_ports("127.0.0.1", 20))


def test_the_ephemeral_range_is_read_from_the_kernel_or_defaults(tmp_path: Path) -> None:
    source = tmp_path / "ip_local_port_range"
    source.write_text("40000\t50000\n")
    assert ephemeral_range(source) == (40000, 50000)
    assert ephemeral_range(tmp_path / "absent") == DEFAULT_EPHEMERAL_RANGE


def test_candidates_lie_below_the_range_or_above_it_when_it_starts_low() -> None:
    assert candidate_ports((32768, 60999)) == range(LOWEST_PORT, 32768)
    assert candidate_ports((1024, 60999)) == range(61000, 65536)
