"""What the sandbox runs: the only part of the grader it can see (bind-mounted read-only).

Nothing here knows a reference value or a hidden check: ``child.py`` and ``run_notebook.py``
are the sandbox's programs, ``runners.py`` calls a student's answer generically, ``wire.py``
encodes values as JSON. Every file imports only the standard library, numpy, IPython/nbclient
and the student-facing ``torchlight``.
"""
