"""drsvc: active/active disaster recovery and failover for Apache Kafka."""

__version__ = "0.1.0"
