"""The one port between drsvc and Kafka.

Every Kafka client drsvc builds comes from :class:`drsvc.kafka.clients.KafkaClients`, which
applies a topology cluster's security settings in one place; Kafka's errors become
:mod:`drsvc.errors` through :mod:`drsvc.kafka.errors`; time comes from one
:class:`drsvc.kafka.clock.Clock`; a topic is read to an end (whole, in ranges, or backwards
from its end) by :class:`drsvc.kafka.reader.TopicReader`, which gives up only when the read
stops moving. Data types (``Message``, ``TopicPartition``...) are
confluent-kafka's own, re-exported unwrapped by :mod:`drsvc.kafka.types`, and the raw
``KafkaException`` is named only through :mod:`drsvc.kafka.hot`, for the few hot-path sites that
must catch it.

The rule, once the roles have moved onto the port: nothing outside ``drsvc.kafka`` imports
``confluent_kafka``, ``aiokafka`` or faust's transports.

This package module imports nothing, so that a user of one part (the clock, say) does not load
the Kafka client library, nor faust, which the replication workers and the client library never
need. faust apps and workers come from :mod:`drsvc.kafka.faust_app`, the one module of the port
that loads faust.
"""
