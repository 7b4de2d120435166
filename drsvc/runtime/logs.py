"""Structured logs: one JSON object per line, for log pipelines (``--log-format json``)."""

from __future__ import annotations

import json
import logging
import os
import socket
from datetime import UTC, datetime

LOG_FORMATS = ("text", "json")

#: LogRecord attributes that are not "extra" fields given by the caller
_STANDARD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


class JsonLogFormatter(logging.Formatter):
    """Formats a record as JSON: time (UTC, ISO 8601), level, logger, message, process, host,
    any ``extra={...}`` fields the caller passed, and the exception text if there is one."""

    def __init__(self) -> None:
        super().__init__()
        self._host = socket.gethostname()

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "pid": os.getpid(),
            "host": self._host,
        }
        role = os.environ.get("DRSVC_ROLE")
        if role:
            entry["role"] = role
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_"):
                entry[key] = value if isinstance(value, (str, int, float, bool)) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)
