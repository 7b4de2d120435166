"""drsvc's client library: applications that follow failovers.

* :class:`ActiveCluster` watches where an application is active (Consul key
  ``drsvc/<ns>/apps/<app>/active``) and holds the lease the protocol asks of every client.
* :class:`FailoverConsumer` and :class:`FailoverProducer` are confluent-kafka's consumer and
  producer over the active cluster; they stop on a switch and reconnect to the new cluster.
* :func:`origin_of` says where a record was first written.

The protocol itself, for clients in other languages, is in ``docs/client-protocol.md``.
"""

from __future__ import annotations

from drsvc.client.active_cluster import ActiveCluster, ActiveState
from drsvc.client.consumer import FailoverConsumer
from drsvc.client.origins import origin_of
from drsvc.client.producer import FailoverProducer
from drsvc.errors import NoActiveClusterError
from failover.logical_topics import Origin

__all__ = [
    "ActiveCluster",
    "ActiveState",
    "FailoverConsumer",
    "FailoverProducer",
    "NoActiveClusterError",
    "Origin",
    "origin_of",
]
