"""Submissions for assignment 1b (the autograd engine): the classic mistakes, each costing
exactly its item, and answers that hand the work back to the library's own engine (each
scores nothing for what it did not write, and is flagged)."""

from __future__ import annotations

from submissions.catalog import Submission, replace, substitute, together

A = "a1b_engine"

PRE_ORDER = '''
def topological_sort(root):
    """Depth first, but each tensor is appended when first reached (pre-order), reversed."""
    order, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen or not node.requires_grad:
            continue
        seen.add(id(node))
        order.append(node)
        if node.history is not None:
            stack.extend(node.history.recorded_parents())
    return order[::-1]
'''

RECURSIVE = '''
def topological_sort(root):
    """Post-order depth first, by recursion: right, until the graph is deep."""
    order, seen = [], set()

    def visit(node):
        if id(node) in seen or not node.requires_grad:
            return
        seen.add(id(node))
        for parent in node.history.recorded_parents() if node.history else ():
            visit(parent)
        order.append(node)

    visit(root)
    return order
'''

LIBRARY_SORT = """
from torchlight.autograd import topological_sort as library_sort


def topological_sort(root):
    return library_sort(root)
"""

LIBRARY_BACKWARD = """
def backpropagate(root, deriv):
    root.backward(deriv)
"""

# No engine name appears in the source: the name is built when the cell runs.
LIBRARY_BY_ANOTHER_NAME = """
import torchlight.autograd as ag


def backpropagate(root, deriv):
    walk = getattr(ag, "".join(["back", "propagate"]))
    walk(root, deriv)
"""

LIBRARY_CENTRAL = """
from torchlight.autograd.gradcheck import central_difference as library_difference


def central_difference(f, *vals, arg=0, epsilon=1e-6):
    return library_difference(f, *vals, arg=arg, epsilon=epsilon)
"""

ACCUMULATE = "derivs[id(parent)] = derivs[id(parent)] + share if id(parent) in derivs else share"
LEAF_ONLY = """            if node.history is None:
                node.accumulate_grad(d)
                continue
"""
EVERY_NODE = """            node.accumulate_grad(d)
            if node.history is None:
                continue
"""

#: Answers that call the library's sort and its central difference, each in its own answer
#: cell and changing nothing outside it: graded together in one notebook, each flagged.
LIBRARY_SORT_CHEAT = Submission(
    "library-sort",
    A,
    "cheat",
    "solution",
    (replace("topological_sort", LIBRARY_SORT),),
    zero=("test_topological_sort", "test_train"),  # training runs on the notebook's sort
    fools_kernel=("test_topological_sort",),
    note="hands the sort to torchlight.autograd.topological_sort",
)

LIBRARY_CENTRAL_DIFFERENCE_CHEAT = Submission(
    "library-central-difference",
    A,
    "cheat",
    "solution",
    (replace("central_difference", LIBRARY_CENTRAL),),
    zero=("test_central_difference",),
    fools_kernel=("test_central_difference",),
)

#: Planted mistakes in answer cells of their own, each costing items of its own: graded together
#: (``catalog.together``; the README names each one).
GRADIENTS_OVERWRITTEN = Submission(
    "gradients-overwritten",
    A,
    "mistake",
    "solution",
    (substitute("backpropagate", ACCUMULATE, "derivs[id(parent)] = share"),),
    zero=("test_backpropagate",),
    note="a tensor used twice keeps only the last share it received",
)

PRE_ORDER_SORT = Submission(
    "pre-order",
    A,
    "mistake",
    "solution",
    (replace("topological_sort", PRE_ORDER),),
    zero=("test_topological_sort",),
    note="a tensor comes before a parent: it would be visited before all its users sent",
)

ONE_SIDED_DIFFERENCE = Submission(
    "one-sided-difference",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "central_difference",
            "return (float(f(*up)) - float(f(*down))) / (2.0 * epsilon)",
            "return (float(f(*up)) - float(f(*vals))) / epsilon",
        ),
    ),
    zero=("test_central_difference",),
    note="(f(x + eps) - f(x)) / eps: off by O(eps)",
)

RECURSIVE_SORT = Submission(
    "recursive-sort",
    A,
    "mistake",
    "solution",
    (replace("topological_sort", RECURSIVE),),
    zero=("test_topological_sort",),
    note="RecursionError on the 100,000-op chain",
)

GRADS_ON_NON_LEAVES = Submission(
    "grads-on-non-leaves",
    A,
    "mistake",
    "solution",
    (substitute("backpropagate", LEAF_ONLY, EVERY_NODE),),
    zero=("test_leaves_only",),
    note="every tensor keeps a .grad, not only the leaves",
)

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    together(
        "wrong-in-one-step",
        GRADIENTS_OVERWRITTEN,
        PRE_ORDER_SORT,
        ONE_SIDED_DIFFERENCE,
    ),
    together(
        "wrong-in-another-step",
        RECURSIVE_SORT,
        GRADS_ON_NON_LEAVES,
    ),
    together(
        "reaches-for-the-library",
        LIBRARY_SORT_CHEAT,
        LIBRARY_CENTRAL_DIFFERENCE_CHEAT,
    ),
    Submission(
        "library-backward",
        A,
        "cheat",
        "solution",
        (replace("backpropagate", LIBRARY_BACKWARD),),
        zero=("test_backpropagate", "test_leaves_only", "test_train"),
        fools_kernel=("test_backpropagate", "test_leaves_only", "test_train"),
        note="Tensor.backward is the library's engine",
    ),
    Submission(
        "library-by-another-name",
        A,
        "cheat",
        "solution",
        (replace("backpropagate", LIBRARY_BY_ANOTHER_NAME),),
        zero=("test_backpropagate", "test_leaves_only", "test_train"),
        fools_kernel=("test_backpropagate", "test_leaves_only", "test_train"),
        note="the library's backpropagate through a name built at run time",
    ),
    Submission(
        "library-backward-in-training",
        A,
        "cheat",
        "solution",
        (substitute("classifier", "backpropagate(loss, tl.ones(()))", "loss.backward()"),),
        zero=("test_train",),
        fools_kernel=("test_train",),
        note="trains with loss.backward(), not with the notebook's engine",
    ),
]

#: Each cheat's finding in the integrity report (from the code's structure, or for a name built
#: at run time from its effect: the item hit a part of the library the notebook grades).
FLAGGED = {
    "library-sort": "reaches for torchlight's own engine (imports topological_sort",
    "library-backward": "reaches for torchlight's own engine (calls .backward()",
    "library-by-another-name": "test_backpropagate: the answer called a part of torchlight",
    "library-central-difference": "imports central_difference from torchlight.autograd.gradcheck",
    "library-backward-in-training": "reaches for torchlight's own engine (calls .backward()",
}
