"""The graph viewer without a browser: tracing, replayed gradients, layout, SVG, widget logic.

Front-end events are simulated the way the browser sends them: a click on a node arrives as a
comm ``update`` message that sets the canvas's ``selected`` trait; the play button and the
slider change ``value``.
"""

from __future__ import annotations

import base64
import html
import random
import re
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import torchlight as tl
from torchlight import viz
from torchlight.viz.graph import CONSTANT, FUNCTION, INTERMEDIATE, LEAF, ROOT, summarize, trace
from torchlight.viz.layout import count_crossings, layered_layout
from torchlight.viz.replay import replay_backward
from torchlight.viz.view import to_svg
from torchlight.viz.widgets import GraphViewer

SVG_NS = "{http://www.w3.org/2000/svg}"


def tutorial_graph():
    """Tutorial 2's example: b = a + a, c = b * a."""
    a = tl.tensor([1.0, 2.0], requires_grad=True)
    b = a + a
    c = b * a
    return a, b, c


def mlp_loss(seed: int = 0):
    tl.manual_seed(seed)
    x = tl.randn(5, 3)
    w1 = tl.randn(3, 4, requires_grad=True)
    b1 = tl.zeros(4, requires_grad=True)
    w2 = tl.randn(4, 1, requires_grad=True)
    target = tl.randn(5, 1)
    loss = (((x @ w1 + b1).relu() @ w2 - target) ** 2).mean()
    return (w1, b1, w2), loss


def click(canvas, node_id: str) -> None:
    """What the browser sends when a node is clicked: a comm update of `selected`."""
    message = {
        "content": {
            "data": {"method": "update", "state": {"selected": node_id}, "buffer_paths": []}
        },
        "buffers": [],
    }
    canvas._handle_msg(message)


# ----------------------------------------------------------------------------- trace
def test_trace_kinds_labels_and_edges():
    a, b, c = tutorial_graph()
    graph = trace(c, names={"a": a, "b": b, "c": c, "unrelated": 3})
    assert [(n.label, n.kind) for n in graph.nodes] == [
        ("a", LEAF), ("Add", FUNCTION), ("b", INTERMEDIATE), ("Mul", FUNCTION), ("c", ROOT),
    ]  # fmt: skip
    ids = {n.label: n.id for n in graph.nodes}
    # a + a: two edges into Add, slots 0 and 1; Mul(b, a): b is input 0, a input 1.
    assert [(e.src, e.slot) for e in graph.inputs_of(ids["Add"])] == [(ids["a"], 0), (ids["a"], 1)]
    assert [(e.src, e.slot) for e in graph.inputs_of(ids["Mul"])] == [(ids["b"], 0), (ids["a"], 1)]
    assert graph.node(ids["b"]).value == "[2., 4.]"
    assert graph.root == ids["c"]


def test_trace_shows_constants_and_tensor_name_wins():
    x = tl.tensor([2.0, 3.0], requires_grad=True)
    x.name = "x from name"
    y = (x**2).sum()
    graph = trace(y, names={"x": x})
    kinds = [n.kind for n in graph.nodes]
    assert CONSTANT in kinds and graph.node(graph.id_of(x)).label == "x from name"
    assert CONSTANT not in [n.kind for n in trace(y, show_constants=False).nodes]


def test_trace_errors_teach():
    with pytest.raises(TypeError, match="torchlight Tensor"):
        trace([1.0, 2.0])
    _, loss = mlp_loss()
    with pytest.raises(ValueError, match="max_nodes"):
        trace(loss, max_nodes=5)


def test_summarize():
    assert summarize(np.array(2.5)) == "2.5"
    assert summarize(np.array([4.0, 8.0])) == "[4., 8.]"
    assert summarize(np.zeros((2, 2))) == "[[0., 0.], [0., 0.]]"
    assert summarize(np.arange(10.0)).startswith("mean 4.5")


# ----------------------------------------------------------------------------- replayed gradients
@pytest.mark.parametrize("make", [tutorial_graph, mlp_loss])
def test_replayed_gradients_match_real_backward_and_leave_grad_alone(make):
    *_, root = make()
    graph = trace(root)
    replay = replay_backward(graph)
    assert not replay.error
    leaves = [n for n in graph.nodes if n.kind == LEAF]
    assert all(n.tensor._grad is None for n in leaves), "the replay must not touch .grad"
    intermediates = [n.tensor for n in graph.nodes if n.kind in (INTERMEDIATE, ROOT)]
    for t in intermediates:
        t.retain_grad()
    root.backward()
    final = replay.grads_at(len(replay))
    for n in graph.nodes:
        if n.kind in (LEAF, INTERMEDIATE, ROOT):
            np.testing.assert_allclose(final[n.id].numpy(), n.tensor._grad.numpy(), rtol=1e-12)


