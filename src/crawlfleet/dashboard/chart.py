"""The progress chart: an inline SVG drawn on the server (no script, no CDN)."""

from __future__ import annotations

from collections.abc import Sequence

from crawlfleet.dashboard.sampler import Point

WIDTH, HEIGHT, PAD = 720, 220, 36


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def progress_svg(points: Sequence[Point]) -> str:
    """Requests finished (solid) and known (dashed) over the dashboard's samples."""
    if len(points) < 2:
        return '<p class="muted">the chart appears after two samples</p>'
    t0, t1 = points[0].at, points[-1].at
    span_s = max(t1 - t0, 1e-9)
    top = max(max(p.total for p in points), 1)
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD

    def xy(at: float, value: int) -> str:
        x = PAD + (at - t0) / span_s * inner_w
        y = HEIGHT - PAD - value / top * inner_h
        return f"{x:.1f},{y:.1f}"

    finished = " ".join(xy(p.at, p.finished) for p in points)
    total = " ".join(xy(p.at, p.total) for p in points)
    last = points[-1]
    return (
        f'<svg class="chart" role="img" aria-label="progress over time" width="{WIDTH}"'
        f' height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}">'
        f'<rect x="{PAD}" y="{PAD}" width="{inner_w}" height="{inner_h}" class="frame"/>'
        f'<polyline points="{total}" class="known"/>'
        f'<polyline points="{finished}" class="finished"/>'
        f'<text x="{PAD}" y="{PAD - 8}">{top}</text>'
        f'<text x="{PAD}" y="{HEIGHT - 10}">0:00</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 10}" text-anchor="end">{_clock(span_s)}</text>'
        f'<text x="{WIDTH - PAD}" y="{PAD - 8}" text-anchor="end">'
        f"finished {last.finished} of {last.total} known</text>"
        "</svg>"
    )
