"""Runtime roles: replication workers (and, later, heartbeats, checkpoints and the controller)."""
