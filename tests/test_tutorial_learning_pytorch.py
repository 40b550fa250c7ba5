"""PyTorch's tutorial "Learning PyTorch with Examples", its seven programs ported to torchlight.

Each program below is the tutorial's code with ``torch`` as a parameter (so the same text runs on
``torchlight`` in the tests and on PyTorch when recording), unchanged but for the number of
iterations. The tests run each on torchlight and compare with

- values recorded from PyTorch 2.13.0 running the same program from the same starting values
  (``python tests/test_tutorial_learning_pytorch.py --record``: PyTorch's ``randn`` is replaced,
  in the recorder only, by the values ``tl.manual_seed(0); tl.randn(())...`` drew, in order;
  float32 where the tutorial says ``dtype = torch.float``, else float64, torchlight's default);
- the least-squares cubic fit of $\\sin$ on $[-\\pi, \\pi]$, computed with numpy, for the programs
  whose starting weights come from ``nn.Linear``;

and check that each trains (the loss drops a lot). The programs exercise ``tl.sin``,
``tl.device``, ``x -= ...`` on tensors (issue 13 item 1), custom Functions, RMSprop and SGD.
"""

from __future__ import annotations

import contextlib
import io
import math
import random
import re
import sys

import numpy as np
import pytest

import torchlight as tl


# --------------------------------------------------------------------------- the seven programs
def polynomial_tensor(torch, steps=2000):
    """Tensors: fit y = sin(x) with a third order polynomial, gradients written by hand."""
    dtype = torch.float
    device = torch.device("cpu")
    # device = torch.device("cuda:0") # Uncomment this to run on GPU

    # Create random input and output data
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)

    # Randomly initialize weights
    a = torch.randn((), device=device, dtype=dtype)
    b = torch.randn((), device=device, dtype=dtype)
    c = torch.randn((), device=device, dtype=dtype)
    d = torch.randn((), device=device, dtype=dtype)

    learning_rate = 1e-6
    for t in range(steps):
        # Forward pass: compute predicted y
        y_pred = a + b * x + c * x**2 + d * x**3

        # Compute and print loss
        loss = (y_pred - y).pow(2).sum().item()
        if t % 100 == 99:
            print(t, loss)

        # Backprop to compute gradients of a, b, c, d with respect to loss
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x**2).sum()
        grad_d = (grad_y_pred * x**3).sum()

        # Update weights using gradient descent
        a -= learning_rate * grad_a
        b -= learning_rate * grad_b
        c -= learning_rate * grad_c
        d -= learning_rate * grad_d

    print(f"Result: y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3")


def polynomial_autograd(torch, steps=2000):
    """Autograd: the same fit, the backward pass computed by autograd."""
    dtype = torch.float
    device = torch.device("cpu")

    # Create Tensors to hold input and outputs.
    # By default, requires_grad=False, which indicates that we do not need to
    # compute gradients with respect to these Tensors during the backward pass.
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)

    # Create random Tensors for weights. For a third order polynomial, we need
    # 4 weights: y = a + b x + c x^2 + d x^3
    # Setting requires_grad=True indicates that we want to compute gradients with
    # respect to these Tensors during the backward pass.
    a = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    b = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    c = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    d = torch.randn((), device=device, dtype=dtype, requires_grad=True)

    learning_rate = 1e-6
    for t in range(steps):
        # Forward pass: compute predicted y using operations on Tensors.
        y_pred = a + b * x + c * x**2 + d * x**3

        # Compute and print loss using operations on Tensors.
        # Now loss is a Tensor of shape (1,)
        # loss.item() gets the scalar value held in the loss.
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            print(t, loss.item())

        # Use autograd to compute the backward pass. This call will compute the
        # gradient of loss with respect to all Tensors with requires_grad=True.
        # After this call a.grad, b.grad. c.grad and d.grad will be Tensors holding
        # the gradient of the loss with respect to a, b, c, d respectively.
        loss.backward()

        # Manually update weights using gradient descent. Wrap in torch.no_grad()
        # because weights have requires_grad=True, but we don't need to track this
        # in autograd.
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad

            # Manually zero the gradients after updating weights
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None

    print(f"Result: y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3")