def test_replay_order_is_reverse_topological():
    a, b, c = tutorial_graph()
    graph = trace(c, names=locals())
    replay = replay_backward(graph)
    labels = [graph.node(s.node).label for s in replay.steps]
    assert labels == ["c", "b", "a"]
    assert [graph.node(s.fn).label if s.fn else "" for s in replay.steps] == ["Mul", "Add", ""]
    # Mul sends grad_output * a to b and grad_output * b to a.
    sends = {(graph.node(i).label, slot): g.tolist() for i, slot, g in replay.steps[0].sends}
    assert sends == {("b", 0): [1.0, 2.0], ("a", 1): [2.0, 4.0]}


def test_replay_after_backward_explains_freed_graph():
    a, b, c = tutorial_graph()
    c.backward()
    view = viz.GraphView(c, names=locals())
    assert "freed" in view.replay.error and "retain_graph=True" in view.replay.error
    # The leaves' real .grad is still shown.
    np.testing.assert_allclose(view.grad_of(view.graph.id_of(a), 1).numpy(), [4.0, 8.0])
    assert "freed" in view.step_text(0)


def test_replay_with_retain_graph_works_after_backward():
    a, b, c = tutorial_graph()
    c.backward(retain_graph=True)
    before = a.grad.tolist()
    view = viz.GraphView(c)
    assert not view.replay.error and view.n_steps == 3
    assert a.grad.tolist() == before


# ----------------------------------------------------------------------------- layout
def random_dag(n: int, seed: int = 0, fan_in: int = 3):
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(n)]
    edges = [
        (nodes[rng.randrange(i)], nodes[i])
        for i in range(1, n)
        for _ in range(rng.randint(1, fan_in))
    ]
    sizes = {v: (rng.uniform(40, 180), rng.choice([26.0, 84.0])) for v in nodes}
    return nodes, edges, sizes


@pytest.mark.parametrize("seed", range(5))
def test_layout_every_edge_points_down_and_nothing_overlaps(seed):
    nodes, edges, sizes = random_dag(120, seed)
    result = layered_layout(nodes, edges, sizes)
    assert set(result.positions) == set(nodes)
    for u, v in edges:
        assert result.layers[u] < result.layers[v]
        route = result.routes[(u, v)]
        ys = [p[1] for p in route]
        assert ys == sorted(ys), f"edge {u}->{v} goes up somewhere: {route}"
        assert route[0][1] == pytest.approx(result.positions[u][1] + sizes[u][1] / 2)
        assert route[-1][1] == pytest.approx(result.positions[v][1] - sizes[v][1] / 2)
    by_layer: dict[int, list[str]] = {}
    for v in nodes:
        by_layer.setdefault(result.layers[v], []).append(v)
    for row in by_layer.values():
        row.sort(key=lambda v: result.positions[v][0])
        for left, right in zip(row, row[1:], strict=False):
            gap = result.positions[right][0] - result.positions[left][0]
            assert gap >= (sizes[left][0] + sizes[right][0]) / 2 - 1e-6
    for v in nodes:
        x, y = result.positions[v]
        assert x - sizes[v][0] / 2 >= 0 and x + sizes[v][0] / 2 <= result.width
        assert y - sizes[v][1] / 2 >= 0 and y + sizes[v][1] / 2 <= result.height


def test_layout_rejects_cycles_and_unknown_nodes():
    with pytest.raises(ValueError, match="cycle"):
        layered_layout(["a", "b"], [("a", "b"), ("b", "a")], {})
    with pytest.raises(ValueError, match="not in `nodes`"):
        layered_layout(["a"], [("a", "z")], {})


def test_crossing_reduction_untangles_a_crossed_pair():
    # Starting order a, b over y, x with edges a->x, b->y crosses once; the sweeps fix it.
    assert count_crossings(["a", "b"], ["y", "x"], [("a", "x"), ("b", "y")]) == 1
    result = layered_layout(["a", "b", "y", "x"], [("a", "x"), ("b", "y")], {})
    order_top = sorted("ab", key=lambda v: result.positions[v][0])
    order_bottom = sorted("xy", key=lambda v: result.positions[v][0])
    assert count_crossings(order_top, order_bottom, [("a", "x"), ("b", "y")]) == 0


