"""The Sphinx site, checked like code: it builds with warnings as errors and every
cross-reference resolved (``-W -n``), every public name is documented, and the built Tutorial 2
page works in a real browser (Debian's chromium via playwright): the math is rendered by the
site's own MathJax, the graph pictures are visible, nothing is fetched from another host, and
the search finds ``backward``.

The build takes 15-45 s on 2 cores (the stored notebooks are rendered, never executed).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import torchlight_api  # noqa: E402 - docs/_ext, the generator of the API pages

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """``sphinx -W -n`` into a fresh folder (as ``make docs`` does); returns the HTML folder."""
    out = tmp_path_factory.mktemp("site")
    command = [
        sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
        "-d", str(out / "doctrees"), str(DOCS), str(out / "html"),
    ]  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, text=True, capture_output=True, timeout=360)
    assert result.returncode == 0, (
        f"the docs build failed (warnings are errors):\n{result.stdout[-4000:]}\n{result.stderr[-6000:]}"
    )
    print(f"\ndocs built in {time.monotonic() - started:.1f} s")
    return out / "html"


def test_a_second_build_reads_and_writes_no_page_again(site):
    """``make docs`` is incremental: with nothing changed, Sphinx reads no source again and
    writes no page (a generated API page whose text changed on every build, a set's order or a
    memory address in a repr, made it re-read four pages and rewrite them every time)."""
    out = site.parent
    command = [
        sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-b", "html",
        "-d", str(out / "doctrees"), str(DOCS), str(site),
    ]  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, text=True, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "0 added, 0 changed, 0 removed" in result.stdout, result.stdout[-3000:]
    assert "targets for 0 source files that are out of date" in result.stdout, result.stdout[-3000:]
    print(f"\nsecond docs build: {time.monotonic() - started:.1f} s")


def documented_objects(site: Path) -> set[str]:
    from sphinx.util.inventory import InventoryFile

    with open(site / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    return {
        name for kind, entries in inventory.items() if kind.startswith("py:") for name in entries
    }


def test_site_builds_and_has_every_page(site):
    for page in (
        "index", "install", "tutorials/index", "tutorials/01_tensors", "tutorials/02_autograd",
        "tutorials/03_neural_networks", "tutorials/04_backends_and_gpu", "tutorials/05_convolutions",
        "tutorials/06_attention_and_transformers", "tutorials/07_recurrent_networks",
        "tutorials/09_inference_and_efficiency",
        "autograd", "api/index", "backends", "course", "pytorch", "changelog", "search",
    ):  # fmt: skip
        assert (site / f"{page}.html").exists(), f"{page}.html was not built"
    course = (site / "course.html").read_text()
    assert "Grading you can trust" in course and "Threat model" in course  # assignments/README.md
    assert (site / "_static" / "mathjax" / "MathJax.js").exists()  # served from the site
    tutorial = (site / "tutorials" / "02_autograd.html").read_text()
    assert 'href="../autograd.html"' in tutorial  # "See Autograd API for full signatures"
    assert "cdn" not in tutorial.lower().split("<body")[0]  # no CDN script in the head
    for heading in (
        "How gradients work", "The computation graph", "Leaf vs. intermediate tensors",
        "Detach, zero_grad, cloning", "Checking gradients manually", "Autograd internals",
    ):  # the published page's headings  # fmt: skip
        assert heading in tutorial, heading
    assert tutorial.count("Erratum") >= 3
    # The notes above stored viewer pictures say where the viewer runs, not "Run the cell".
    assert "open this tutorial in JupyterLab (make lab)" in tutorial
    for page in (site / "tutorials").glob("*.html"):
        assert "run the cell" not in page.read_text().lower(), page.name


def test_every_public_name_is_documented(site):
    """Each name in each public module's ``__all__`` has an entry (and a docstring)."""
    documented = documented_objects(site)
    missing, no_docstring = [], []
    for module_name in torchlight_api.PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        assert module_name in documented, f"module {module_name} has no page"
        for name in torchlight_api.public_names(module_name):
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue
            if f"{module_name}.{name}" not in documented:
                missing.append(f"{module_name}.{name}")
            explicit = hasattr(module, "__all__")  # its API, not just the names it defines
            # A function form (tl.exp) without a docstring is documented as its Tensor method.
            described = inspect.getdoc(obj) or torchlight_api.function_form_doc(obj)
            if explicit and (inspect.isclass(obj) or inspect.isfunction(obj)) and not described:
                no_docstring.append(f"{module_name}.{name}")
    assert not missing, f"public names without an entry in the docs: {missing}"
    assert not no_docstring, f"public names without a docstring: {no_docstring}"
    # Every module under torchlight/ that defines __all__ is reachable from a documented one.
    assert {
        "torchlight.autograd.Function",
        "torchlight.Tensor",
        "torchlight.nn.Linear",
    } <= documented


