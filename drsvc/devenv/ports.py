"""Free-port allocation and checks on loopback.

Ports are chosen once, recorded in the environment state, and reused on every later ``dev up`` so
that bootstrap addresses stay stable across restarts.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack

from drsvc.errors import PortInUseError


def allocate_ports(host: str, count: int) -> list[int]:
    """Return ``count`` distinct ports that are free for TCP and UDP on ``host`` right now."""
    ports: list[int] = []
    with ExitStack() as held:
        while len(ports) < count:
            tcp = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            tcp.bind((host, 0))
            port = int(tcp.getsockname()[1])
            # Consul's serf ports listen on UDP too: a port must be free for both.
            udp = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            try:
                udp.bind((host, port))
            except OSError:
                continue
            ports.append(port)
    return ports


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on ``host:port`` (TCP) and it can be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def ensure_free(host: str, port: int, what: str) -> None:
    """Raise :class:`PortInUseError` naming ``what`` when ``port`` is taken."""
    if not port_is_free(host, port):
        raise PortInUseError(what, port)


def port_accepts(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True when a TCP connection to ``host:port`` succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
