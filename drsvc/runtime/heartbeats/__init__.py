"""Heartbeats: an emitter per cluster, freshness observers, and the role that runs them."""
