"""The graph viewer in the real JupyterLab, in Debian's chromium, driven by playwright.

One test, start to finish as a student would: start ``jupyter lab`` (from this environment, on
a free local port, with a token, on a temporary copy of Tutorial 2), open the notebook, run all
cells, then in the viewer of ``c = (a + a) * a``: click node ``a`` (its info panel says "not
computed yet"), press play to step through backward, and see ``a``'s gradient
``tensor([4., 8.])`` appear. Screenshots go to the test's tmp dir; the browser console must
have no errors.

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``; ``.ci/run`` installs it). Never
``playwright install``: we use the system browser.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "02_autograd.ipynb"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
# Console messages that are not errors of ours (none seen so far besides a missing favicon).
BENIGN_CONSOLE = ("favicon",)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(240)]


def wait_for_server(
    base: str,
    token: str,
    server: subprocess.Popen,
    log: Any,
    log_path: Path,
    what: str,
    seconds: float,
) -> None:
    """Poll the Jupyter server's status API until it answers; fail with its log if it exits
    or does not answer within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2).read()
            return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"{what} did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.3)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_jupyter_config(home: Path) -> dict[str, str]:
    """A private Jupyter setup: kernels on this Python, no news pop-up, all cells rendered."""
    for name in ("python3", "torchlight"):  # whatever kernel the notebook asks for
        spec = home / "data" / "kernels" / name
        spec.mkdir(parents=True)
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(
            json.dumps({"argv": argv, "display_name": name, "language": "python"})
        )
    labconfig = home / "config" / "labconfig"
    labconfig.mkdir(parents=True)
    disabled = {"@jupyterlab/apputils-extension:announcements": True}
    (labconfig / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}))
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    # Without windowing every cell stays in the page, so every viewer is really rendered.
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    return {
        "JUPYTER_PATH": str(home / "data"),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "IPYTHONDIR": str(home / "ipython"),
    }


#: Tutorials whose stored pictures must show before any cell runs (Jupyter does not trust them).
STORED_PICTURES = ("01_tensors.ipynb", "02_autograd.ipynb")
TUTORIAL_3 = "03_neural_networks.ipynb"
TUTORIAL_6 = "06_attention_and_transformers.ipynb"

TALL_GRAPH = """import torchlight as tl
x = tl.tensor([1.0], requires_grad=True)
y = x
for _ in range(8):
    y = (y * 1.5).tanh()
viz.show(y, names={"x": x, "y": y})"""

VIEWERS_NOTEBOOK = [
    "from torchlight import nn, viz",
    TALL_GRAPH,
    'trainer = viz.TrainingViewer("xor", hidden=8, steps_per_tick=5)\ntrainer',
    "viz.ModuleViewer(trainer.trainer.model)",
]