def test_leaf_sits_next_to_its_late_consumer():
    # A target used only by the last op sits one layer above it, not at the top.
    nodes = ["x", "f1", "h", "f2", "h2", "t", "f3", "loss"]
    edges = [
        ("x", "f1"),
        ("f1", "h"),
        ("h", "f2"),
        ("f2", "h2"),
        ("h2", "f3"),
        ("t", "f3"),
        ("f3", "loss"),
    ]
    result = layered_layout(nodes, edges, {})
    assert result.layers["t"] == result.layers["f3"] - 1


def test_chain_with_side_inputs_does_not_drift():
    xs = [tl.randn(3, requires_grad=True) for _ in range(60)]
    total = xs[0]
    for x in xs[1:]:
        total = total + x * x
    view = viz.GraphView(total.sum())
    assert view.layout.width < 1200, "the main chain should run straight down"


def test_thousand_node_graph_traces_lays_out_and_draws_in_under_a_second():
    tl.manual_seed(0)
    h = tl.randn(8, 4, requires_grad=True)
    for _ in range(100):
        h = (h @ tl.randn(4, 4, requires_grad=True)).tanh() + h * 0.5
    loss = h.sum()
    start = time.perf_counter()
    view = viz.GraphView(loss)
    svg = view.svg(view.n_steps // 2, selected=view.graph.nodes[0].id)
    elapsed = time.perf_counter() - start
    assert len(view.graph.nodes) >= 1000
    ET.fromstring(svg)
    assert elapsed < 1.0, f"{len(view.graph.nodes)} nodes took {elapsed:.2f} s"


# ----------------------------------------------------------------------------- SVG
def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # raises on malformed XML
    assert root.tag == SVG_NS + "svg"
    return root


def node_texts(root: ET.Element, node_id: str) -> list[str]:
    group = next(g for g in root.iter(SVG_NS + "g") if g.get("data-node") == node_id)
    return [t.text or "" for t in group.iter(SVG_NS + "text")]


def test_svg_is_well_formed_and_escapes_names():
    x = tl.tensor([1.0], requires_grad=True)
    x.name = "<x & y>"
    root = parse(viz.to_svg((x * 2).sum()))
    assert any("<x & y>" in (t.text or "") for t in root.iter(SVG_NS + "text"))


def test_not_computed_yet_looks_different_from_a_zero_gradient():
    w = tl.tensor([1.0, -1.0], requires_grad=True)
    loss = (w * 0.0).sum()  # every gradient is exactly zero
    view = viz.GraphView(loss, names={"w": w})
    w_id = view.graph.id_of(w)
    before, after = parse(view.svg(0)), parse(view.svg(view.n_steps))
    assert "grad ?  not computed yet" in node_texts(before, w_id)
    assert "grad [0., 0.]" in node_texts(after, w_id)
    pending = [
        r
        for r in before.iter(SVG_NS + "rect")
        if r.get("stroke-dasharray") == "3 3" and r.get("fill") == "none"
    ]
    computed = [r for r in after.iter(SVG_NS + "rect") if r.get("fill") == "#fce8e6"]
    assert pending and computed


def test_svg_grads_match_real_backward():
    (w1, b1, w2), loss = mlp_loss()
    names = {"w1": w1, "b1": b1, "w2": w2}
    root = parse(viz.to_svg(loss, names=names))
    view = viz.GraphView(loss, names=names)
    loss.backward()
    for name, tensor in names.items():
        shown = [t for t in node_texts(root, view.graph.id_of(tensor)) if t.startswith("grad ")]
        assert shown == ["grad " + summarize(tensor.grad.numpy())], name


def test_highlighted_path_runs_from_the_leaf_to_the_root():
    a, b, c = tutorial_graph()
    view = viz.GraphView(c, names=locals())
    b_id = view.graph.id_of(b)
    nodes, edges = view.graph.path_to_root(b_id)
    assert [view.labels[n] for n in sorted(nodes)] == sorted(["b", "Mul", "c"])
    root = parse(view.svg(0, selected=b_id))
    thick = {p.get("data-edge") for p in root.iter(SVG_NS + "path") if p.get("stroke") == "#d01884"}
    assert thick == {f"{u}-{v}" for u, v in edges}


def test_draw_picture_shows_in_jupyter_and_saves(tmp_path):
    _, _, c = tutorial_graph()
    picture = viz.draw(c, message="static because of a test")
    assert picture._repr_svg_().startswith("<svg")
    assert "static because of a test" in picture._repr_html_()
    path = picture.save(tmp_path / "graph.svg")
    parse(path.read_text())


def test_show_outside_jupyter_returns_a_picture_with_a_message():
    _, _, c = tutorial_graph()
    shown = viz.show(c)
    assert isinstance(shown, viz.GraphPicture)
    assert "Not in a Jupyter kernel" in repr(shown)
    assert stored_svgs(shown._repr_html_()) == [shown.svg]


def stored_svgs(html_text: str) -> list[str]:
    """The SVGs of the ``<img src="data:image/svg+xml;base64,...">`` tags in ``html_text``."""
    found = re.findall(
        r'<img alt="[^"]*" src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"/>', html_text
    )
    return [base64.b64decode(b).decode("utf-8") for b in found]


def test_stored_pictures_are_img_tags_an_untrusted_notebook_shows():
    # JupyterLab strips inline <svg> from a distrusted notebook's HTML, and does not render its
    # image/svg+xml at all; an <img> of the SVG survives. No inline <svg> may remain.
    _, _, c = tutorial_graph()
    for html_text in (
        viz.draw(c)._repr_html_(),
        GraphViewer(c)._repr_mimebundle_()["text/html"],
        viz.Picture("<svg xmlns='http://www.w3.org/2000/svg'/>")._repr_html_(),
    ):
        assert "<svg" not in html_text
        for svg in stored_svgs(html_text):
            parse(svg)
        assert stored_svgs(html_text)


def test_legend_explains_the_amber_ring_and_the_magenta_path():
    _, _, c = tutorial_graph()
    root = parse(viz.to_svg(c))
    texts = " ".join(t.text or "" for t in root.iter(SVG_NS + "text"))
    assert "amber ring: the node backward is at" in texts
    assert "magenta: the selected node and its path to the root" in texts
    strokes = {r.get("stroke") for r in root.iter(SVG_NS + "rect") if r.get("fill") == "none"}
    assert {"#f9ab00", "#d01884"} <= strokes  # the key uses the colours the rings use


# ----------------------------------------------------------------------------- widget logic
def test_viewer_click_selects_node_and_shows_its_gradient():
    a, b, c = tutorial_graph()
    viewer = GraphViewer(c, names=locals())
    a_id = viewer.view.graph.id_of(a)
    click(viewer.canvas, a_id)
    assert viewer.selected == a_id and viewer.picker.value == a_id
    assert "not computed yet" in viewer.info.value
    assert 'data-node="' + a_id in viewer.canvas.svg
    viewer.slider.value = viewer.view.n_steps  # the slider (or the play button) steps backward
    assert "tensor([4., 8.])" in viewer.info.value
    assert "Backward is finished" in viewer.status.value


def test_viewer_play_steps_through_backward_one_node_at_a_time():
    a, b, c = tutorial_graph()
    viewer = GraphViewer(c, names=locals())
    seen = []
    viewer.observe(lambda change: seen.append(change["new"]), names="step")
    shown = []
    for step in range(viewer.view.n_steps + 1):
        viewer.play.value = step  # what the Play widget does on each tick
        shown.append(
            {name: viewer.grad_shown(t) is not None for name, t in (("c", c), ("b", b), ("a", a))}
        )
    assert seen == [1, 2, 3]
    assert shown == [
        {"c": False, "b": False, "a": False},
        {"c": True, "b": False, "a": False},
        {"c": True, "b": True, "a": False},
        {"c": True, "b": True, "a": True},
    ]
    assert a._grad is None and b._grad is None, "the viewer must not touch the tensors' .grad"


def test_viewer_function_node_shows_its_chain_rule_step():
    a, b, c = tutorial_graph()
    viewer = GraphViewer(c, names=locals(), step=None)
    mul = next(n.id for n in viewer.view.graph.nodes if n.label == "Mul")
    click(viewer.canvas, mul)
    assert "c = Mul(b, a)" in viewer.info.value
    assert r"Local rule (from its docstring): $f(a, b) = a b$, $\partial f/\partial a = b$" in (
        viewer.info.value
    )
    assert "tensor([2., 4.])" in viewer.info.value  # what Mul adds to dL/da


def test_every_redraw_goes_through_one_frame():
    """The widget, its static copy and to_svg draw what GraphView.frame(step, selected) says:
    one call per redraw, no second path through view, graph and svg."""
    a, b, c = tutorial_graph()
    names = {"a": a, "b": b, "c": c}
    viewer = GraphViewer(c, names=names)
    real, calls = viewer.view.frame, []
    viewer.view.frame = lambda step, selected=None: (
        calls.append((step, selected)) or real(step, selected)
    )
    a_id = viewer.view.graph.id_of(a)
    viewer.slider.value = 2
    viewer.select(a)
    assert calls == [(2, None), (2, a_id)]
    frame = real(2, a_id)
    shown = (viewer.canvas.svg, viewer.status.value, viewer.info.value)
    assert shown == (frame.svg, html.escape(frame.status), frame.info)
    assert to_svg(c, names=names, step=2, selected=a_id) == frame.svg
    assert real(99).status == real(viewer.view.n_steps).status  # the step is clamped


def test_viewer_dropdown_and_select_drive_the_same_state():
    a, b, c = tutorial_graph()
    viewer = GraphViewer(c, names=locals())
    viewer.picker.value = viewer.view.graph.id_of(b)
    assert viewer.canvas.selected == viewer.view.graph.id_of(b)
    viewer.select(a)
    assert viewer.picker.value == viewer.view.graph.id_of(a)
    viewer.picker.value = ""
    assert "Click a node" in viewer.info.value


def test_viewer_rejects_unknown_node_ids():
    _, _, c = tutorial_graph()
    viewer = GraphViewer(c)
    with pytest.raises(Exception, match="no node 'zz'"):
        viewer.selected = "zz"


def test_viewer_mimebundle_has_static_fallback_and_stable_text():
    _, _, c = tutorial_graph()
    viewer = GraphViewer(c, step=None)
    bundle = viewer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "needs a running Jupyter kernel" in bundle["text/html"]
    (svg,) = stored_svgs(bundle["text/html"])
    parse(svg)
    assert bundle["text/plain"] == repr(GraphViewer(c, step=None))


def test_viewer_on_a_freed_graph_says_why_and_disables_stepping():
    a, b, c = tutorial_graph()
    c.backward()
    viewer = GraphViewer(c)
    assert viewer.slider.disabled and viewer.play.disabled
    assert "retain_graph=True" in viewer.status.value


def test_html_canvas_fallback_shows_the_svg():
    # Without anywidget the viewer draws into a plain HTML widget (nodes are picked in the list).
    from torchlight.viz.canvas import HTMLCanvas

    canvas = HTMLCanvas(300)
    canvas.svg = viz.to_svg(tutorial_graph()[2])
    assert canvas.value.startswith("<div class='tl-canvas'") and "max-height:300px" in canvas.value
    parse(canvas.svg)


def test_replay_names_the_function_whose_backward_raised():
    class Broken(tl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad_output):
            raise ValueError("planted")

    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = (Broken.apply(x) * 2).sum()
    replay = viz.GraphView(y).replay
    assert replay.error == "Broken.backward raised ValueError: planted"
    assert len(replay.steps) == 2  # the sum and the product ran


def test_every_built_in_and_nn_function_states_its_local_rule():
    from test_engine_size import all_functions  # (the library's own: not a doctest's Cube)

    import torchlight.ops.convolution  # noqa: F401 - registers the nn Functions
    from torchlight.viz.view import local_rule

    ours = all_functions()
    assert len(ours) >= 40
    for fn in ours:
        rule = local_rule(fn)
        assert rule and "Example" not in rule, fn.__name__
        says_how = ("grad", "partial", "'", "backward", "derivative")
        assert any(word in rule.lower() for word in says_how), (fn.__name__, rule)


def test_a_small_graph_picture_and_its_legend_fit_a_docs_column():
    """The docs site's column is about 740 px wide and shows a stored picture at its own size
    (scrolling when wider): the legend used to make every picture 800 px wide, its last key cut
    off at the column's edge (issue 38). Each key's text ends inside the picture."""
    from torchlight.viz import svg as svg_module

    x = tl.tensor([2.0, 3.0], requires_grad=True)
    picture = tl.viz.draw((x**2).sum(), names={"x": x}, step=None).svg
    width = float(re.search(r'<svg[^>]* width="([\d.]+)"', picture).group(1))
    assert width <= 700, width
    for key_x, _, _, text in svg_module._legend_places():
        assert key_x + 19 + len(text) * 6.1 <= width, text
    assert "magenta: the selected node" in picture and "not computed yet" in picture
