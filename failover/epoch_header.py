"""The application's epoch, stamped on every record a failover-following producer writes.

``drsvc.client.FailoverProducer`` adds the header ``drsvc.epoch`` to each record it produces: the
epoch of the active-cluster document (:mod:`failover.active`) under which the record was sent.
A record whose epoch is older than the epoch active on its cluster when it was appended was
written by a client that had not yet heard of a switch (a paused process, a late flush): the
replication engine and the verify job count such records instead of trusting the lease alone.

The value is the epoch in ASCII decimal, so clients in any language can write it.
"""

from __future__ import annotations

__all__ = ["EPOCH_HEADER", "decode_epoch", "encode_epoch"]

EPOCH_HEADER = "drsvc.epoch"

_MAX_DIGITS = 19


def encode_epoch(epoch: int) -> bytes:
    """The header value of ``epoch`` (a non-negative integer)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"an epoch is a non-negative integer, not {epoch!r}")
    return str(epoch).encode("ascii")


def decode_epoch(value: bytes | str | None) -> int | None:
    """The epoch a header value holds; None when absent or not an epoch (never a guess)."""
    if value is None:
        return None
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if not text or len(text) > _MAX_DIGITS or not text.isdigit() or not text.isascii():
        return None
    return int(text)