def write_viewers_notebook(path: Path) -> None:
    """A small notebook with the training viewer and the module viewer."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in VIEWERS_NOTEBOOK]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "python3",
        "language": "python",
    }
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def jupyter_lab(tmp_path_factory):
    """A running ``jupyter lab`` on a copy of Tutorial 2 and a viewers notebook.

    Yields ``(base url, token, log path)``.
    """
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)")
    assert NOTEBOOK.exists(), f"{NOTEBOOK} is missing: `make notebooks` builds it"
    home = tmp_path_factory.mktemp("jupyter")
    work = home / "lab"
    work.mkdir()
    for name in (NOTEBOOK.name, *STORED_PICTURES, TUTORIAL_3, TUTORIAL_6):
        shutil.copy(ROOT / "notebooks" / name, work / name)
    write_viewers_notebook(work / "viewers.ipynb")
    env = {**os.environ, **write_jupyter_config(home / "home")}
    port, token = free_port(), secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}",
        "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
        "--ServerApp.port_retries=0", "--LabApp.expose_app_in_browser=True",
    ]  # fmt: skip
    if os.getuid() == 0:
        command.append("--allow-root")
    log_path = home / "jupyter.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(base, token, server, log, log_path, "jupyter lab", seconds=60)
        yield base, token, log_path
    finally:
        # The server shuts its kernels down on SIGTERM; the whole process group goes if it hangs.
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def browser(jupyter_lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def lab_page(jupyter_lab, browser):
    """A fresh page; ``open(name)`` opens a notebook, runs all its cells and waits for them.

    Yields ``(page, open, errors)``; ``errors`` collects the browser console's errors.
    """
    base, token, _ = jupyter_lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on(
        "console",
        lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))

    def open_and_run(name: str, seconds: float = 90) -> None:
        page.goto(f"{base}/lab/tree/{name}?reset&token={token}")
        page.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
            "&& window.jupyterapp.shell.currentWidget.sessionContext",
            timeout=60_000,
        )
        page.evaluate(RUN_ALL_AND_WAIT)
        page.wait_for_function(ALL_CELLS_DONE, timeout=seconds * 1000, polling=500)
        for mime in ("application/vnd.jupyter.stderr", "application/vnd.jupyter.error"):
            outputs = page.locator(f".jp-OutputArea-output[data-mime-type='{mime}']")
            assert outputs.count() == 0, (
                f"{name}: a cell wrote {mime}:\n{outputs.first.inner_text()}"
            )

    yield page, open_and_run, errors
    page.close()


def assert_no_console_errors(errors: list[str]) -> None:
    real = [e for e in errors if not any(b in e for b in BENIGN_CONSOLE)]
    assert not real, "errors in the browser console:\n" + "\n".join(real)


# Each character outside ASCII in the notebook (markdown, outputs, viewers), drawn on a canvas in
# its element's font, compared with a private-use character no font has: the same picture means
# the browser had no glyph for it and drew a box (as U+23F8, the pause sign, did in the fonts
# Debian's chromium has). MathJax's own output is skipped (it draws with its own web fonts).
MISSING_GLYPHS = r"""
() => {
  const canvas = document.createElement("canvas");
  canvas.width = 64; canvas.height = 64;
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  const draw = (ch, font) => {
    ctx.clearRect(0, 0, 64, 64); ctx.font = font; ctx.fillText(ch, 8, 44);
    return ctx.getImageData(0, 0, 64, 64).data.join(",");
  };
  const boxes = new Map(), seen = new Set(), missing = [];
  const root = window.jupyterapp.shell.currentWidget.node;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (!el || el.closest("mjx-container, .MathJax, .MathJax_Display, .MathJax_Preview, script, style")) continue;
    const style = getComputedStyle(el);
    const font = `${style.fontStyle} ${style.fontWeight} 20px ${style.fontFamily}`;
    if (!boxes.has(font)) boxes.set(font, draw("\uE000", font));
    for (const ch of walker.currentNode.textContent) {
      if (ch.codePointAt(0) < 0x80 || /\s/.test(ch) || seen.has(ch + font)) continue;
      seen.add(ch + font);
      if (draw(ch, font) === boxes.get(font)) {
        const code = ch.codePointAt(0).toString(16).toUpperCase();
        missing.push(`U+${code} ${ch} in "${walker.currentNode.textContent.trim().slice(0, 80)}"`);
      }
    }
  }
  return missing;
}
"""


def assert_every_glyph_renders(page: Any) -> None:
    missing = page.evaluate(MISSING_GLYPHS)
    assert not missing, "characters the browser has no font for (drawn as boxes):\n" + "\n".join(
        missing
    )


# The boxes of a graph viewer's hint line and of every text of its picture that is in view.
HINT_AND_PICTURE_TEXT = """
(viewer) => {
  const rect = (e) => { const r = e.getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height }; };
  const box = rect(viewer.querySelector(".tl-svgbox"));
  const inside = (r) => r.w > 0 && r.x < box.x + box.w && r.x + r.w > box.x && r.y < box.y + box.h && r.y + r.h > box.y;
  const texts = [...viewer.querySelectorAll(".tl-svgbox svg text")]
    .map((t) => ({ text: t.textContent, ...rect(t) })).filter(inside);
  return { hint: rect(viewer.querySelector(".tl-hint")), texts };
}
"""


def assert_hint_clear_of_the_picture(viewer: Any) -> None:
    """The canvas's hint line ("click a node · drag to pan ...") must not cover the picture:
    at 1400 px it ran into the graph's legend."""
    boxes = viewer.evaluate(HINT_AND_PICTURE_TEXT)
    h = boxes["hint"]
    assert h["w"] > 0 and h["h"] > 0, "the hint is not shown"
    covered = [
        t["text"]
        for t in boxes["texts"]
        if t["x"] < h["x"] + h["w"]
        and h["x"] < t["x"] + t["w"]
        and t["y"] < h["y"] + h["h"]
        and h["y"] < t["y"] + t["h"]
    ]
    assert not covered, f"the hint {h} overlaps the picture's text: {covered}"


