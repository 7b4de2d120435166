"""The embedded local environment behind ``drsvc dev``: real KRaft Kafka clusters and a real Consul
server agent on this machine, grouped by site, with their state and logs in one state directory."""
