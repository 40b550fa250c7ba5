"""The self-learner's path outside JupyterLab (issue 26): a tutorial's code pasted into a plain
Python console runs as written, including the graph viewer's examples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tutorial_2_runs_as_a_plain_python_script_outside_jupyter(tmp_path):
    """``viz.show`` returns a static picture outside a kernel; the tutorial's
    ``viewer.view.step_text(1)`` must still work there (it raised AttributeError)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "notebooks" / "src" / "02_autograd.py")],
        cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Step 1 of" in result.stdout and "Step 2 of" in result.stdout
