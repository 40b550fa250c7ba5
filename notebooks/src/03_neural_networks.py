# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python (torchlight)
#     language: python
#     name: torchlight
# ---

# %% [markdown]
# # Tutorial 3: Neural networks
#
# Tutorial 2 ended with "compose gradient-tracked ops into neural networks". That is all a
# neural network is: a function built from tensor ops, whose weights are leaves with
# `requires_grad=True`. This tutorial builds the pieces PyTorch users know, with the same names:
#
# 1. `Parameter` and `Module`: how a model keeps track of its weights;
# 2. layers (`Linear`, activations, `Sequential`);
# 3. losses (`mse_loss`, `cross_entropy`), checked against their formulas;
# 4. optimizers (`SGD`, `Adam`), checked against their update rules;
# 5. a training loop, on a toy 2-D data set and on real handwritten digits;
# 6. the training viewer.

# %%
import numpy as np

import torchlight as tl
from torchlight import nn, optim, viz
from torchlight.nn import functional as F

tl.manual_seed(0)

# %% [markdown]
# ## 1. Parameters and Modules
#
# A `Parameter` is a leaf tensor that requires grad. A `Module` is a class whose `forward`
# computes the output; any `Parameter` (or sub-Module) assigned to one of its attributes is
# **registered**, so `parameters()` can hand all of them to an optimizer. Here is a linear
# layer written by hand:

