"""Adapters: the only place that talks to Kafka (confluent-kafka) and Consul (py-consul).

Each adapter maps its library's exceptions to :mod:`drsvc.errors` at this edge.
"""
