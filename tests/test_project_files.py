"""The project's own files agree with each other.

pyproject.toml (pip) and environment.yml (conda) must install the same packages with the
same version bounds; the Makefile, README and CI script must offer what the README promises.
"""

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
DIST_NAME = "torchlight-edu"


def load_pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def load_environment() -> dict:
    with open(ROOT / "environment.yml", encoding="utf-8") as f:
        return yaml.safe_load(f)


def pyproject_requirements(pyproject: dict) -> dict[str, SpecifierSet]:
    """Every requirement of the core and of every extra, by canonical name.

    The self-reference ``torchlight-edu[...]`` (the ``all`` extra) is left out. A package that
    appears in several places must carry the same bounds everywhere.
    """
    project = pyproject["project"]
    lines = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        lines.extend(extra)
    found: dict[str, SpecifierSet] = {}
    for line in lines:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name == DIST_NAME:
            continue
        if name in found and found[name] != req.specifier:
            raise AssertionError(
                f"pyproject.toml lists {name} twice with different bounds: "
                f"{found[name]} and {req.specifier}; use one set of bounds everywhere."
            )
        found[name] = req.specifier
    return found


def environment_pip_lines(environment: dict) -> list[str]:
    pip_sections = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict)]
    assert len(pip_sections) == 1, "environment.yml needs exactly one `pip:` section"
    return [str(line) for line in pip_sections[0]]


def environment_requirements(environment: dict) -> dict[str, SpecifierSet]:
    """The pip section of environment.yml by canonical name (the ``-e .`` line left out)."""
    found: dict[str, SpecifierSet] = {}
    for line in environment_pip_lines(environment):
        if line.startswith("-"):
            continue
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name not in found, f"environment.yml lists {name} twice"
        found[name] = req.specifier
    return found


def drift(pip: dict[str, SpecifierSet], conda: dict[str, SpecifierSet]) -> list[str]:
    """Human-readable differences between two requirement maps (empty when they agree)."""
    problems = []
    for name in sorted(pip.keys() - conda.keys()):
        problems.append(f"{name}{pip[name]} is in pyproject.toml but not in environment.yml")
    for name in sorted(conda.keys() - pip.keys()):
        problems.append(f"{name}{conda[name]} is in environment.yml but not in pyproject.toml")
    for name in sorted(pip.keys() & conda.keys()):
        if pip[name] != conda[name]:
            problems.append(
                f"{name}: pyproject.toml says '{pip[name]}', environment.yml says '{conda[name]}'"
            )
    return problems


def test_distribution_and_import_names():
    project = load_pyproject()["project"]
    assert project["name"] == DIST_NAME, "`torchlight` on PyPI is an unrelated package"
    assert SpecifierSet(project["requires-python"]).contains("3.11")
    assert project["scripts"]["torchlight-train"] == "torchlight.train.cli:main"


def test_all_extra_covers_every_extra():
    extras = load_pyproject()["project"]["optional-dependencies"]
    (all_line,) = extras["all"]
    req = Requirement(all_line)
    assert canonicalize_name(req.name) == DIST_NAME
    assert req.extras == set(extras) - {"all"}


def test_environment_yml_installs_torchlight_on_the_same_python():
    environment = load_environment()
    assert "-e ." in environment_pip_lines(environment)
    pythons = [
        d for d in environment["dependencies"] if isinstance(d, str) and d.startswith("python")
    ]
    assert len(pythons) == 1, "environment.yml must pin python once"
    match = re.fullmatch(r"python=(\d+\.\d+)", pythons[0])
    assert match, f"expected python=X.Y, got {pythons[0]!r}"
    requires = SpecifierSet(load_pyproject()["project"]["requires-python"])
    assert requires.contains(Version(match.group(1)))


def test_pyproject_and_environment_agree_package_by_package():
    problems = drift(
        pyproject_requirements(load_pyproject()), environment_requirements(load_environment())
    )
    assert not problems, "pyproject.toml and environment.yml drifted:\n" + "\n".join(problems)


def test_drift_is_detected():
    """The comparison itself notices a missing package and a changed bound."""
    pip = pyproject_requirements(load_pyproject())
    conda = dict(pip)
    del conda["numpy"]
    conda["tqdm"] = SpecifierSet(">=0.1")
    problems = drift(pip, conda)
    assert any("numpy" in p for p in problems)
    assert any("tqdm" in p for p in problems)
    assert len(problems) == 2


