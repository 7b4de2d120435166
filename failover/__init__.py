"""The pure domain core of drsvc.

Nothing in this package performs I/O or imports Kafka, Consul, FastAPI, faust or Spark:
replication policy, offset-sync index and translation, failover planning and the DR decision
function live here so that they can be tested exhaustively and fast. The import-linter contract in
``.importlinter`` keeps it that way.
"""