# %%
class MyLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(tl.randn(n_in, n_out) * 0.1)
        self.bias = nn.Parameter(tl.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


layer = MyLinear(3, 2)
for name, p in layer.named_parameters():
    print(name, p.shape, p.requires_grad)

# %% [markdown]
# Calling the module calls `forward`; the output is in the graph, so backward reaches the
# parameters:

# %%
x = tl.randn(4, 3)
out = layer(x)
out.sum().backward()
print(out.shape)
print(layer.bias.grad)  # d(sum of 4 rows)/d bias = 4 for each output

# %% [markdown]
# ## 2. Layers
#
# `nn.Linear(in_features, out_features)` is the same layer, PyTorch's way: $y = x W^\top + b$
# with `weight` of shape `(out_features, in_features)`, initialized uniformly in
# $\pm 1/\sqrt{\text{in\_features}}$. A check against numpy:

# %%
linear = nn.Linear(3, 2)
print(linear)
print(linear.weight.shape, linear.bias.shape)
y = linear(x)
expected = x.numpy() @ linear.weight.detach().numpy().T + linear.bias.detach().numpy()
assert np.allclose(y.detach().numpy(), expected)

# %% [markdown]
# Activations are layers too (`nn.ReLU`, `nn.Tanh`, `nn.Sigmoid`), and `nn.Sequential` chains
# layers. A multi-layer perceptron (MLP) for 2-D points with two classes:

# %%
model = nn.Sequential(
    nn.Linear(2, 16),
    nn.Tanh(),
    nn.Linear(16, 16),
    nn.Tanh(),
    nn.Linear(16, 2),
)
model

# %% [markdown]
# Parameters get dotted names from their place in the tree. The count per layer is
# `in * out + out`:

# %%
for name, p in model.named_parameters():
    print(f"{name:10s} {str(p.shape):10s} {p.numel():4d}")
n_params = sum(p.numel() for p in model.parameters())
assert n_params == (2 * 16 + 16) + (16 * 16 + 16) + (16 * 2 + 2)
print("total", n_params)

# %% [markdown]
# The **module viewer** shows the same tree with shapes and counts; in JupyterLab, pick a
# parameter to see its values and gradient:

# %%
viz.ModuleViewer(model)

# %% [markdown]
# ## 3. Losses
#
# For regression, the mean squared error $\frac{1}{n}\sum_i (\hat y_i - y_i)^2$:

# %%
pred = tl.tensor([1.0, 2.0, 3.0])
target = tl.tensor([1.0, 0.0, 5.0])
print(F.mse_loss(pred, target), (0 + 4 + 4) / 3)

# %% [markdown]
# For classification, a model outputs one score (**logit**) per class. `softmax` turns logits
# into probabilities, $p_k = e^{z_k} / \sum_j e^{z_j}$, and `cross_entropy(logits, labels)` is
# the mean of $-\log p_{\text{label}}$. With equal logits every class has probability $1/C$,
# so the loss is $\log C$:

# %%
logits = tl.zeros(4, 10)
labels = tl.tensor([0, 3, 7, 9])
print(F.softmax(logits, dim=1)[0])
print(F.cross_entropy(logits, labels).item(), np.log(10))
assert np.isclose(F.cross_entropy(logits, labels).item(), np.log(10))

# %% [markdown]
# `log_softmax` is computed stably: $\log p_k = z_k - m - \log\sum_j e^{z_j - m}$ with
# $m = \max_j z_j$, so huge logits do not overflow (a naive $e^{1000}$ is `inf`):

# %%
big = tl.tensor([[1000.0, 0.0]])
print(F.log_softmax(big, dim=1))
with np.errstate(over="ignore", invalid="ignore"):
    print("naive:", np.log(np.exp(1000.0) / (np.exp(1000.0) + 1)))

# %% [markdown]
# And the gradient of cross-entropy with respect to the logits is the famous
# $\text{softmax}(z) - \text{onehot}(y)$, divided by the batch size for the mean:

# %%
z = tl.randn(3, 4, requires_grad=True)
y = tl.tensor([2, 0, 1])
F.cross_entropy(z, y).backward()
expected = (F.softmax(z.detach(), dim=1) - F.one_hot(y, 4)) / 3
assert np.allclose(z.grad.numpy(), expected.numpy())
print(z.grad)

# %% [markdown]
# ## 4. Optimizers
#
# An optimizer updates parameters from their gradients. Plain gradient descent is
# $p \leftarrow p - \text{lr} \cdot \nabla_p L$; `optim.SGD` does exactly that (inside
# `tl.no_grad()`, since the update itself must not be recorded):

# %%
w = nn.Parameter(tl.tensor([1.0, -2.0]))
opt = optim.SGD([w], lr=0.1)
loss = (w * w).sum()  # gradient 2w = [2, -4]
opt.zero_grad()
loss.backward()
opt.step()
print(w)
assert np.allclose(w.detach().numpy(), [1.0 - 0.1 * 2, -2.0 + 0.1 * 4])

# %% [markdown]
# `SGD(momentum=0.9)` keeps a running velocity; `Adam` keeps running means of the gradient and
# its square and scales each step by them. Both follow PyTorch's update rules. The pattern of
# one training step never changes:
#
# ```python
# opt.zero_grad()        # forget the previous step's gradients (they accumulate!)
# loss = loss_fn(model(x), y)
# loss.backward()        # fill p.grad for every parameter
# opt.step()             # update every parameter
# ```

# %% [markdown]
# ## 5. Training on a toy data set
#
# `torchlight.data` has the 2-D toy sets teachers use: `simple`, `diag`, `split`, `xor`,
# `circle` and `spiral`. Each is a `TensorDataset` of points `(n, 2)` and labels `(n,)`,
# seeded, so the same call always gives the same points.

# %%
from torchlight.data import DataLoader, spiral

data = spiral(n=200, seed=0)
X, labels = data.tensors
print(data)
print(X[:3], labels[:3])

# %% [markdown]
# `show_boundary(model, X, labels)` pictures what a model has learned: it evaluates the model on
# a grid over the plane, colours the background by the probability of class 1 (blue for 0,
# orange for 1), and draws the points on top, with a black ring around each misclassified one.
# The drawing itself is `torchlight.viz.plots.boundary_svg`, the same the training viewer
# below uses.

# %%
from torchlight.viz import Picture  # an SVG that JupyterLab shows before the cell runs

from torchlight.viz.plots import boundary_svg, line_chart_svg


def show_boundary(model, X, labels, grid=60):
    points = X.numpy()
    low, high = points.min() - 0.05, points.max() + 0.05
    ticks = np.linspace(low, high, grid)
    x1, x2 = np.meshgrid(ticks, ticks[::-1])  # row 0 is the top of the picture
    with tl.no_grad():
        probs = F.softmax(model(tl.tensor(np.stack([x1.ravel(), x2.ravel()], axis=1))), dim=1)
        predicted = model(X).argmax(dim=1).numpy()
    p1 = probs[:, 1].numpy().reshape(grid, grid)
    return Picture(boundary_svg(p1, points, labels.numpy(), (low, high), 260, predicted))


# %% [markdown]
# Before training, the model's boundary is arbitrary:

# %%
tl.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 2))
show_boundary(model, X, labels)