def test_pages_show_no_markup_and_the_sidebar_lists_the_modules_you_import(site):
    """Issue 38, as a reader sees the built pages: no literal double backticks in prose (a
    ``literal`` the generator quoted again, ``y.add_``(1)), no formula that swallowed the text
    after it (a math span with a backtick in it), and the sidebar's API reference lists the
    modules one imports and one "Internals" page, not all 118 modules."""
    from bs4 import BeautifulSoup

    shown = []
    for page in sorted(site.rglob("*.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for code_block in soup.select("pre"):
            code_block.decompose()
        main = soup.select_one("article") or soup
        text = main.get_text()
        if "``" in text:
            at = text.index("``")
            shown.append(f"{page.relative_to(site)}: ...{text[max(0, at - 50) : at + 50]}...")
        for span in main.select("span.math"):
            if "`" in span.get_text():
                shown.append(f"{page.relative_to(site)}: math {span.get_text()!r}")
    assert not shown, "markup shown as text:\n" + "\n".join(shown)
    index = BeautifulSoup((site / "api" / "index.html").read_text(), "html.parser")
    api = next(
        li
        for li in index.select(".sidebar-tree li.toctree-l1")
        if li.find("a").get_text() == "API reference"
    )
    listed = [li.find("a").get_text() for li in api.select("li.toctree-l2")]
    assert len(listed) == len(torchlight_api.FACES) + 1 < 25, listed
    assert listed[-1] == "Internals: every module" and "torchlight.nn.functional" in listed
    internals = (site / "api" / f"{torchlight_api.INTERNALS_PAGE}.html").read_text()
    assert 'href="torchlight.ops.losses.html"' in internals  # one level down, not gone


def test_public_modules_are_discovered_from_the_package():
    """Pages come from the package itself: a new module gets one without editing the docs."""
    import torchlight

    modules = set(torchlight_api.PUBLIC_MODULES)
    lazy = set(torchlight._SUBMODULES.values()) - {"torchlight.grading"}
    assert lazy <= modules, lazy - modules
    assert torchlight_api.PUBLIC_MODULES[0] == "torchlight.autograd"  # the Autograd API page
    assert not any(m.startswith("torchlight.grading") for m in modules)  # the grader's, not API


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _served(site: Path) -> Iterator[str]:
    """The built site served on a free local port (``http.server``), as its base URL."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
         str(site)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(base, timeout=2).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "http.server did not start"
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.browser
def test_tutorial_2_page_in_a_real_browser(site, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)")
    from playwright.sync_api import expect, sync_playwright

    with _served(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        elsewhere: list[str] = []

        def only_local(route):  # the site must need nothing from another host
            if route.request.url.startswith(base):
                route.continue_()
            else:
                elsewhere.append(route.request.url)
                route.abort()

        page.route("**/*", only_local)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))

        def console(message):  # MathJax's font probe at about:blank was one (issue 26.9)
            where = (message.location or {}).get("url", "")
            if message.type == "error" and not where.endswith("favicon.ico"):
                errors.append(f"console: {message.text} ({where})")

        page.on("console", console)
        page.goto(f"{base}/tutorials/02_autograd.html")
        # MathJax 2 (the local copy) replaces each formula with its own rendering.
        rendered = "document.querySelectorAll('.MathJax, .MathJax_Display').length"
        page.wait_for_function(f"() => window.MathJax && {rendered} > 3", timeout=60_000)
        erratum = page.locator("blockquote", has_text="product rule needs").first
        assert erratum.locator(".MathJax, .MathJax_Display").count() >= 2
        assert ">=" not in erratum.inner_text()  # the formula that had a stray >=
        assert "\\frac" not in erratum.inner_text()  # rendered, not shown as TeX
        pictures = page.locator("img[src^='data:image/svg+xml']")
        assert pictures.count() >= 5
        picture = pictures.first
        picture.scroll_into_view_if_needed()
        expect(picture).to_be_visible()
        size = picture.evaluate("(img) => [img.naturalWidth, img.naturalHeight]")
        assert size[0] > 100 and size[1] > 100, size
        picture.screenshot(path=str(tmp_path / "graph_picture.png"))
        erratum.scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "tutorial2.png"))

        page.goto(f"{base}/search.html?q=backward")
        results = page.locator("#search-results ul.search li a")
        expect(results.first).to_be_visible(timeout=30_000)
        found = results.all_inner_texts()
        assert any("Autograd" in text for text in found), found
        page.screenshot(path=str(tmp_path / "search.png"))
        browser.close()
    assert not elsewhere, f"the site asked other hosts for: {elsewhere}"
    assert not errors, f"page and console errors: {errors}"
    print(f"\nscreenshots in {tmp_path}")


def pasted_examples(page: Path) -> list[tuple[str, bool]]:
    """Each ``>>>`` example on a built page, as a reader would paste it: the prompts stripped,
    the outputs left out, lines marked ``doctest: +SKIP`` dropped; with whether the page shows
    it raising (a ``Traceback`` in its output)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    examples = []
    for pre in soup.select("div.highlight pre"):
        lines = pre.get_text().splitlines()
        if not any(line.startswith(">>> ") or line == ">>>" for line in lines):
            continue
        code = [
            line[4:]
            for line in lines
            if line.startswith((">>> ", "... ")) and "doctest: +SKIP" not in line
        ]
        raises = any(line.startswith("Traceback (most recent call last)") for line in lines)
        if code:
            examples.append(("\n".join(code), raises))
    return examples


def test_every_doctest_on_every_built_page_runs_as_pasted(site):
    """Item 4 of issue 26: a reader pastes a page's ``>>>`` examples, in order, into an empty
    interpreter. Each page's examples, taken from the built HTML, run in one fresh interpreter,
    each example with an empty namespace: a name the example uses must be imported by the
    example itself (about 50 used names their module defines without importing them, which
    doctest's module namespace had hidden; issue 38: three used a name an earlier example on
    the page imported). Once they also came out of the site wrapped in double backticks."""
    scripts = {}
    for page in sorted(site.rglob("*.html")):
        examples = pasted_examples(page)
        if examples:
            scripts[page.relative_to(site)] = examples
    assert len(scripts) > 5, f"expected doctests on many API pages, found {sorted(scripts)}"
    failures = []
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NUMBA_ENABLE_CUDASIM": "1"}
    # One interpreter per page: a driver forks a fresh child per page (see PASTE_RUNNER).
    result = subprocess.run(
        [sys.executable, "-c", PASTE_RUNNER],
        input=json.dumps([[str(name), examples] for name, examples in scripts.items()]),
        text=True, capture_output=True, cwd=ROOT, timeout=600, env=env,
    )  # fmt: skip
    if result.returncode:
        failures.append(f"runner failed:\n{result.stderr[-3000:]}")
    failures += json.loads(result.stdout or "[]")
    assert not failures, "doc examples that fail when pasted:\n" + "\n".join(failures)


#: Runs each page's examples in a forked child, each example with an empty namespace
#: (``__name__`` only), as an interpreter a reader just opened. The parent imports ``torchlight`` (every example's
#: first line, ``import torchlight as tl``, runs the same code) so that a page does not pay
#: Python's start-up and that import again; a name is still only there if the example
#: imports it, and a submodule only if it, or ``import torchlight``, imports it.
PASTE_RUNNER = r"""
import json, os, sys, traceback
import torchlight
pages = json.load(sys.stdin)
failures = []
for name, examples in pages:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        out = []
        for i, (code, raises) in enumerate(examples):
            namespace = {"__name__": "__main__"}  # each example on its own, as a reader may
            try:
                exec(compile(code, f"example {i + 1}", "exec"), namespace)
            except BaseException:
                if not raises:
                    out.append(f"--- example {i + 1}:\n{code}\n" + traceback.format_exc(limit=2))
            else:
                if raises:
                    out.append(f"--- example {i + 1} shows an error but ran without one:\n{code}")
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    found = json.loads(data) if data else ["the interpreter died before it reported"]
    if found:
        failures.append(f"{name}:\n" + "\n".join(found))
print(json.dumps(failures))
"""


@pytest.mark.browser
def test_tutorial_8_and_9_viewers_change_what_is_shown_on_a_click(site, tmp_path):
    """Tutorials 8 and 9's viewers (torchlight/viz/frames.py: the attention pattern of each
    head, the KV cache step by step, a row's weights before and after quantization) are plain
    HTML, so they work on the built docs page: one picture shown at first; a real click on
    another label shows that picture (a different one) and hides the first."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)")
    from playwright.sync_api import expect, sync_playwright

    with _served(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        for name, viewers in (("08_language_models", 1), ("09_inference_and_efficiency", 2)):
            page.goto(f"{base}/tutorials/{name}.html")
            found = page.locator(".tl-frames")
            assert found.count() == viewers, (name, found.count())
            for k in range(viewers):
                frames = found.nth(k).locator("details.tl-frame")
                n = frames.count()
                assert n >= 4, (name, k, n)

                def shown(frames=frames, n=n) -> list[int]:
                    return [i for i in range(n) if frames.nth(i).evaluate("d => d.open")]

                assert shown() == [0], (name, k)
                first = frames.nth(0).locator("img").first
                first.scroll_into_view_if_needed()
                expect(first).to_be_visible()
                before = first.get_attribute("src")
                frames.nth(n - 1).locator("summary").click()
                assert shown() == [n - 1], (name, k, shown())
                last = frames.nth(n - 1).locator("img").first
                expect(last).to_be_visible()
                expect(first).to_be_hidden()
                assert last.get_attribute("src") != before, "the same picture again"
                found.nth(k).screenshot(path=str(tmp_path / f"{name}-{k}.png"))
        browser.close()
    assert not errors, f"page errors: {errors}"
    print(f"\nscreenshots in {tmp_path}")
