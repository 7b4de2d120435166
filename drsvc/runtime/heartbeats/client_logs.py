"""librdkafka's own log lines from heartbeat clients, without the flood during an outage.

While a cluster is down, librdkafka logs every failed connection attempt of every client, about
twenty lines a second each. Heartbeat clients are meant to run through outages (and report them
once, see :mod:`.outage`), so their librdkafka lines go through a Python logger whose filter lets
each kind of line through once a minute and says how many like it it held back.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

CLIENT_LOGGER = "drsvc.kafka.heartbeats"

#: numbers (ports, milliseconds, counts) do not make a line different
_NUMBERS = re.compile(r"\d+")
#: forget what was seen when this many different lines piled up (bounds the memory)
_MAX_KINDS = 1000


class RepeatFilter(logging.Filter):
    """Passes a line once per ``window_s`` per kind (the line with its numbers blanked)."""

    def __init__(self, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window_s = window_s
        self._clock = clock
        self._passed_at: dict[str, float] = {}
        self._held_back: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        kind = _NUMBERS.sub("#", message)
        now = self._clock()
        passed_at = self._passed_at.get(kind)
        if passed_at is not None and now - passed_at < self.window_s:
            self._held_back[kind] = self._held_back.get(kind, 0) + 1
            return False
        if len(self._passed_at) >= _MAX_KINDS:
            self._passed_at.clear()
            self._held_back.clear()
        self._passed_at[kind] = now
        held = self._held_back.pop(kind, 0)
        if held:
            record.msg = f"{message} ({held} more like it in the last {self.window_s:.0f}s)"
            record.args = None
        return True


def kafka_client_logger() -> logging.Logger:
    """The logger heartbeat clients hand to librdkafka (``"logger"`` in their config)."""
    logger = logging.getLogger(CLIENT_LOGGER)
    if not any(isinstance(f, RepeatFilter) for f in logger.filters):
        logger.addFilter(RepeatFilter())
    return logger
