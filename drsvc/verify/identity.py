"""How a workload record says who wrote it: ``<producer id>:<sequence>:`` at the start of its value.

The identity travels in the value, not in a header, so the checks can tell records apart even when
headers are what was damaged; the rest of the value is padding of the size the workload chose.
Producer ids never contain ``:``. Parsing returns None for anything else (a record no workload
wrote), never raises.
"""

from __future__ import annotations

SEPARATOR = ":"
_SEP = SEPARATOR.encode()


def check_producer_id(producer_id: str) -> str:
    """Return ``producer_id`` if it can start a value, else raise ValueError naming the problem."""
    if not producer_id or SEPARATOR in producer_id or not producer_id.isascii():
        raise ValueError(f"producer id {producer_id!r} must be non-empty ASCII without ':'")
    return producer_id


def value_prefix(producer_id: str, seq: int) -> bytes:
    """The first bytes of the value of record ``seq`` of ``producer_id``."""
    return f"{producer_id}{SEPARATOR}{seq}{SEPARATOR}".encode()


def parse(value: bytes | None) -> tuple[str, int] | None:
    """``(producer id, sequence)`` of a workload record's value, or None."""
    if value is None:
        return None
    parts = value.split(_SEP, 2)
    if len(parts) < 3 or not parts[0] or not parts[1].isdigit():
        return None
    try:
        return parts[0].decode("ascii"), int(parts[1])
    except UnicodeDecodeError:
        return None
