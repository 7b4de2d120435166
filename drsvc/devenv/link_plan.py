"""The pure part of the links between sites: names, the listeners they need, and conditions.

A link joins two sites. Each direction of it is a set of proxies, one per broker of the site
being reached: the clients of site ``west`` reach broker 1 of ``east`` through the proxy
``link.west.east.1``, which forwards to a listener ``FROM_WEST`` that broker opens for west's
clients only and advertises at the proxy's address. A link's condition (cut, latency, bandwidth)
is the same on both directions, so it becomes the same state on every proxy of the pair:

- cut: every proxy disabled (its listener closed, its connections dropped: clients see refused
  connections); or, as a black hole, a ``timeout`` toxic without timeout on both streams (the
  proxy accepts connections and holds them, but no byte crosses: clients see only time-outs,
  as with packets dropped on a real network);
- latency: a ``latency`` toxic on both streams of every proxy (``latency_ms`` each way, so a
  request and its response take ``2 * latency_ms`` longer);
- bandwidth: a ``bandwidth`` toxic on both streams, in kilobytes per second per connection.

Nothing here does I/O; :mod:`drsvc.devenv.links` applies it through Toxiproxy's API.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from drsvc.devenv.state import LinkListener
from drsvc.errors import ConfigError

STREAMS = ("upstream", "downstream")
LATENCY = "latency"
BANDWIDTH = "bandwidth"
BLACKHOLE = "timeout"
_NOT_NAME = re.compile(r"[^A-Z0-9]")


def listener_name(client_site: str) -> str:
    """The broker listener that the clients of ``client_site`` use: ``FROM_<SITE>``."""
    return "FROM_" + _NOT_NAME.sub("_", client_site.upper())


def check_sites(sites: Sequence[str]) -> None:
    """Linked sites need two or more distinct aliases whose listener names do not collide."""
    if len(sites) < 2:
        raise ConfigError(
            "links join two or more sites: bring up two clusters or more with links, "
            "e.g. --clusters east,west --links"
        )
    names: dict[str, str] = {}
    for site in sites:
        name = listener_name(site)
        if name in names:
            raise ConfigError(
                f"sites {names[name]!r} and {site!r} would share the broker listener {name}; "
                "rename one of them"
            )
        names[name] = site


def plan_listeners(
    node_ids: Mapping[str, Sequence[int]], ports: Iterable[int]
) -> list[LinkListener]:
    """A listener for every broker of every site and every other site, taking two ports each
    from ``ports`` (the broker's listener, then its proxy), in a stable order."""
    sites = list(node_ids)
    check_sites(sites)
    free = iter(ports)
    planned: list[LinkListener] = []
    for server in sites:
        for node_id in node_ids[server]:
            for client in sites:
                if client == server:
                    continue
                try:
                    listener_port, proxy_port = next(free), next(free)
                except StopIteration:
                    raise ValueError("not enough ports for the planned listeners") from None
                planned.append(
                    LinkListener(
                        client_site=client,
                        server_site=server,
                        node_id=node_id,
                        listener_port=listener_port,
                        proxy_port=proxy_port,
                    )
                )
    return planned


def ports_needed(node_ids: Mapping[str, Sequence[int]]) -> int:
    """How many ports :func:`plan_listeners` takes."""
    count = len(node_ids)
    return 2 * sum(len(ids) for ids in node_ids.values()) * (count - 1)


def proxy_name(listener: LinkListener) -> str:
    """The Toxiproxy proxy of one listener: ``link.<client>.<server>.<node>`` (aliases have no
    dots, so the name reads back unambiguously)."""
    return f"link.{listener.client_site}.{listener.server_site}.{listener.node_id}"


def proxy_config(listener: LinkListener, host: str) -> dict[str, object]:
    """The proxy as Toxiproxy's API and ``-config`` file take it."""
    return {
        "name": proxy_name(listener),
        "listen": f"{host}:{listener.proxy_port}",
        "upstream": f"{host}:{listener.listener_port}",
        "enabled": True,
    }


def link_pairs(sites: Sequence[str]) -> Iterator[tuple[str, str]]:
    """Every unordered pair of sites once, in the sites' order."""
    for i, first in enumerate(sites):
        for second in sites[i + 1 :]:
            yield first, second


def check_pair(sites: Sequence[str], site_a: str, site_b: str) -> None:
    """``site_a`` and ``site_b`` must be two different linked sites."""
    for site in (site_a, site_b):
        if site not in sites:
            raise ConfigError(
                f"{site!r} is not a linked site of the local environment "
                f"(linked: {', '.join(sites)})"
            )
    if site_a == site_b:
        raise ConfigError(f"a link joins two different sites, got {site_a!r} twice")


def toxic_name(kind: str, stream: str) -> str:
    return f"{kind}_{stream}"


def latency_toxics(latency_ms: int, jitter_ms: int) -> list[dict[str, object]]:
    """The latency toxics of a delayed proxy, one per stream."""
    if latency_ms < 0 or jitter_ms < 0:
        raise ConfigError(
            f"latency and jitter are milliseconds >= 0 (got {latency_ms} ms, jitter {jitter_ms})"
        )
    if jitter_ms > latency_ms:
        raise ConfigError(
            f"jitter ({jitter_ms} ms) may not exceed the latency ({latency_ms} ms): "
            "a delay is never negative"
        )
    return [
        _toxic(LATENCY, stream, {"latency": latency_ms, "jitter": jitter_ms}) for stream in STREAMS
    ]


def bandwidth_toxics(kilobytes_per_s: int) -> list[dict[str, object]]:
    """The bandwidth toxics of a throttled proxy, one per stream."""
    if kilobytes_per_s <= 0:
        raise ConfigError(
            f"a link's bandwidth is kilobytes per second > 0 (got {kilobytes_per_s}); "
            "to cut the link use cut, to lift the limit use heal"
        )
    return [_toxic(BANDWIDTH, stream, {"rate": kilobytes_per_s}) for stream in STREAMS]


def blackhole_toxics() -> list[dict[str, object]]:
    """The toxics of a link cut as a black hole: data is held, never passed, never closed."""
    return [_toxic(BLACKHOLE, stream, {"timeout": 0}) for stream in STREAMS]


def _toxic(kind: str, stream: str, attributes: dict[str, int]) -> dict[str, object]:
    return {
        "name": toxic_name(kind, stream),
        "type": kind,
        "stream": stream,
        "toxicity": 1.0,
        "attributes": attributes,
    }


@dataclass(frozen=True)
class LinkCondition:
    """What a link (or one proxy of it) does to traffic now."""

    cut: bool = False
    #: cut as a black hole (connections held, no byte crosses) rather than refused
    blackhole: bool = False
    latency_ms: int = 0
    jitter_ms: int = 0
    #: None: not throttled
    kilobytes_per_s: int | None = None

    @classmethod
    def of_proxy(cls, proxy: Mapping[str, object]) -> LinkCondition:
        """Read a proxy as Toxiproxy's API returns it (``enabled``, ``toxics``)."""
        latency = jitter = 0
        rate: int | None = None
        blackhole = False
        toxics = proxy.get("toxics")
        for toxic in toxics if isinstance(toxics, list) else []:
            if not isinstance(toxic, dict):
                continue
            attributes = toxic.get("attributes")
            attrs = attributes if isinstance(attributes, dict) else {}
            if toxic.get("type") == LATENCY:
                latency = max(latency, _int(attrs.get("latency")))
                jitter = max(jitter, _int(attrs.get("jitter")))
            elif toxic.get("type") == BANDWIDTH:
                value = _int(attrs.get("rate"))
                rate = value if rate is None else min(rate, value)
            elif toxic.get("type") == BLACKHOLE:
                blackhole = True
        disabled = proxy.get("enabled") is False
        return cls(
            cut=disabled or blackhole,
            blackhole=blackhole and not disabled,
            latency_ms=latency,
            jitter_ms=jitter,
            kilobytes_per_s=rate,
        )

    def to_json_dict(self) -> dict[str, object]:
        return {
            "cut": self.cut,
            "blackhole": self.blackhole,
            "latency_ms": self.latency_ms,
            "jitter_ms": self.jitter_ms,
            "kilobytes_per_s": self.kilobytes_per_s,
        }


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0
