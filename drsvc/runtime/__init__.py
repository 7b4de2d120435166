"""Runtime roles: replication, checkpoints, translation, heartbeats, failover, the DR controller,
migration, status and the supervisor of ``drsvc run``; ``.importlinter``'s ``runtime-roles``
contract keeps them apart (``docs/architecture.md``)."""
