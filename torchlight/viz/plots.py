"""Small pictures without matplotlib: a PNG encoder, a decision-boundary map, a line chart.

Each returns SVG text (with the heat map inside as a PNG data URL), so the training viewer
works in any browser and in a saved notebook, and needs nothing but numpy.

Example:
    >>> from torchlight.viz.plots import png_bytes
    >>> import numpy as np
    >>> png_bytes(np.zeros((2, 3, 3), dtype=np.uint8))[:8]
    b'\\x89PNG\\r\\n\\x1a\\n'
"""

from __future__ import annotations

import base64
import html
import struct
import zlib
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["CLASS_COLORS", "boundary_svg", "line_chart_svg", "png_bytes"]

# Class 0 blue, class 1 orange: full colours for the points, light ones for the background.
CLASS_COLORS = ((26, 115, 232), (227, 116, 0))
LIGHT_COLORS = ((168, 199, 250), (253, 201, 140))


def png_bytes(rgb: np.ndarray) -> bytes:
    """Encode an (H, W, 3) uint8 image as PNG: a signature, then IHDR, IDAT and IEND chunks."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    height, width, channels = rgb.shape
    if channels != 3:
        raise ValueError(f"png_bytes needs an (H, W, 3) RGB image, got shape {rgb.shape}")
    # Each row starts with its filter type (0: none); zlib does the compressing.
    raw = b"".join(b"\x00" + rgb[row].tobytes() for row in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + tag
            + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, truecolour
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


def probability_colors(p: np.ndarray) -> np.ndarray:
    """Light blue where P(class 1) = 0, white at 0.5, light orange at 1: an (..., 3) uint8 array."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)[..., None]
    white = np.array([255.0, 255.0, 255.0])
    blue, orange = (np.array(c, dtype=np.float64) for c in LIGHT_COLORS)
    toward_blue = white + (blue - white) * np.clip((0.5 - p) * 2, 0, 1)
    toward_orange = white + (orange - white) * np.clip((p - 0.5) * 2, 0, 1)
    return np.where(p < 0.5, toward_blue, toward_orange).round().astype(np.uint8)


def boundary_svg(
    probabilities: np.ndarray,
    points: np.ndarray,
    labels: np.ndarray,
    extent: tuple[float, float],
    size: int = 300,
    predicted: np.ndarray | None = None,
) -> str:
    """The decision boundary: P(class 1) as a background, the data as dots.

    Args:
        probabilities: (G, G) grid of P(class 1); row 0 is the top (largest $x_2$).
        points: (N, 2) inputs; labels: (N,) classes 0/1.
        extent: ``(low, high)`` of both axes, the square the grid covers.
        size: picture width and height in pixels.
        predicted: (N,) predicted classes; wrong ones get a black ring.
    """
    low, high = extent
    image = base64.b64encode(png_bytes(probability_colors(probabilities))).decode("ascii")
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" viewBox="0 0 {size} {size}" '
        'class="tl-boundary">',
        f'<image href="data:image/png;base64,{image}" x="0" y="0" width="{size}" height="{size}" '
        'preserveAspectRatio="none"/>',
    ]
    scale = size / (high - low)
    for i, ((x1, x2), label) in enumerate(zip(points, labels, strict=True)):
        cx, cy = (x1 - low) * scale, size - (x2 - low) * scale
        wrong = predicted is not None and predicted[i] != label
        r, g, b = CLASS_COLORS[int(label)]
        ring = 'stroke="#000" stroke-width="1.6"' if wrong else 'stroke="#fff" stroke-width="0.8"'
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.2" fill="rgb({r},{g},{b})" {ring}/>')
    out.append(f'<rect width="{size}" height="{size}" fill="none" stroke="#bdc1c6"/>')
    out.append("</svg>")
    return "".join(out)


def line_chart_svg(
    series: Sequence[tuple[str, Sequence[float], str]],
    width: int = 340,
    height: int = 170,
    y_max: float | None = None,
    title: str = "",
    formats: Mapping[str, str] | None = None,
) -> str:
    """Lines over the step number, each ``(label, values, colour)``, sharing the y axis from 0.

    The legend shows each series' last value, formatted by ``formats[label]`` (a format spec:
    ``".1%"`` shows an accuracy of 1 as ``100.0%``, as the viewer's status line does), else
    ``".4g"``.
    """
    formats = formats or {}
    left, right, top, bottom = 40, 10, 22, 24
    plot_w, plot_h = width - left - right, height - top - bottom
    longest = max((len(v) for _, v, _ in series), default=0)
    finite = [x for _, v, _ in series for x in v if np.isfinite(x)]
    top_value = y_max if y_max is not None else max(finite, default=1.0) or 1.0
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="sans-serif" font-size="10" class="tl-chart">',
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
        f'<text x="{left}" y="13" font-size="11" font-weight="bold">{html.escape(title)}</text>',
    ]
    for fraction in (0.0, 0.5, 1.0):  # grid lines with their values
        y = top + plot_h * (1 - fraction)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e8eaed"/>'
        )
        out.append(
            f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end" fill="#5f6368">{top_value * fraction:.3g}</text>'
        )
    out.append(
        f'<text x="{width - right}" y="{height - 6}" text-anchor="end" fill="#5f6368">step {max(longest - 1, 0)}</text>'
    )
    legend_x = left + 120.0
    for label, values, color in series:
        if values:
            points = []
            for i, v in enumerate(values):
                x = left + plot_w * (i / max(longest - 1, 1))
                y = (
                    top + plot_h * (1 - min(max(v / top_value, 0.0), 1.0))
                    if np.isfinite(v)
                    else top
                )
                points.append(f"{x:.1f},{y:.1f}")
            out.append(
                f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}" stroke-width="1.8"/>'
            )
            text = f"{label} {values[-1]:{formats.get(label, '.4g')}}"
        else:
            text = f"{label} -"
        out.append(
            f'<text x="{legend_x}" y="13" fill="{color}" font-weight="bold">{html.escape(text)}</text>'
        )
        legend_x += 8 + 6.2 * len(text)
    out.append("</svg>")
    return "".join(out)
