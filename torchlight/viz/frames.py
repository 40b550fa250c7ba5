r"""Pictures to choose from or step through, in plain HTML: no script, no widget, no kernel.

A :class:`Frames` shows one labelled picture at a time: the attention pattern of the head you
pick, the KV cache after step $t$, a weight histogram before or after quantization. Each frame
is a ``<details>`` element of one group (their shared ``name``): a click on a frame's label opens
it and closes the one that was open (Chromium 120+, Firefox 130+, Safari 17.2+; an older
browser leaves the other frames open). Being plain HTML, it works the same wherever the
notebook's output is shown: in JupyterLab (a stored notebook too, before any cell runs), on the
docs site, in nbconvert's HTML. The ipywidgets viewers (:mod:`~torchlight.viz.widgets`) need a
running kernel; these need nothing.

Example:
    >>> from torchlight.viz.frames import Frames
    >>> from torchlight.viz.svg import Picture
    >>> dot = Picture('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>', "dot")
    >>> frames = Frames([("step 1", dot), ("step 2", "<b>two</b>")], title="steps")
    >>> len(frames), frames._repr_html_().count("<details")
    (2, 2)
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Sequence
from typing import Any

__all__ = ["Frames"]


def _body(content: Any) -> str:
    """A frame's content as HTML: a picture (anything with ``_repr_html_``) or HTML text."""
    if isinstance(content, str):
        return content
    shown = getattr(content, "_repr_html_", None)
    if shown is None:
        raise TypeError(
            f"Frames: a frame's content must be HTML text or have _repr_html_ (a Picture), got "
            f"{type(content).__name__}"
        )
    return str(shown())


class Frames:
    """Labelled pictures, one shown at a time; a click on a label shows its picture.

    Args:
        frames: ``(label, content)`` pairs, in order; ``content`` is a
            :class:`~torchlight.viz.svg.Picture` (or anything with ``_repr_html_``) or HTML text.
        title: a line above the labels.
        opened: the frame shown first (0-based).

    Raises:
        ValueError: no frames, or ``opened`` is not one of them.
        TypeError: a label is not a str, or a content is neither HTML text nor displayable.
    """

    def __init__(self, frames: Sequence[tuple[str, Any]], title: str = "", opened: int = 0) -> None:
        frames = list(frames)
        if not frames:
            raise ValueError("Frames: needs at least one (label, picture) pair, got none")
        if not 0 <= opened < len(frames):
            raise ValueError(
                f"Frames: opened must be a frame's index, 0 to {len(frames) - 1}, got {opened}"
            )
        for k, frame in enumerate(frames):
            if not (isinstance(frame, tuple) and len(frame) == 2 and isinstance(frame[0], str)):
                raise TypeError(
                    f"Frames: frame {k} must be a (label, picture) pair with a str label, got "
                    f"{type(frame).__name__}"
                )
        self.labels = [label for label, _ in frames]
        self.bodies = [_body(content) for _, content in frames]
        self.title = title
        self.opened = opened

    def __len__(self) -> int:
        return len(self.labels)

    def group(self) -> str:
        """The ``name`` shared by this viewer's frames: from its content, so that two viewers
        on one page never share a group and a rebuilt notebook stores the same HTML."""
        digest = hashlib.sha256("\0".join([self.title, *self.labels, *self.bodies]).encode())
        return f"tl-frames-{digest.hexdigest()[:12]}"

    def _repr_html_(self) -> str:
        group = self.group()
        parts = []
        if self.title:
            parts.append(
                f"<div style='margin-bottom:4px'><b>{html.escape(self.title)}</b> "
                "<span style='color:#5f6368'>(click a label to show its picture)</span></div>"
            )
        for k, (label, body) in enumerate(zip(self.labels, self.bodies, strict=True)):
            opened = " open" if k == self.opened else ""
            parts.append(
                f"<details class='tl-frame' name='{group}'{opened}>"
                f"<summary style='cursor:pointer'>{html.escape(label)}</summary>"
                f"<div style='margin:4px 0 8px 1.2em'>{body}</div></details>"
            )
        return f"<div class='tl-frames' id='{group}' style='font-size:13px'>{''.join(parts)}</div>"

    def __repr__(self) -> str:
        return f"Frames({self.title or 'untitled'}: {len(self)} pictures, showing {self.labels[self.opened]!r})"
