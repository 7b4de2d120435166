"""Topology files: named clusters, the flows between them and the applications that fail over.

Load a file with :func:`load_topology`; the result is a frozen :class:`Topology` whose lookups
(``cluster``, ``flows_into``, ``flows_from``, ``policy_for``, ``topic_verdict``) the rest of drsvc
uses instead of reading YAML itself.
"""

from drsvc.topology.consul import ConsulConfig, ConsulTlsConfig, ConsulTokenRef
from drsvc.topology.loader import load_topology, load_topology_text
from drsvc.topology.models import (
    Application,
    Cluster,
    Flow,
    NameFilterConfig,
    StartPosition,
    Topology,
)
from drsvc.topology.security import SaslConfig, SecurityConfig, TlsConfig

__all__ = [
    "Application",
    "Cluster",
    "ConsulConfig",
    "ConsulTlsConfig",
    "ConsulTokenRef",
    "Flow",
    "NameFilterConfig",
    "SaslConfig",
    "SecurityConfig",
    "StartPosition",
    "TlsConfig",
    "Topology",
    "load_topology",
    "load_topology_text",
]
