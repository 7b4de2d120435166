"""Links between the sites of a local environment: cut, heal, delay and throttle them.

An environment brought up with links (``drsvc dev up --links``, or
``LocalEnvironment.up(aliases, links=True)``) has, per pair of sites, proxies that carry all Kafka
traffic one site's processes send to the other's brokers when they use the bootstrap addresses
``LocalEnvironment.bootstrap_from(site, cluster)`` gives them. :class:`SiteLinks` acts on those
proxies, always on both directions of a link at once::

    links = env.links()
    links.cut("east", "west")            # both directions: connections dropped, new ones refused
    links.cut("east", "west", blackhole=True)  # or: connections held, no byte crosses
    links.heal("east", "west")           # back to normal (also lifts latency and bandwidth)
    links.delay("east", "west", 20, 5)   # 20 ms (+-5) each way: a round trip takes 40 ms more
    links.limit("east", "west", 256)     # 256 KB/s each way, per connection
    links.heal_all()
    links.describe()                     # one dict per link, see :meth:`SiteLinks.describe`

Same-site traffic and clients that use a cluster's own bootstrap servers (tests, tools, the
verify job) never go through a link.
"""

from __future__ import annotations

from collections.abc import Sequence

from drsvc.devenv.link_plan import (
    LATENCY,
    STREAMS,
    LinkCondition,
    bandwidth_toxics,
    blackhole_toxics,
    check_pair,
    latency_toxics,
    link_pairs,
    proxy_name,
    toxic_name,
)
from drsvc.devenv.state import LinkListener, LinksState
from drsvc.devenv.toxiproxy import Proxy, ProxyApi, ToxiproxyClient


class SiteLinks:
    """The links between the linked sites of one environment, through its Toxiproxy server."""

    def __init__(self, links: LinksState, client: ProxyApi | None = None) -> None:
        self._links = links
        self._client = client or ToxiproxyClient(links.api_addr)

    @property
    def sites(self) -> list[str]:
        return list(self._links.sites)

    def cut(self, site_a: str, site_b: str, blackhole: bool = False) -> None:
        """Cut the link both ways until :meth:`heal` (which also lifts any latency or bandwidth
        limit of the link).

        By default open connections are dropped and new ones refused, so clients notice at
        once. ``blackhole=True`` drops no connection: every connection, open or new, is held
        and no byte crosses, so clients notice only through their time-outs, as when a real
        network drops packets. Healing a black hole leaves the connections it held broken
        (what was sent meanwhile is lost): clients time out and reconnect."""
        pair = self._pair(site_a, site_b)
        if not blackhole:
            for listener in pair:
                self._client.set_enabled(proxy_name(listener), False)
            return
        proxies = self._client.proxies()
        for listener in pair:
            name = proxy_name(listener)
            present = _toxic_names(proxies.get(name, {}))
            for toxic in blackhole_toxics():
                self._client.put_toxic(name, toxic, exists=toxic["name"] in present)

    def heal(self, site_a: str, site_b: str) -> None:
        """Restore the link both ways: reconnectable, no latency, no bandwidth limit."""
        proxies = self._client.proxies()
        for listener in self._pair(site_a, site_b):
            name = proxy_name(listener)
            for toxic in _toxic_names(proxies.get(name, {})):
                self._client.remove_toxic(name, toxic)
            self._client.set_enabled(name, True)

    def delay(self, site_a: str, site_b: str, latency_ms: int, jitter_ms: int = 0) -> None:
        """Add ``latency_ms`` (± ``jitter_ms``) to each direction of the link, so a request and
        its answer take ``2 * latency_ms`` longer; 0 and 0 remove the delay."""
        toxics = latency_toxics(latency_ms, jitter_ms)
        pair = self._pair(site_a, site_b)
        proxies = self._client.proxies()
        for listener in pair:
            name = proxy_name(listener)
            present = _toxic_names(proxies.get(name, {}))
            if latency_ms == 0 and jitter_ms == 0:
                for stream in STREAMS:
                    if toxic_name(LATENCY, stream) in present:
                        self._client.remove_toxic(name, toxic_name(LATENCY, stream))
                continue
            for toxic in toxics:
                self._client.put_toxic(name, toxic, exists=toxic["name"] in present)

    def limit(self, site_a: str, site_b: str, kilobytes_per_s: int) -> None:
        """Throttle each direction of the link to ``kilobytes_per_s`` per connection (a Kafka
        client holds one connection per broker); :meth:`heal` lifts it."""
        toxics = bandwidth_toxics(kilobytes_per_s)
        proxies = self._client.proxies()
        for listener in self._pair(site_a, site_b):
            name = proxy_name(listener)
            present = _toxic_names(proxies.get(name, {}))
            for toxic in toxics:
                self._client.put_toxic(name, toxic, exists=toxic["name"] in present)

    def heal_all(self) -> None:
        """Every link back to normal."""
        self._client.reset()

    def describe(self) -> list[dict[str, object]]:
        """One dict per link (pair of sites, in the sites' order)::

            {"sites": ["east", "west"], "cut": False, "blackhole": False,
             "latency_ms": 20, "jitter_ms": 0,
             "kilobytes_per_s": None, "consistent": True,
             "proxies": [{"name": "link.west.east.1", "from": "west", "to": "east",
                          "node_id": 1, "listen": "127.0.0.1:40001",
                          "upstream": "127.0.0.1:40002", "cut": False, "latency_ms": 20, ...}]}

        The link's condition is that of its proxies; ``consistent`` is False when they differ
        (a change was interrupted, or someone used Toxiproxy's API directly): heal the link.
        A proxy the server does not know is reported with ``"missing": True``.
        """
        proxies = self._client.proxies()
        described: list[dict[str, object]] = []
        for site_a, site_b in link_pairs(self._links.sites):
            rows: list[dict[str, object]] = []
            conditions: list[LinkCondition] = []
            for listener in self._pair(site_a, site_b):
                name = proxy_name(listener)
                proxy = proxies.get(name)
                row: dict[str, object] = {
                    "name": name,
                    "from": listener.client_site,
                    "to": listener.server_site,
                    "node_id": listener.node_id,
                    "listen": f"{self._links.host}:{listener.proxy_port}",
                    "upstream": f"{self._links.host}:{listener.listener_port}",
                }
                if proxy is None:
                    row["missing"] = True
                    conditions.append(LinkCondition(cut=True))
                else:
                    condition = LinkCondition.of_proxy(proxy)
                    conditions.append(condition)
                    row.update(condition.to_json_dict())
                rows.append(row)
            first = conditions[0] if conditions else LinkCondition()
            described.append(
                {
                    "sites": [site_a, site_b],
                    **first.to_json_dict(),
                    "consistent": all(c == first for c in conditions)
                    and not any(r.get("missing") for r in rows),
                    "proxies": rows,
                }
            )
        return described

    def _pair(self, site_a: str, site_b: str) -> Sequence[LinkListener]:
        check_pair(self._links.sites, site_a, site_b)
        return [*self._links.between(site_a, site_b), *self._links.between(site_b, site_a)]


def _toxic_names(proxy: Proxy) -> set[str]:
    toxics = proxy.get("toxics")
    return {
        str(t["name"])
        for t in (toxics if isinstance(toxics, list) else [])
        if isinstance(t, dict) and "name" in t
    }
