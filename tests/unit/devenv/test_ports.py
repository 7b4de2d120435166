from __future__ import annotations

import socket

import pytest

from drsvc.devenv.ports import allocate_ports, ensure_free, port_accepts, port_is_free
from drsvc.errors import PortInUseError


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