RUN_ALL_AND_WAIT = """
async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.sessionContext.ready;
  await app.commands.execute("notebook:run-all-cells");
}
"""

ALL_CELLS_DONE = """
() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content) return false;
  const cells = panel.content.widgets.filter((c) => c.model.type === "code");
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return kernel && kernel.status === "idle" && cells.every((c) => c.model.executionCount !== null
    && !c.node.querySelector(".jp-InputPrompt").textContent.includes("*"));
}
"""

# The viewer of Tutorial 2's example c = (a + a) * a that starts at step 0 (nothing computed).
FIND_VIEWER = """
() => {
  const viewers = [...document.querySelectorAll(".tl-graph-viewer")];
  const label = (g) => (g.querySelector("text") || {}).textContent;
  const index = viewers.findIndex((v) => {
    const labels = [...v.querySelectorAll("g.tl-node")].map(label);
    const step = v.querySelector(".tl-step-text");
    return labels.includes("a") && labels.includes("c") && step && step.textContent.startsWith("Step 0 of 3");
  });
  return { index, count: viewers.length };
}
"""


def test_graph_viewer_in_jupyterlab(lab_page, tmp_path):
    from playwright.sync_api import expect

    page, open_and_run, errors = lab_page
    started = time.monotonic()
    open_and_run(NOTEBOOK.name)
    ran_s = time.monotonic() - started

    # The viewers rendered as live widgets (the clickable canvas, not the static fallback).
    expect(page.locator(".tl-graph-viewer").first).to_be_visible(timeout=20_000)
    assert page.locator(".tl-graph-viewer .tl-canvas svg g.tl-node").count() > 0
    found = page.evaluate(FIND_VIEWER)
    assert found["index"] >= 0, (
        f"no step-0 viewer of c = (a + a) * a among {found['count']} viewers"
    )
    viewers = page.locator(".tl-graph-viewer")
    for i in range(viewers.count()):
        viewers.nth(i).scroll_into_view_if_needed()
        assert_hint_clear_of_the_picture(viewers.nth(i))
    assert_every_glyph_renders(page)
    viewer = page.locator(".tl-graph-viewer").nth(found["index"])
    viewer.scroll_into_view_if_needed()
    assert viewer.locator("svg g.tl-node").count() == 5  # a, Add, b, Mul, c
    info = viewer.locator(".tl-info")

    # Click node `a` on the canvas: the kernel answers with its info panel.
    viewer.locator("g.tl-node", has=page.locator("text:text-is('a')")).first.click()
    expect(info).to_contain_text("a leaf tensor", timeout=10_000)
    expect(info).to_contain_text("not computed yet")
    viewer.screenshot(path=str(tmp_path / "viewer_step0.png"))

    # Zoom buttons change the SVG's viewBox (pan/zoom happen in the browser only).
    svg = viewer.locator(".tl-canvas svg")
    before = svg.get_attribute("viewBox")
    viewer.locator(".tl-zoombar button", has_text="+").click()
    assert svg.get_attribute("viewBox") != before
    viewer.locator(".tl-zoombar button", has_text="1:1").click()
    width = float(svg.get_attribute("viewBox").split()[2])
    assert width == pytest.approx(svg.bounding_box()["width"], abs=1)  # 1:1: one unit per pixel

    # Press play: backward runs one node at a time until a's gradient is complete.
    viewer.locator(".tl-ticker-button").click()
    status = viewer.locator(".tl-step-text")
    expect(status).to_contain_text("Step 1 of 3", timeout=10_000)
    expect(status).to_contain_text("Backward is finished", timeout=15_000)
    expect(info).to_contain_text("tensor([4., 8.])", timeout=10_000)
    expect(viewer.locator("svg text", has_text="grad [4., 8.]")).to_have_count(1)
    viewer.screenshot(path=str(tmp_path / "viewer_done.png"))
    page.screenshot(path=str(tmp_path / "lab.png"))
    assert_no_console_errors(errors)
    print(
        f"\ngraph viewer: cells ran in {ran_s:.1f} s, test {time.monotonic() - started:.1f} s; {tmp_path}"
    )


