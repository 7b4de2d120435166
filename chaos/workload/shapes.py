"""What the workload's records look like: keys, headers and value sizes drawn from a seeded
distribution, so one seed always gives the same records in the same order."""

from __future__ import annotations

import math
import random
import string
import zlib
from dataclasses import dataclass

from drsvc.verify.identity import check_producer_id, value_prefix

Header = tuple[str, bytes | None]

_PAD_BLOCK = 1 << 16


@dataclass(frozen=True)
class Shape:
    """The distribution of records. Value sizes are log-normal around ``value_size_median``,
    clipped to ``value_size_max`` (the identity prefix comes on top); each record has 0 to
    ``headers_max`` headers, some with a null or empty value and some repeating a key."""

    value_size_median: int = 100
    value_size_max: int = 8192
    value_size_sigma: float = 1.0
    headers_max: int = 3
    null_key_ratio: float = 0.05
    keys: int = 1000

    def __post_init__(self) -> None:
        if not 0 <= self.value_size_median <= self.value_size_max:
            raise ValueError("value sizes need 0 <= median <= max")
        if not 0 <= self.null_key_ratio <= 1:
            raise ValueError("null_key_ratio must lie in [0, 1]")
        if self.keys < 1 or self.headers_max < 0:
            raise ValueError("keys must be >= 1 and headers_max >= 0")


@dataclass(frozen=True)
class PlannedRecord:
    topic: str
    key: bytes | None
    value: bytes
    headers: list[Header]


class RecordFactory:
    """The records of one producer, in sequence order, from ``seed`` and the producer id."""

    def __init__(self, producer_id: str, topics: tuple[str, ...], shape: Shape, seed: int) -> None:
        if not topics:
            raise ValueError(f"producer {producer_id} has no topic")
        self.producer_id = check_producer_id(producer_id)
        self.topics = topics
        self.shape = shape
        self._rng = random.Random(seed * 1_000_003 + zlib.crc32(producer_id.encode()))
        alphabet = (string.ascii_letters + string.digits).encode()
        self._pad = bytes(self._rng.choice(alphabet) for _ in range(_PAD_BLOCK))
        self._pad += self._pad[: shape.value_size_max]
        self._mu = math.log(max(shape.value_size_median, 1))

    def value_size(self) -> int:
        if self.shape.value_size_median == 0:
            return 0
        size = int(self._rng.lognormvariate(self._mu, self.shape.value_size_sigma))
        return min(size, self.shape.value_size_max)

    def record(self, seq: int) -> PlannedRecord:
        rng = self._rng
        topic = self.topics[rng.randrange(len(self.topics))]
        key = (
            None
            if rng.random() < self.shape.null_key_ratio
            else f"key-{rng.randrange(self.shape.keys)}".encode()
        )
        size = self.value_size()
        start = rng.randrange(_PAD_BLOCK)
        value = value_prefix(self.producer_id, seq) + self._pad[start : start + size]
        headers: list[Header] = []
        for i in range(rng.randint(0, self.shape.headers_max)):
            kind = rng.random()
            if kind < 0.1:
                headers.append((f"h{i}", None))
            elif kind < 0.2:
                headers.append((f"h{i}", b""))
            elif kind < 0.3 and headers:
                headers.append((headers[0][0], str(seq).encode()))  # a repeated key
            else:
                headers.append((f"h{i}", rng.randbytes(rng.randint(1, 16))))
        return PlannedRecord(topic, key, value, headers)
