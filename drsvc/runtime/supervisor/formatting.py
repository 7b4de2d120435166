"""Numbers as the views show them: short, and ``-`` for unknown."""

from __future__ import annotations

UNKNOWN = "-"


def format_count(value: float | None) -> str:
    """``1234`` -> ``1.2k``; None -> ``-``."""
    if value is None:
        return UNKNOWN
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:.0f}"


def format_duration(seconds: float | None) -> str:
    """``42s``, ``3m12s``, ``2h05m``; None -> ``-``."""
    if seconds is None:
        return UNKNOWN
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def format_latency(milliseconds: float | None) -> str:
    """``35 ms``, ``4.5 s``, ``1h00m`` (records copied long after they were written)."""
    if milliseconds is None:
        return UNKNOWN
    if milliseconds < 1000:
        return f"{milliseconds:.0f} ms"
    if milliseconds < 60_000:
        return f"{milliseconds / 1000:.1f} s"
    return format_duration(milliseconds / 1000)