def test_training_and_module_viewers_in_jupyterlab(lab_page, tmp_path):
    from playwright.sync_api import expect

    page, open_and_run, errors = lab_page
    started = time.monotonic()
    open_and_run("viewers.ipynb")
    viewer = page.locator(".tl-training-viewer")
    expect(viewer).to_be_visible(timeout=20_000)
    status = viewer.locator(".tl-training-status")
    expect(status).to_contain_text("step 0")
    viewer.locator(".tl-ticker-button").click()  # start training
    expect(status).to_contain_text(re.compile(r"step [1-9]\d{1,}"), timeout=20_000)
    viewer.locator(".tl-ticker-button").click()  # pause
    assert viewer.locator(".tl-boundary-view svg image").count() == 1
    viewer.screenshot(path=str(tmp_path / "training.png"))
    tree = page.locator(".tl-module-viewer")
    expect(tree).to_contain_text("Linear(in_features=2, out_features=8, bias=True)")
    expect(tree).to_contain_text("42 parameters")
    assert_no_console_errors(errors)
    print(f"\ntraining + module viewers: {time.monotonic() - started:.1f} s; {tmp_path}")


def test_training_viewer_shown_twice_keeps_training(lab_page, tmp_path):
    """Tutorial 3 as shipped: ``viewer``, then ``viewer.train(500); viewer``: play keeps going."""
    from playwright.sync_api import expect

    page, open_and_run, errors = lab_page
    started = time.monotonic()
    open_and_run(TUTORIAL_3)
    viewers = page.locator(".tl-training-viewer")
    expect(viewers).to_have_count(2, timeout=20_000)  # one widget, displayed twice
    first = viewers.first
    first.scroll_into_view_if_needed()
    status = first.locator(".tl-training-status")
    expect(status).to_contain_text("step 500")
    expect(status).to_contain_text("lr 0.5 ·")  # the slider kept 0.5 (not 10**-0.3 = 0.501)
    first.locator(".tl-ticker-button").click()  # train
    # Five steps per tick: past step 600 needs 20+ ticks, so the timer kept running.
    expect(status).to_contain_text(re.compile(r"step (6\d\d|[7-9]\d\d|\d{4,})"), timeout=30_000)
    expect(viewers.nth(1).locator(".tl-training-status")).to_contain_text(
        re.compile(r"step [6-9]\d\d")
    )
    first.screenshot(path=str(tmp_path / "tutorial3_training.png"))
    assert_every_glyph_renders(page)  # the markdown's pause sign, the viewers' buttons
    first.locator(".tl-ticker-button").click()  # pause
    expect(first.locator(".tl-ticker-button")).to_contain_text("train")
    page.wait_for_timeout(1000)  # ticks sent before the pause may still be on their way
    paused = first.locator(".tl-training-status").inner_text()
    time.sleep(1.5)
    assert first.locator(".tl-training-status").inner_text() == paused, "pause did not stop it"
    assert_no_console_errors(errors)
    print(f"\nTutorial 3 viewer shown twice: {time.monotonic() - started:.1f} s; {tmp_path}")


def test_tutorial_6_runs_to_the_end_in_jupyterlab(lab_page, tmp_path):
    """Tutorial 6 as a learner runs it (Run All): no error output, its graph viewer is live,
    the attention heatmaps and the gradient plot show, the GPT's loss falls, no console error."""
    from playwright.sync_api import expect

    page, open_and_run, errors = lab_page
    started = time.monotonic()
    open_and_run(TUTORIAL_6, seconds=200)
    ran_s = time.monotonic() - started
    viewer = page.locator(".tl-graph-viewer")
    expect(viewer).to_have_count(1, timeout=20_000)
    viewer.scroll_into_view_if_needed()
    assert viewer.locator(".tl-canvas svg g.tl-node").count() > 5  # the live canvas
    assert_hint_clear_of_the_picture(viewer)
    printed = "\n".join(page.locator(".jp-OutputArea").all_inner_texts())
    losses = [float(m) for m in re.findall(r"loss (\d+\.\d+) nats/char", printed)]
    assert len(losses) >= 2 and losses[-1] < losses[0] < 4.2, losses
    images = page.evaluate(IMAGES_SHOWN)
    assert len(images) >= 2 and all(i["complete"] and i["w"] > 100 for i in images), images
    assert_every_glyph_renders(page)
    page.screenshot(path=str(tmp_path / "tutorial6.png"), full_page=True)
    assert_no_console_errors(errors)
    print(
        f"\nTutorial 6 in JupyterLab: cells ran in {ran_s:.1f} s, test {time.monotonic() - started:.1f} s"
    )


