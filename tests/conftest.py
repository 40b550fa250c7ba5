"""Shared pytest configuration: hypothesis profiles.

Select a profile with the environment variable ``HYPOTHESIS_PROFILE``:

- ``ci``: derandomized (the same examples on every run), no deadline, 50 examples;
  ``make test`` uses it.
- ``dev`` (default): hypothesis' own defaults, random examples.
"""

import os
import signal

from hypothesis import HealthCheck, settings

# The CUDA tests run on numba's simulator unless a real GPU is asked for (TORCHLIGHT_TEST_CUDA=gpu).
# numba reads the switch once, when numba.cuda is first imported, by whichever module gets
# there first: the docs' API discovery imports every backend while its test module is
# collected, so the switch is set here, before any test module is.
if os.environ.get("TORCHLIGHT_TEST_CUDA") != "gpu":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# `import torchlight.compat` makes a later `import torch` give torchlight (issue 25), and the
# docs' API discovery imports every torchlight module while its test module is collected. The
# real PyTorch (a dev dependency: the reference of the compatibility tests) is imported first,
# so `import torch` in any test is PyTorch (torchlight.compat then only warns).
try:
    import torch  # noqa: F401
except ImportError:
    # Without PyTorch, importing torchlight.compat (the docs' API discovery does) would install
    # the shim and PyTorch's float32 defaults for the whole session (issue 37): import it once
    # here and leave PyTorch's world at once, so every test starts in the course's float64.
    import torchlight.compat

    torchlight.compat.uninstall()

# `make pytest` runs one of its two pytest processes in the background (`... &`), and a shell
# without job control starts a background command with SIGINT ignored; every process a test
# starts would inherit that, and a test that stops one with Ctrl-C (a training run, `make
# course-grade`) would wait for nothing. The session takes Ctrl-C as a terminal's would.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=50,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
