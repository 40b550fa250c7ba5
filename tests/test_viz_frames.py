"""The frames viewer (torchlight/viz/frames.py): one labelled picture shown at a time, in plain
HTML; Tutorials 8 and 9 use it (their docs pages are checked in Chromium in tests/test_docs.py)."""

from __future__ import annotations

import re

import pytest

from torchlight.viz import Frames, Picture

DOT = Picture('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>', "dot")


def test_one_details_per_frame_one_group_the_chosen_one_open() -> None:
    frames = Frames([("step 1", DOT), ("step 2", DOT), ("<step 3>", "<b>three</b>")], title="t",
                    opened=1)  # fmt: skip
    page = frames._repr_html_()
    assert page.count("<details") == 3
    names = set(re.findall(r"name='([^']+)'", page))
    assert names == {frames.group()}
    opened = re.findall(r"<details[^>]*\bopen>\s*<summary[^>]*>([^<]*)<", page)
    assert opened == ["step 2"]
    assert "&lt;step 3&gt;" in page and "<b>three</b>" in page  # labels escaped, HTML kept
    assert "data:image/svg+xml" in page  # the picture as the notebook shows it
    assert repr(frames) == "Frames(t: 3 pictures, showing 'step 2')"


def test_the_group_follows_the_content_and_is_stable() -> None:
    a = Frames([("a", DOT), ("b", DOT)])
    assert a.group() == Frames([("a", DOT), ("b", DOT)]).group()  # a rebuild stores the same
    assert a.group() != Frames([("a", DOT), ("c", DOT)]).group()  # two viewers on one page


def test_bad_frames_are_refused_with_what_was_expected() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Frames([])
    with pytest.raises(ValueError, match="0 to 1, got 2"):
        Frames([("a", DOT), ("b", DOT)], opened=2)
    with pytest.raises(TypeError, match="frame 0 must be a .label, picture. pair"):
        Frames([(1, DOT)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="HTML text or have _repr_html_"):
        Frames([("a", 3)])