# %% [markdown]
# Train with Adam on the whole set at once (200 points are one small batch), and report the
# loss and the training accuracy now and then:

# %%
def accuracy(model, X, labels):
    with tl.no_grad():
        return (model(X).argmax(dim=1) == labels).double().mean().item()


opt = optim.Adam(model.parameters(), lr=0.01)
losses, accuracies = [], []
for step in range(601):
    opt.zero_grad()
    loss = F.cross_entropy(model(X), labels)
    loss.backward()
    opt.step()
    losses.append(loss.item())
    accuracies.append(accuracy(model, X, labels))
    if step % 100 == 0:
        print(f"step {step:3d}   loss {loss.item():.4f}   accuracy {accuracies[-1]:.3f}")

# %% [markdown]
# The loss creeps along a plateau for ~250 steps, while the network is nearly linear, then
# drops fast once the hidden units have bent the boundary into a spiral:

# %%
Picture(line_chart_svg([("loss", losses, "#c5221f"), ("accuracy", accuracies, "#188038")], title="spiral, Adam",
                       formats={"accuracy": ".1%"}))

# %%
assert accuracy(model, X, labels) >= 0.95
show_boundary(model, X, labels)

# %% [markdown]
# ### The training viewer
#
# `viz.TrainingViewer` trains a one-hidden-layer network on any of the toy sets and redraws as
# it goes: the decision boundary (the background is the network's probability of class 1;
# misclassified points get a black ring), the loss curve and the accuracy. In JupyterLab press
# ▶ train to train and ‖ pause to pause; change the data set, the hidden size, the activation or the
# learning rate and watch what changes. (Try a learning rate of 5, or 1 hidden unit on
# `circle`.)

# %%
viewer = viz.TrainingViewer(dataset="spiral", hidden=16, lr=0.5, seed=0)
viewer

# %% [markdown]
# It can also be driven from code: `viewer.train(n)` takes `n` full-batch gradient steps and
# redraws the viewer above. Here is where it stands after 500 steps:

# %%
loss = viewer.train(500)
print(f"loss after 500 steps: {loss:.3f}")
viewer

# %% [markdown]
# ## 6. Training on handwritten digits
#
# `torchlight.data.digits` is a real data set that ships with torchlight: 1,797 handwritten
# digits of 8x8 pixels, split into training and test images (the test images are never used
# for training, so the test accuracy measures how well the model **generalizes**).

# %%
from torchlight.data import digits

train, test = digits(train=True), digits(train=False)
print(train, test, sep="\n")

# %% jupyter={"source_hidden": true}
def show_digits(images, labels, predicted=None, n=12, scale=4):
    """An SVG of the first n 8x8 images, each with its label (and prediction: red if wrong)."""
    images = images.numpy().reshape(-1, 8, 8)
    side = 8 * scale
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{n * (side + 8)}" height="{side + 34}" '
           'font-family="sans-serif" font-size="12" shape-rendering="crispEdges">']
    for k in range(n):
        x0 = k * (side + 8)
        out.append(f'<rect x="{x0}" y="0" width="{side}" height="{side}" fill="#fff" stroke="#ccc"/>')
        for i, j in zip(*images[k].nonzero()):  # white pixels are the background already
            level = int(255 * (1 - images[k, i, j]))
            out.append(f'<rect x="{x0 + j * scale}" y="{i * scale}" width="{scale}" height="{scale}" '
                       f'fill="#{level:02x}{level:02x}{level:02x}"/>')
        out.append(f'<text x="{x0 + 2}" y="{side + 14}">{labels[k].item()}</text>')
        if predicted is not None:
            wrong = predicted[k].item() != labels[k].item()
            out.append(f'<text x="{x0 + 2}" y="{side + 30}" fill="{"#c0392b" if wrong else "#1e8449"}">'
                       f'{predicted[k].item()}</text>')
    return Picture("".join(out + ["</svg>"]))