def test_conflicting_bounds_inside_pyproject_are_rejected():
    pyproject = load_pyproject()
    pyproject["project"]["optional-dependencies"]["dev"].append("numpy>=1.0")
    with pytest.raises(AssertionError, match="numpy"):
        pyproject_requirements(pyproject)


@pytest.mark.parametrize(
    "target", ["venv", "lab", "test", "lint", "typecheck", "notebooks", "bench", "clean"]
)
def test_makefile_has_target(target):
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"Makefile lacks `{target}:`"


def test_readme_quick_start_is_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make lab" in readme
    assert "make test" in readme


def test_ci_script_is_executable():
    run = ROOT / ".ci" / "run"
    assert run.is_file()
    assert os.access(run, os.X_OK), ".ci/run must be executable (chmod +x)"
    assert "make test" in run.read_text(encoding="utf-8")


def test_no_text_file_holds_a_control_character():
    """Source, docs and notebook sources are plain text: a control character (a backspace
    where a docstring meant ``\\bar``, written through a non-raw string) renders as a box or
    nothing at all. Tabs, newlines and carriage returns are text; everything else under 0x20 is
    not."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.txt", "*.toml", "*.cfg", "*.yml", "*.js", "Makefile"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    control = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
    found = []
    for name in tracked:
        for n, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1):
            if control.search(line):
                found.append(f"{name}:{n}: {line.strip()[:60]!r}")
    assert len(tracked) > 200 and not found, found


def test_the_checkpoints_the_readme_commands_save_are_ignored_by_git():
    """`git status` after the README's training commands shows no checkpoint to commit."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    saved = sorted(set(re.findall(r"--save (\S+\.ckpt)", readme)))
    assert saved, "the README saves no checkpoint: update this test"
    for path in saved:
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
        assert ignored.returncode == 0, f"{path} (README: --save {path}) is not in .gitignore"


def test_make_docs_installs_only_the_docs_extra(tmp_path):
    """`make docs` in a fresh clone (no .venv yet) installs the docs extra, not every extra."""
    venv = tmp_path / "venv"
    dry = subprocess.run(
        ["make", "-n", f"VENV={venv}", "docs"], cwd=ROOT, capture_output=True, text=True
    )
    assert dry.returncode == 0, dry.stderr
    installs = [line for line in dry.stdout.splitlines() if "pip install" in line]
    assert installs and all(line.endswith("-e '.[docs]'") for line in installs), dry.stdout


LIBRARY_FOLDERS = "backends|ops|nn|autograd|optim|data|utils|train|viz|amp"
#: A path into the library as the docs write it (``backends/cuda/launch.py``,
#: ``torchlight/ops/losses.py``), or a bare module file name in the library's own source.
LIBRARY_PATH = re.compile(rf"(?<![\w./-])(?:torchlight/)?(?:{LIBRARY_FOLDERS})/[\w/]+\.py\b")
BARE_NAME = re.compile(r"(?<![\w./-])[a-z_]+\.py\b")
#: A user's own program, as the library's messages and examples call it.
USER_PROGRAMS = {"script.py", "train.py"}


def test_every_library_file_the_docs_name_exists():
    """README, the docs pages, the notebooks' sources and the library's docstrings and comments
    name library files that exist (issue 38: ``cuda_launch.py``, ``numba_lstm.py``,
    ``functions.py``, ``torchlight/autograd.py`` had moved or gone)."""
    library = ROOT / "torchlight"
    files = {p.relative_to(library).as_posix() for p in library.rglob("*.py")}
    names = {p.name for p in library.rglob("*.py")} | USER_PROGRAMS
    texts = [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "notebooks" / "src").glob("*.py"),
    ]
    sources = sorted(library.rglob("*.py"))
    wrong = []
    for path in [*texts, *sources]:
        text = path.read_text(encoding="utf-8")
        for found in LIBRARY_PATH.findall(text):
            if found.removeprefix("torchlight/") not in files:
                wrong.append(f"{path.relative_to(ROOT)}: {found}")
        if path in sources:  # a bare file name in the library speaks of a library file
            for found in BARE_NAME.findall(text):
                if found not in names:
                    wrong.append(f"{path.relative_to(ROOT)}: {found}")
    assert not wrong, "files named in the docs that do not exist:\n" + "\n".join(sorted(set(wrong)))