def polynomial_custom_function(torch, steps=2000):
    """Defining new autograd functions: y = a + b P3(c + d x), P3 the Legendre polynomial."""

    class LegendrePolynomial3(torch.autograd.Function):
        """
        We can implement our own custom autograd Functions by subclassing
        torch.autograd.Function and implementing the forward and backward passes
        which operate on Tensors.
        """

        @staticmethod
        def forward(ctx, input):
            """
            In the forward pass we receive a Tensor containing the input and return
            a Tensor containing the output. ctx is a context object that can be used
            to stash information for backward computation. You can cache tensors for
            use in the backward pass using the ``ctx.save_for_backward`` method. Other
            objects can be stored directly as attributes on the ctx object, such as
            ``ctx.my_object = my_object``.
            """
            ctx.save_for_backward(input)
            return 0.5 * (5 * input**3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            """
            In the backward pass we receive a Tensor containing the gradient of the loss
            with respect to the output, and we need to compute the gradient of the loss
            with respect to the input.
            """
            (input,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input**2 - 1)

    dtype = torch.float
    device = torch.device("cpu")

    # Create Tensors to hold input and outputs.
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)

    # Create random Tensors for weights. For this example, we need
    # 4 weights: y = a + b * P3(c + d * x), these weights need to be initialized
    # not too far from the correct result to ensure convergence.
    a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)

    learning_rate = 5e-6
    for t in range(steps):
        # To apply our Function, we use Function.apply method. We alias this as 'P3'.
        P3 = LegendrePolynomial3.apply  # noqa: N806 - the tutorial's name

        # Forward pass: compute predicted y using operations; we compute
        # P3 using our custom autograd operation.
        y_pred = a + b * P3(c + d * x)

        # Compute and print loss
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            print(t, loss.item())

        # Use autograd to compute the backward pass.
        loss.backward()

        # Update weights using gradient descent
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad

            # Manually zero the gradients after updating weights
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None

    print(f"Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)")


def polynomial_nn(torch, steps=2000):
    """nn: the polynomial as a Linear layer on (x, x^2, x^3), updated by hand."""
    # Create Tensors to hold input and outputs.
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)

    # For this example, the output y is a linear function of (x, x^2, x^3), so
    # we can consider it as a linear layer neural network. Let's prepare the
    # tensor (x, x^2, x^3).
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)

    # In the above code, x.unsqueeze(-1) has shape (2000, 1), and p has shape
    # (3,), for this case, broadcasting semantics will apply to obtain a tensor
    # of shape (2000, 3)

    # Use the nn package to define our model as a sequence of layers.
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))

    # The nn package also contains definitions of popular loss functions; in this
    # case we will use Mean Squared Error (MSE) as our loss function.
    loss_fn = torch.nn.MSELoss(reduction="sum")

    learning_rate = 1e-6
    for t in range(steps):
        # Forward pass: compute predicted y by passing x to the model.
        y_pred = model(xx)

        # Compute and print loss.
        loss = loss_fn(y_pred, y)
        if t % 100 == 99:
            print(t, loss.item())

        # Zero the gradients before running the backward pass.
        model.zero_grad()

        # Backward pass: compute gradient of the loss with respect to all the learnable
        # parameters of the model.
        loss.backward()

        # Update the weights using gradient descent. Each parameter is a Tensor, so
        # we can access its gradients like we did before.
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad

    # You can access the first layer of `model` like accessing the first item of a list
    linear_layer = model[0]

    # For linear layer, its parameters are stored as `weight` and `bias`.
    print(
        f"Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + "
        f"{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3"
    )


def polynomial_optim(torch, steps=2000):
    """optim: the same model trained by RMSprop."""
    # Prepare the input tensor (x, x^2, x^3).
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)

    # Use the nn package to define our model and loss function.
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    loss_fn = torch.nn.MSELoss(reduction="sum")

    # Use the optim package to define an Optimizer that will update the weights of
    # the model for us. Here we will use RMSprop; the optim package contains many other
    # optimization algorithms. The first argument to the RMSprop constructor tells the
    # optimizer which Tensors it should update.
    learning_rate = 1e-3
    optimizer = torch.optim.RMSprop(model.parameters(), lr=learning_rate)
    for t in range(steps):
        # Forward pass: compute predicted y by passing x to the model.
        y_pred = model(xx)

        # Compute and print loss.
        loss = loss_fn(y_pred, y)
        if t % 100 == 99:
            print(t, loss.item())

        # Before the backward pass, use the optimizer object to zero all of the
        # gradients for the variables it will update (which are the learnable
        # weights of the model).
        optimizer.zero_grad()

        # Backward pass: compute gradient of the loss with respect to model
        # parameters
        loss.backward()

        # Calling the step function on an Optimizer makes an update to its
        # parameters
        optimizer.step()

    linear_layer = model[0]
    print(
        f"Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + "
        f"{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3"
    )