IMAGES_SHOWN = """
() => [...document.querySelectorAll(".jp-OutputArea-output img")]
  .filter((img) => img.src.startsWith("data:image/svg+xml"))
  .map((img) => ({ w: img.naturalWidth, h: img.naturalHeight, complete: img.complete }))
"""


@pytest.mark.parametrize("name", STORED_PICTURES)
def test_stored_pictures_show_before_any_cell_runs(jupyter_lab, browser, tmp_path, name):
    """JupyterLab does not trust a notebook it did not run: the pictures must show anyway."""
    base, token, _ = jupyter_lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{base}/lab/tree/{name}?reset&token={token}")
        page.wait_for_selector(".jp-OutputArea-output", timeout=60_000)
        page.wait_for_timeout(1500)  # let the outputs and their images settle
        trusted = page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.cells.get(0).trusted"
        )
        assert trusted is False, "the copy should be untrusted, as on a student's machine"
        if name == "02_autograd.ipynb":  # the erratum's formula: one $$ line, no stray >=
            erratum = page.locator(".jp-MarkdownOutput", has_text="product rule needs").first
            expect_text = erratum.inner_text()
            at = expect_text.find(">=")
            assert at < 0, repr(expect_text[max(0, at - 200) : at + 50])
            assert erratum.locator(".MathJax, mjx-container").count() >= 1
            link = page.locator(".jp-MarkdownOutput a", has_text="Tutorial 3: Neural networks")
            assert link.count() == 1, "the Next section links to Tutorial 3"
            assert "03_neural_networks.ipynb" in (link.get_attribute("href") or ""), (
                link.get_attribute("href")
            )
        text = page.locator(".jp-OutputArea-output").all_inner_texts()
        shown_as_text = [t for t in text if "IPython.core.display.SVG object" in t]
        assert not shown_as_text, f"{len(shown_as_text)} SVG outputs shown as text"
        images = page.evaluate(IMAGES_SHOWN)
        assert images, "no stored picture rendered as an image"
        assert all(i["complete"] and i["w"] > 0 and i["h"] > 0 for i in images), images
        picture = page.locator(".jp-OutputArea-output img[src^='data:image/svg+xml']").first
        picture.scroll_into_view_if_needed()
        picture.screenshot(path=str(tmp_path / f"{name}.png"))
    finally:
        page.close()


def test_tall_graph_shows_its_root_on_first_show(lab_page, tmp_path):
    """A graph taller than the canvas is fitted at first, so the root (at the bottom) is in view."""
    from playwright.sync_api import expect

    page, open_and_run, errors = lab_page
    open_and_run("viewers.ipynb")
    viewer = page.locator(".tl-graph-viewer").first
    expect(viewer).to_be_visible(timeout=20_000)
    viewer.scroll_into_view_if_needed()
    page.wait_for_timeout(500)  # the canvas places the graph once it has its size
    box = viewer.locator(".tl-svgbox").bounding_box()
    root = viewer.locator("g.tl-node", has=page.locator("text:text-is('y')")).first.bounding_box()
    leaf = viewer.locator("g.tl-node", has=page.locator("text:text-is('x')")).first.bounding_box()
    assert box and root and leaf
    for name, node in (("root y", root), ("leaf x", leaf)):
        assert (
            box["y"] - 1 <= node["y"] and node["y"] + node["height"] <= box["y"] + box["height"] + 1
        ), f"{name} is outside the canvas: node {node}, canvas {box}"
    viewer.screenshot(path=str(tmp_path / "tall_graph.png"))
    assert_no_console_errors(errors)
