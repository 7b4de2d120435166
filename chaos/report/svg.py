"""Small inline SVG charts drawn by hand (no plotting library): a line chart over time with
shaded intervals, a timeline of intervals, and grouped bars. Pure: data in, SVG text out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

WIDTH = 860
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")

Point = tuple[float, float | None]
Interval = tuple[str, float, float | None, str]


def _svg(height: int, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">'
        + "".join(body)
        + "</svg>"
    )


def _scale(lo: float, hi: float, out_lo: float, out_hi: float, value: float) -> float:
    if hi <= lo:
        return out_lo
    return out_lo + (value - lo) * (out_hi - out_lo) / (hi - lo)


def line_chart(
    series: Mapping[str, Sequence[Point]],
    shaded: Sequence[tuple[float, float, str]] = (),
    x_label: str = "seconds",
    y_label: str = "",
    height: int = 260,
) -> str:
    """Lines per series (None values break a line), with shaded x intervals labelled."""
    left, right, top, bottom = 60, WIDTH - 150, 20, height - 35
    xs = [x for points in series.values() for x, _ in points] + [v for s in shaded for v in s[:2]]
    ys = [y for points in series.values() for _, y in points if y is not None]
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y_hi = max([*ys, 1.0])
    body = [
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
        'fill="none" stroke="#999"/>'
    ]
    for start, end, label in shaded:
        x0 = _scale(x_lo, x_hi, left, right, start)
        x1 = _scale(x_lo, x_hi, left, right, end)
        body.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 1):.1f}" '
            f'height="{bottom - top}" fill="#f4c7c3" opacity="0.6"><title>'
            f"{escape(label)}</title></rect>"
        )
        body.append(f'<text x="{x0 + 2:.1f}" y="{top + 12}" fill="#a33">{escape(label)}</text>')
    for i in range(5):
        value = y_hi * i / 4
        y = _scale(0, y_hi, bottom, top, value)
        body.append(f'<text x="{left - 5}" y="{y + 4:.1f}" text-anchor="end">{value:,.0f}</text>')
        body.append(f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
    for i in range(6):
        value = x_lo + (x_hi - x_lo) * i / 5
        x = _scale(x_lo, x_hi, left, right, value)
        body.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{value:.0f}</text>')
    body.append(
        f'<text x="{(left + right) / 2}" y="{height - 5}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    body.append(f'<text x="12" y="{top + 10}">{escape(y_label)}</text>')
    for n, (name, points) in enumerate(sorted(series.items())):
        color = PALETTE[n % len(PALETTE)]
        runs: list[list[str]] = [[]]
        for x, point in sorted(points, key=lambda p: p[0]):
            if point is None:
                runs.append([])
                continue
            px, py = _scale(x_lo, x_hi, left, right, x), _scale(0, y_hi, bottom, top, point)
            runs[-1].append(f"{px:.1f},{py:.1f}")
        for run in runs:
            if run:
                body.append(
                    f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
                    f'points="{" ".join(run)}"/>'
                )
        body.append(
            f'<text x="{right + 10}" y="{top + 14 + 14 * n}" fill="{color}">{escape(name)}</text>'
        )
    return _svg(height, body)


def timeline(intervals: Sequence[Interval], x_label: str = "seconds") -> str:
    """One row per interval: (label, start, end or None for open, tooltip)."""
    row_h = 22
    height = 45 + row_h * max(len(intervals), 1)
    left, right = 230, WIDTH - 20
    ends = [e for _, _, e, _ in intervals if e is not None]
    x_lo = min([s for _, s, _, _ in intervals] + [0.0])
    x_hi = max(ends + [s for _, s, _, _ in intervals] + [x_lo + 1])
    body: list[str] = []
    for i, (label, start, end, tip) in enumerate(intervals):
        y = 10 + i * row_h
        x0 = _scale(x_lo, x_hi, left, right, start)
        x1 = _scale(x_lo, x_hi, left, right, end if end is not None else x_hi)
        color = PALETTE[i % len(PALETTE)]
        body.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">{escape(label)}</text>')
        body.append(
            f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 2):.1f}" height="14" '
            f'fill="{color}"><title>{escape(tip)}</title></rect>'
        )
        span = "open" if end is None else f"{end - start:.1f} s"
        body.append(f'<text x="{min(x1 + 4, right - 40):.1f}" y="{y + 14}">{span}</text>')
    bottom = 15 + row_h * max(len(intervals), 1)
    for i in range(6):
        value = x_lo + (x_hi - x_lo) * i / 5
        x = _scale(x_lo, x_hi, left, right, value)
        body.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{value:.0f}</text>')
    body.append(
        f'<text x="{(left + right) / 2}" y="{bottom + 28}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    return _svg(height, body)


def bars(groups: Sequence[tuple[str, Mapping[str, int]]], height: int = 240) -> str:
    """Grouped bars: one group per label, one bar per series name (e.g. lost, duplicates)."""
    names = sorted({n for _, values in groups for n in values})
    left, right, top, bottom = 50, WIDTH - 120, 15, height - 70
    y_hi = max([v for _, values in groups for v in values.values()] + [1])
    slot = (right - left) / max(len(groups), 1)
    bar_w = max(slot / (len(names) + 1), 1)
    body = [f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#999"/>']
    for i in range(5):
        value = y_hi * i / 4
        y = _scale(0, y_hi, bottom, top, value)
        body.append(f'<text x="{left - 5}" y="{y + 4:.1f}" text-anchor="end">{value:,.0f}</text>')
    for g, (label, values) in enumerate(groups):
        x = left + g * slot
        for n, name in enumerate(names):
            value = values.get(name, 0)
            y = _scale(0, y_hi, bottom, top, value)
            body.append(
                f'<rect x="{x + n * bar_w:.1f}" y="{y:.1f}" width="{bar_w:.1f}" '
                f'height="{bottom - y:.1f}" fill="{PALETTE[n % len(PALETTE)]}">'
                f"<title>{escape(label)} {name}: {value}</title></rect>"
            )
        body.append(
            f'<text transform="translate({x + slot / 2:.1f},{bottom + 8}) rotate(45)" '
            f'font-size="9">{escape(label)}</text>'
        )
    for n, name in enumerate(names):
        body.append(
            f'<text x="{right + 10}" y="{top + 14 + 14 * n}" '
            f'fill="{PALETTE[n % len(PALETTE)]}">{escape(name)}</text>'
        )
    return _svg(height, body)