def polynomial_module(torch, steps=2000):
    """Custom nn Modules: the polynomial as a Module with four Parameters, trained by SGD."""

    class Polynomial3(torch.nn.Module):
        def __init__(self):
            """
            In the constructor we instantiate four parameters and assign them as
            member parameters.
            """
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(()))
            self.b = torch.nn.Parameter(torch.randn(()))
            self.c = torch.nn.Parameter(torch.randn(()))
            self.d = torch.nn.Parameter(torch.randn(()))

        def forward(self, x):
            """
            In the forward function we accept a Tensor of input data and we must return
            a Tensor of output data. We can use Modules defined in the constructor as
            well as arbitrary operators on Tensors.
            """
            return self.a + self.b * x + self.c * x**2 + self.d * x**3

        def string(self):
            """
            Just like any class in Python, you can also define custom method on PyTorch modules
            """
            return f"y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + {self.d.item()} x^3"

    # Create Tensors to hold input and outputs.
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)

    # Construct our model by instantiating the class defined above
    model = Polynomial3()

    # Construct our loss function and an Optimizer. The call to model.parameters()
    # in the SGD constructor will contain the learnable parameters (defined
    # with torch.nn.Parameter) which are members of the model.
    criterion = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    for t in range(steps):
        # Forward pass: Compute predicted y by passing x to the model
        y_pred = model(x)

        # Compute and print loss
        loss = criterion(y_pred, y)
        if t % 100 == 99:
            print(t, loss.item())

        # Zero gradients, perform a backward pass, and update the weights.
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    print(f"Result: {model.string()}")


def dynamic_net(torch, steps=30000):
    """Control flow + weight sharing: a random number (0-2) of extra terms e x^4, e x^5 per pass."""

    class DynamicNet(torch.nn.Module):
        def __init__(self):
            """
            In the constructor we instantiate five parameters and assign them as members.
            """
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(()))
            self.b = torch.nn.Parameter(torch.randn(()))
            self.c = torch.nn.Parameter(torch.randn(()))
            self.d = torch.nn.Parameter(torch.randn(()))
            self.e = torch.nn.Parameter(torch.randn(()))

        def forward(self, x):
            """
            For the forward pass of the model, we randomly choose either 4, 5
            and reuse the e parameter to compute the contribution of these orders.

            Since each forward pass builds a dynamic computation graph, we can use normal
            Python control-flow operators like loops or conditional statements when
            defining the forward pass of the model.

            Here we also see that it is perfectly safe to reuse the same parameter many
            times when defining a computational graph.
            """
            y = self.a + self.b * x + self.c * x**2 + self.d * x**3
            for exp in range(4, random.randint(4, 6)):
                y = y + self.e * x**exp
            return y

        def string(self):
            """
            Just like any class in Python, you can also define custom method on PyTorch modules
            """
            return (
                f"y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + "
                f"{self.d.item()} x^3 + {self.e.item()} x^4 ? + {self.e.item()} x^5 ?"
            )

    # Create Tensors to hold input and outputs.
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)

    # Construct our model by instantiating the class defined above
    model = DynamicNet()

    # Construct our loss function and an Optimizer. Training this strange model with
    # vanilla stochastic gradient descent is tough, so we use momentum
    criterion = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
    for t in range(steps):
        # Forward pass: Compute predicted y by passing x to the model
        y_pred = model(x)

        # Compute and print loss
        loss = criterion(y_pred, y)
        if t % 2000 == 1999:
            print(t, loss.item())

        # Zero gradients, perform a backward pass, and update the weights.
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    print(f"Result: {model.string()}")


# --------------------------------------------------------------------------- running them
NUMBER = r"(-?[\d.]+(?:e[-+]?\d+)?)"


