"""Reusable faults (nemeses): each injected by ``start``, healed by ``stop`` (both idempotent),
bounded by its schedule and recorded on the scenario's timeline (the ``faults`` history)."""

from chaos.nemesis.base import Nemesis, Timeline
from chaos.nemesis.catalogue import FAULT_KINDS, NEEDS_LINKS, build
from chaos.nemesis.context import ChaosContext, SiteLinks

__all__ = [
    "FAULT_KINDS",
    "NEEDS_LINKS",
    "ChaosContext",
    "Nemesis",
    "SiteLinks",
    "Timeline",
    "build",
]
