"""Free-port allocation and checks on loopback.

The local environment chooses its ports once, records them in its state, and reuses them on every
later ``dev up`` so that bootstrap addresses stay stable across restarts; ``drsvc run`` picks its
roles' metrics ports here too. It lives outside ``drsvc.devenv`` so that the supervisor does not
import the environment that starts brokers.
"""

from __future__ import annotations

import random
import socket
from contextlib import ExitStack
from pathlib import Path

from drsvc.errors import LocalEnvError, PortInUseError

#: Where Linux keeps the range it picks outgoing connections' local ports from.
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: Linux's default ephemeral range, for systems without that file.
DEFAULT_EPHEMERAL_RANGE = (32768, 60999)
#: The lowest port handed out (clear of the well-known and commonly registered ports).
LOWEST_PORT = 10000


def ephemeral_range(source: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (inclusive)."""
    try:
        low, high = (int(part) for part in source.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL_RANGE
    return low, high


def candidate_ports(ephemeral: tuple[int, int]) -> range:
    """The ports to allocate from: below the ephemeral range when there is room, else above."""
    low, high = ephemeral
    if low - LOWEST_PORT >= 2000:
        return range(LOWEST_PORT, low)
    return range(high + 1, 65536)


def allocate_ports(host: str, count: int) -> list[int]:
    """Return ``count`` distinct ports that are free for TCP and UDP on ``host`` right now.

    They are picked outside the kernel's ephemeral range: a port taken from that range (binding
    port 0) can be given to any process's next outgoing connection as its local port before the
    server it was chosen for binds it, which once kept a Consul agent from starting."""
    candidates = list(candidate_ports(ephemeral_range()))
    random.SystemRandom().shuffle(candidates)
    ports: list[int] = []
    with ExitStack() as held:
        for port in candidates:
            if len(ports) == count:
                break
            tcp = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                tcp.bind((host, port))
            except OSError:
                continue
            # Consul's serf ports listen on UDP too: a port must be free for both.
            udp = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            try:
                udp.bind((host, port))
            except OSError:
                continue
            ports.append(port)
    if len(ports) < count:
        raise LocalEnvError(
            f"only {len(ports)} of the {count} ports needed are free on {host} outside the "
            "ephemeral range; stop other local environments ('drsvc dev down') and try again"
        )
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