def run(program, torch, steps):
    """Run a program, seeded; return the losses it printed and the numbers in its Result line."""
    random.seed(0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        program(torch, steps)
    lines = out.getvalue().splitlines()
    losses = [float(line.split()[1]) for line in lines if re.match(r"^\d+ ", line)]
    text = re.sub(r"x\^\d|P3", "", lines[-1].split(":", 1)[1])  # the numbers, not the powers
    result = [float(v) for v in re.findall(NUMBER, text)]
    return losses, result


# name: (program, steps, tolerance vs PyTorch; None: compared with least squares instead)
PROGRAMS = {
    "tensor": (polynomial_tensor, 1000, 1e-4),
    "autograd": (polynomial_autograd, 1000, 1e-4),
    "custom_function": (polynomial_custom_function, 1000, 1e-4),
    "nn": (polynomial_nn, 1000, None),
    "optim": (polynomial_optim, 2000, None),
    "module": (polynomial_module, 1000, 1e-9),
    "dynamic_net": (dynamic_net, 4000, 1e-9),
}

# Recorded from PyTorch 2.13.0: python tests/test_tutorial_learning_pytorch.py --record
RECORDED: dict[str, tuple[list[float], list[float]]] = {
    "autograd": (
        [
            704.3593139648438,
            468.75054931640625,
            312.9529724121094,
            209.9302978515625,
            141.8055877685547,
            96.75745391845703,
            66.96891784667969,
            47.27079772949219,
            34.245235443115234,
            25.631881713867188,
        ],
        [0.002627514535561204, 0.7307119965553284, -0.00045329093700274825, -0.07540388405323029],
    ),
    "custom_function": (
        [
            209.95834350585938,
            144.66018676757812,
            100.70249938964844,
            71.03519439697266,
            50.978511810302734,
            37.403133392333984,
            28.206867218017578,
            21.97318458557129,
            17.7457275390625,
            14.877889633178711,
        ],
        [-8.673695095495759e-10, -2.057345390319824, -2.1648088877057603e-10, 0.2543964087963104],
    ),
    "dynamic_net": (
        [482.39938272201357, 218.87593375439144],
        [
            0.0016209009358505162,
            0.41249804816854957,
            0.0032555927027496626,
            -0.02791869206048937,
            -0.0008079645542318052,
            -0.0008079645542318052,
        ],
    ),
    "module": (
        [
            704.3593016451538,
            468.7505076661889,
            312.95289120818245,
            209.9303012252338,
            141.80561551956498,
            96.75746346622667,
            66.96887675587557,
            47.27082384544039,
            34.245239486492515,
            25.631897638605007,
        ],
        [0.0026275138147656, 0.7307119652697261, -0.0004532898550656657, -0.07540387864209512],
    ),
    "tensor": (
        [
            704.3593139648438,
            468.75054931640625,
            312.9529724121094,
            209.9302978515625,
            141.8055877685547,
            96.75745391845703,
            66.96891784667969,
            47.27079772949219,
            34.245235443115234,
            25.631881713867188,
        ],
        [0.002627514535561204, 0.7307119965553284, -0.00045329093700274825, -0.07540388405323029],
    ),
}


def least_squares_cubic():
    x = np.linspace(-math.pi, math.pi, 2000)
    return np.linalg.lstsq(np.stack([x**0, x, x**2, x**3], 1), np.sin(x), rcond=None)[0]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tutorial_program_trains_like_pytorch(name):
    program, steps, tolerance = PROGRAMS[name]
    tl.manual_seed(0)
    losses, result = run(program, tl, steps)
    # trains: far below the loss of predicting 0 everywhere, sum(sin(x)^2) = 999.5
    fraction = 0.25 if name == "dynamic_net" else 0.05  # (its lr of 1e-8 learns slowly)
    assert losses[-1] < fraction * 999.5 and losses[-1] < losses[0], f"{name}: {losses}"
    if tolerance is not None:
        expected_losses, expected_result = RECORDED[name]
        np.testing.assert_allclose(losses, expected_losses, rtol=tolerance)
        np.testing.assert_allclose(result, expected_result, rtol=tolerance, atol=tolerance)
    else:  # started from nn.Linear's random weights: close to the best cubic, computed by numpy
        best = least_squares_cubic()
        assert abs(result[1] - best[1]) < 0.1 and abs(result[3] - best[3]) < 0.015, result
        if name == "optim":  # RMSprop converges: every coefficient
            np.testing.assert_allclose(result, best, atol=0.01)
            assert losses[-1] < 10.0  # the least-squares loss is 8.8


if __name__ == "__main__" and "--record" in sys.argv:
    import torch

    for name in sorted(PROGRAMS):
        program, steps, tolerance = PROGRAMS[name]
        if tolerance is None:
            continue
        torch.set_default_dtype(
            torch.float64
        )  # torchlight's default (float32 where the program says so)
        tl.manual_seed(0)
        draws = [tl.randn(()).item() for _ in range(5)]  # what tl.randn(()) gives in the program
        real_randn, remaining = torch.randn, iter(draws)

        def randn(*size, remaining=remaining, **kwargs):
            return torch.tensor(
                next(remaining),
                dtype=kwargs.get("dtype"),
                requires_grad=kwargs.get("requires_grad", False),
            )

        torch.randn = randn
        try:
            print(f"    {name!r}: {run(program, torch, steps)!r},")
        finally:
            torch.randn = real_randn