# %%
images, digit_labels = train.tensors
show_digits(images, digit_labels)

# %% [markdown]
# Each image is 64 numbers in $[0, 1]$; an MLP with one hidden layer of 128 units maps them to
# 10 logits. We train with mini-batches of 64 images in a new random order each epoch
# (`DataLoader(..., shuffle=True, seed=0)` makes the orders repeatable), using SGD with
# momentum:

# %%
tl.manual_seed(0)
mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = optim.SGD(mlp.parameters(), lr=0.05, momentum=0.9)
loader = DataLoader(train, batch_size=64, shuffle=True, seed=0)
test_x, test_y = test.tensors

for epoch in range(10):
    mlp.train()
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.cross_entropy(mlp(xb), yb)
        loss.backward()
        opt.step()
    mlp.eval()
    print(f"epoch {epoch}   last batch loss {loss.item():.4f}   test accuracy {accuracy(mlp, test_x, test_y):.3f}")

# %%
test_accuracy = accuracy(mlp, test_x, test_y)
assert test_accuracy >= 0.95, test_accuracy
with tl.no_grad():
    predicted = mlp(test_x).argmax(dim=1)
show_digits(test_x, test_y, predicted)

# %% [markdown]
# Labels above, predictions below (red when wrong). The mistakes are worth a look:

# %%
wrong = (predicted != test_y).numpy().nonzero()[0]
print(f"{len(wrong)} of {len(test_y)} test digits are wrong")
show_digits(test_x[wrong], test_y[wrong], predicted[wrong], n=min(12, len(wrong)))

# %% [markdown]
# ## 7. Saving and loading
#
# `state_dict()` maps each dotted parameter name to a tensor; `load_state_dict` puts them back
# into a model of the same shape (and says clearly which keys are missing, unexpected or
# wrongly shaped otherwise):

# %%
state = mlp.state_dict()
print(list(state))
copy = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
copy.load_state_dict(state)
assert accuracy(copy, test_x, test_y) == test_accuracy

# %% [markdown]
# ## Summary
#
# - A model is a `Module`: `Parameter`s and sub-Modules assigned as attributes are registered,
#   and `parameters()` / `named_parameters()` find them all.
# - `nn.Linear` computes $x W^\top + b$; `nn.Sequential` chains layers; activations add the
#   non-linearity without which stacked layers would collapse into one linear map.
# - `cross_entropy` = `log_softmax` (computed stably) + negative log-likelihood; its gradient is
#   softmax minus one-hot.
# - Every training step is `zero_grad`, forward, loss, `backward`, `step`.
# - An MLP separates the spiral perfectly and reads handwritten digits with over 95% test
#   accuracy, in a few seconds on a CPU.
#
# ## Exercises
#
# 1. Remove the `Tanh` layers from the spiral model. What accuracy can it reach, and why?
# 2. Train the spiral model with `optim.SGD(lr=0.1)` instead of Adam. How many steps does it
#    need? Try `momentum=0.9`.
# 3. Implement `mse_loss` and `cross_entropy` yourself from tensor ops (`log`, `exp`, `max`,
#    indexing) and check them against `torchlight.nn.functional` with `gradcheck`.
# 4. Write the SGD-with-momentum update by hand and check that it matches
#    `optim.SGD(momentum=0.9)` over five steps.
# 5. Add a second hidden layer to the digits MLP. Does the test accuracy improve? What about
#    the training accuracy?
#
# Next: [Tutorial 4: Backends and the GPU](04_backends_and_gpu.ipynb) -- where the numbers are actually computed.
