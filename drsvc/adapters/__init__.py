"""Adapters: the only place that talks to Consul (py-consul); Kafka is reached through
:mod:`drsvc.kafka`.
"""
