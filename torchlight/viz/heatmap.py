r"""Heatmaps of attention weights (or any matrices of numbers in $[0, 1]$), side by side.

Row $i$ of an attention map shows where position $i$ looked: darker squares got more weight.
A causal head leaves the upper triangle empty. The picture is a self-contained SVG
(:class:`~torchlight.viz.svg.Picture`), so a stored notebook shows it before any cell runs.

Example:
    >>> import numpy as np
    >>> from torchlight.viz.heatmap import attention_picture
    >>> weights = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]  # uniform over the past
    >>> picture = attention_picture([weights], ["a", "b", "c"], titles=["head 0"])
    >>> picture.svg.count("<rect")
    9
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from torchlight.viz.svg import Picture

__all__ = ["attention_picture"]


def _label(token: str) -> str:
    """A token as the picture shows it: a space as ``_``, a newline as ``\\n``."""
    return html.escape(token.replace(" ", "_").replace("\n", "\\n").replace("\t", "\\t"))


def attention_picture(
    maps: Sequence[np.ndarray],
    tokens: Sequence[str],
    titles: Sequence[str] = (),
    cell: int = 12,
) -> Picture:
    r"""Each $(L, L)$ map of weights in $[0, 1]$ as grey squares (white 0, black 1), its
    columns labelled by ``tokens`` (the keys), side by side.

    Args:
        maps: square arrays, one per head; values outside $[0, 1]$ are clipped.
        tokens: the $L$ tokens, as text.
        titles: a title above each map (``"head 0"``, ...).
        cell: the side of one square, in pixels.

    Raises:
        ValueError: when a map is not $(L, L)$ for the $L$ tokens given.
    """
    n = len(tokens)
    for k, m in enumerate(maps):
        if np.shape(m) != (n, n):
            raise ValueError(
                f"attention_picture: map {k} has shape {np.shape(m)}, expected ({n}, {n}) "
                f"for the {n} tokens given"
            )
    label_h, title_h, gap = 14, 14 if titles else 0, 16
    parts, x0 = [], 0
    for k, m in enumerate(maps):
        levels = np.rint(255 * (1 - np.clip(np.asarray(m, dtype=np.float64), 0, 1))).astype(int)
        if k < len(titles):
            parts.append(
                f'<text x="{x0}" y="11" font-weight="bold">{html.escape(titles[k])}</text>'
            )
        top = title_h + label_h
        for i in range(n):
            for j in range(n):
                g = levels[i, j]
                parts.append(f'<rect x="{x0 + j * cell}" y="{top + i * cell}" width="{cell}" '
                             f'height="{cell}" fill="#{g:02x}{g:02x}{g:02x}"/>')  # fmt: skip
        for j, token in enumerate(tokens):
            parts.append(f'<text x="{x0 + j * cell + 1}" y="{title_h + 10}">{_label(token)}</text>')
        x0 += n * cell + gap
    width, height = max(x0 - gap, 1), title_h + label_h + n * cell
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'shape-rendering="crispEdges" font-family="monospace" font-size="9">'
           f'{"".join(parts)}</svg>')  # fmt: skip
    return Picture(svg, alt=f"attention weights of {len(maps)} head(s) over {n} tokens")
