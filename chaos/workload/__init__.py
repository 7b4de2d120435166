"""The chaos workload: sequence-numbered producers and history-keeping consumers.

Producers (:mod:`chaos.workload.producer`) write records whose value starts with their producer id
and sequence number and log every record the cluster acknowledged; consumers
(:mod:`chaos.workload.consumer`) log every record they process and every offset they commit. Both
write the history tables of :mod:`drsvc.verify.histories`, which ``drsvc verify`` checks.
:class:`~chaos.workload.workload.Workload` runs a set of them for a scenario.
"""

from chaos.workload.consumer import ConsumerSpec, HistoryConsumer
from chaos.workload.producer import ProducerSpec, SequenceProducer
from chaos.workload.shapes import RecordFactory, Shape
from chaos.workload.workload import Workload, WorkloadStats

__all__ = [
    "ConsumerSpec",
    "HistoryConsumer",
    "ProducerSpec",
    "RecordFactory",
    "SequenceProducer",
    "Shape",
    "Workload",
    "WorkloadStats",
]
