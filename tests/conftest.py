"""Shared pytest configuration: hypothesis profiles.

Select a profile with the environment variable ``HYPOTHESIS_PROFILE``:

- ``ci``: derandomized (the same examples on every run), no deadline, 50 examples;
  ``make test`` uses it.
- ``dev`` (default): hypothesis' own defaults, random examples.
"""

import os

from hypothesis import HealthCheck, settings

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
