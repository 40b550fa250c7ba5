"""nbgrader configuration of the learner's lab (``make homework``): nbgrader's Validate button
loads it from this folder (``JUPYTER_CONFIG_PATH``).

Progressive hints (``torchlight_grader/nbgrader/hints.py``): after each failed Validate of a test
cell that carries hints, the next hint unlocks and shows under the cell's error. A course's
student lab (JupyterHub) gets the same with these lines in the students' nbgrader_config.py.
"""

from torchlight_grader.nbgrader.hints import on_cell_error

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file
c.Execute.on_cell_error = on_cell_error
