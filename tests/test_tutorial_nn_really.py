"""PyTorch's tutorial "What is torch.nn really?", ported to torchlight on the shipped 8x8 digits.

The tutorial's code, step by step, with ``torch`` -> ``tl``, the digits instead of MNIST
(8 x 8 = 64 pixels instead of 28 x 28 = 784, so ``784`` -> ``64``, ``view(-1, 1, 28, 28)`` ->
``view(-1, 1, 8, 8)``, and the CNN's final ``avg_pool2d(xb, 4)`` -> ``avg_pool2d(xb, 1)``: three
stride-2 convolutions leave 1 x 1 instead of 4 x 4), and one epoch per stage (three for the
CNNs) instead of two. Checks:

- the from-scratch training (hand-written log_softmax, nll, ``weights -= weights.grad * lr``)
  equals the same gradient descent computed by hand in numpy (gradient of softmax regression,
  $X^T (\\mathrm{softmax}(XW + b) - Y) / m$), to 1e-10;
- the hand-written loss equals ``F.cross_entropy``;
- every refactoring (nn.Module, nn.Linear, optim, Dataset, DataLoader, fit/get_data, CNN,
  nn.Sequential with Lambda, WrappedDataLoader, AdaptiveAvgPool2d) trains: the validation loss
  falls far below its starting value ($\\log 10$ for a uniform guess) and accuracy is high.

They exercise ``x -= ...`` on tensors under ``no_grad`` (issue 13 item 1) and ``tl.argmax``.
"""

from __future__ import annotations

import math

import numpy as np

import torchlight as tl
import torchlight.nn.functional as F
from torchlight import nn, optim
from torchlight.data import DataLoader, TensorDataset, digits

LOG10 = math.log(10)


def get_digits():
    # MNIST data setup: "x_train, y_train, x_valid, y_valid = map(torch.tensor, ...)"
    x_train, y_train = digits(train=True).tensors
    x_valid, y_valid = digits(train=False).tensors
    return x_train, y_train, x_valid, y_valid


def accuracy(out, yb):
    preds = tl.argmax(out, dim=1)
    return (preds == yb).float().mean()


def test_neural_net_from_scratch_is_plain_gradient_descent():
    x_train, y_train, x_valid, y_valid = get_digits()
    n, c = x_train.shape
    tl.manual_seed(0)

    # Neural net from scratch (without torch.nn)
    weights = tl.randn(64, 10) / math.sqrt(64)
    weights.requires_grad_()
    bias = tl.zeros(10, requires_grad=True)
    start_weights, start_bias = weights.detach().numpy().copy(), bias.detach().numpy().copy()

    def log_softmax(x):
        return x - x.exp().sum(-1).log().unsqueeze(-1)

    def model(xb):
        return log_softmax(xb @ weights + bias)

    bs = 64  # batch size
    xb = x_train[0:bs]  # a mini-batch from x
    preds = model(xb)  # predictions

    def nll(input, target):  # noqa: A002 - the tutorial's name
        return -input[range(target.shape[0]), target].mean()

    loss_func = nll
    yb = y_train[0:bs]
    first_loss = loss_func(preds, yb)
    # by hand: the hand-written loss is cross-entropy
    np.testing.assert_allclose(
        first_loss.item(),
        F.cross_entropy(xb @ weights + bias, yb).item(),
        rtol=1e-12,
    )
    first_accuracy = accuracy(preds, yb)

    lr = 0.5  # learning rate
    epochs = 1  # how many epochs to train for

    for epoch in range(epochs):  # noqa: B007 - as in the tutorial
        for i in range((n - 1) // bs + 1):
            start_i = i * bs
            end_i = start_i + bs
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            pred = model(xb)
            loss = loss_func(pred, yb)

            loss.backward()
            with tl.no_grad():
                weights -= weights.grad * lr
                bias -= bias.grad * lr
                weights.grad.zero_()
                bias.grad.zero_()

    last_loss, last_accuracy = loss_func(model(xb), yb), accuracy(model(xb), yb)
    assert (
        last_loss.item() < 0.5 * first_loss.item() and last_accuracy.item() > first_accuracy.item()
    )

    # the same epoch by hand, in numpy
    w, b = start_weights, start_bias
    x, y = x_train.numpy(), y_train.numpy()
    for i in range((n - 1) // bs + 1):
        xb_, yb_ = x[i * bs : i * bs + bs], y[i * bs : i * bs + bs]
        z = xb_ @ w + b
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(yb_)), yb_] -= 1  # softmax - onehot
        w, b = w - lr * xb_.T @ p / len(yb_), b - lr * p.sum(0) / len(yb_)
    np.testing.assert_allclose(weights.detach().numpy(), w, atol=1e-10)
    np.testing.assert_allclose(bias.detach().numpy(), b, atol=1e-10)

    # Using torch.nn.functional
    loss_func = F.cross_entropy

    def model(xb):
        return xb @ weights + bias

    np.testing.assert_allclose(loss_func(model(xb), yb).item(), last_loss.item(), rtol=1e-12)
    assert accuracy(model(xb), yb).item() == last_accuracy.item()


def test_refactoring_with_nn_module_linear_optim_dataset_and_dataloader():
    x_train, y_train, x_valid, y_valid = get_digits()
    n, c = x_train.shape
    bs, lr, epochs = 64, 0.5, 1
    loss_func = F.cross_entropy
    tl.manual_seed(0)

    # Refactor using nn.Module
    class Mnist_Logistic(nn.Module):  # noqa: N801 - the tutorial's name
        def __init__(self):
            super().__init__()
            self.weights = nn.Parameter(tl.randn(64, 10) / math.sqrt(64))
            self.bias = nn.Parameter(tl.zeros(10))

        def forward(self, xb):
            return xb @ self.weights + self.bias

    model = Mnist_Logistic()
    before = loss_func(model(x_valid), y_valid).item()

    def fit():
        for epoch in range(epochs):  # noqa: B007 - as in the tutorial
            for i in range((n - 1) // bs + 1):
                start_i = i * bs
                end_i = start_i + bs
                xb = x_train[start_i:end_i]
                yb = y_train[start_i:end_i]
                pred = model(xb)
                loss = loss_func(pred, yb)

                loss.backward()
                with tl.no_grad():
                    for p in model.parameters():
                        p -= p.grad * lr
                    model.zero_grad()

    fit()
    after_module = loss_func(model(x_valid), y_valid).item()
    assert after_module < 0.5 * before, (before, after_module)

    # Refactor using nn.Linear
    class Mnist_Logistic(nn.Module):  # noqa: N801
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 10)

        def forward(self, xb):
            return self.lin(xb)

    # Refactor using torch.optim
    def get_model():
        model = Mnist_Logistic()
        return model, optim.SGD(model.parameters(), lr=lr)

    model, opt = get_model()
    print(loss_func(model(x_valid[:bs]), y_valid[:bs]))
    for epoch in range(epochs):  # noqa: B007 - as in the tutorial
        for i in range((n - 1) // bs + 1):
            start_i = i * bs
            end_i = start_i + bs
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            pred = model(xb)
            loss = loss_func(pred, yb)

            loss.backward()
            opt.step()
            opt.zero_grad()
    after_optim = loss_func(model(x_valid), y_valid).item()

    # Refactor using Dataset
    train_ds = TensorDataset(x_train, y_train)
    model, opt = get_model()
    for epoch in range(epochs):  # noqa: B007 - as in the tutorial
        for i in range((n - 1) // bs + 1):
            xb, yb = train_ds[i * bs : i * bs + bs]
            pred = model(xb)
            loss = loss_func(pred, yb)

            loss.backward()
            opt.step()
            opt.zero_grad()
    after_dataset = loss_func(model(x_valid), y_valid).item()

    # Refactor using DataLoader
    train_dl = DataLoader(train_ds, batch_size=bs)
    model, opt = get_model()
    for epoch in range(epochs):  # noqa: B007 - as in the tutorial
        for xb, yb in train_dl:
            pred = model(xb)
            loss = loss_func(pred, yb)

            loss.backward()
            opt.step()
            opt.zero_grad()
    after_dataloader = loss_func(model(x_valid), y_valid).item()
    for after in (after_optim, after_dataset, after_dataloader):
        assert after < 0.5 * LOG10
    assert accuracy(model(x_valid), y_valid).item() > 0.75  # one epoch


def test_validation_fit_cnn_sequential_and_wrapped_dataloader():
    x_train, y_train, x_valid, y_valid = get_digits()
    bs, epochs = 64, 1
    loss_func = F.cross_entropy
    tl.manual_seed(0)

    # Add validation
    train_ds = TensorDataset(x_train, y_train)
    valid_ds = TensorDataset(x_valid, y_valid)

    # Create fit() and get_data()
    def loss_batch(model, loss_func, xb, yb, opt=None):
        loss = loss_func(model(xb), yb)

        if opt is not None:
            loss.backward()
            opt.step()
            opt.zero_grad()

        return loss.item(), len(xb)

    val_losses = []

    def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
        for epoch in range(epochs):
            model.train()
            for xb, yb in train_dl:
                loss_batch(model, loss_func, xb, yb, opt)

            model.eval()
            with tl.no_grad():
                losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])  # noqa: B905 - as in the tutorial
            val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)

            print(epoch, val_loss)
            val_losses.append(val_loss)

    def get_data(train_ds, valid_ds, bs):
        return (
            DataLoader(train_ds, batch_size=bs, shuffle=True),
            DataLoader(valid_ds, batch_size=bs * 2),
        )

    train_dl, valid_dl = get_data(train_ds, valid_ds, bs)

    class Mnist_Logistic(nn.Module):  # noqa: N801
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 10)

        def forward(self, xb):
            return self.lin(xb)

    model = Mnist_Logistic()
    fit(epochs, model, loss_func, optim.SGD(model.parameters(), lr=0.5), train_dl, valid_dl)

    # Switch to CNN
    class Mnist_CNN(nn.Module):  # noqa: N801
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1)
            self.conv2 = nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1)
            self.conv3 = nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1)

        def forward(self, xb):
            xb = xb.view(-1, 1, 8, 8)
            xb = F.relu(self.conv1(xb))
            xb = F.relu(self.conv2(xb))
            xb = F.relu(self.conv3(xb))
            xb = F.avg_pool2d(xb, 1)
            return xb.view(-1, xb.size(1))

    lr = 0.1
    model = Mnist_CNN()
    opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    fit(3, model, loss_func, opt, train_dl, valid_dl)

    # Using nn.Sequential
    class Lambda(nn.Module):
        def __init__(self, func):
            super().__init__()
            self.func = func

        def forward(self, x):
            return self.func(x)

    def preprocess(x):
        return x.view(-1, 1, 8, 8)

    model = nn.Sequential(
        Lambda(preprocess),
        nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.AvgPool2d(1),
        Lambda(lambda x: x.view(x.size(0), -1)),
    )
    opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    fit(3, model, loss_func, opt, train_dl, valid_dl)

    # Wrapping DataLoader
    def preprocess(x, y):
        return x.view(-1, 1, 8, 8), y

    class WrappedDataLoader:
        def __init__(self, dl, func):
            self.dl = dl
            self.func = func

        def __len__(self):
            return len(self.dl)

        def __iter__(self):
            for b in self.dl:
                yield (self.func(*b))

    train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
    train_dl = WrappedDataLoader(train_dl, preprocess)
    valid_dl = WrappedDataLoader(valid_dl, preprocess)

    model = nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        Lambda(lambda x: x.view(x.size(0), -1)),
    )

    opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    fit(3, model, loss_func, opt, train_dl, valid_dl)

    print(val_losses)
    assert val_losses[0] < 0.5 * LOG10  # logistic regression, one epoch
    for last_epoch in (val_losses[3], val_losses[6], val_losses[9]):  # each CNN, after 3 epochs
        assert last_epoch < 0.6 * LOG10
    model.eval()
    with tl.no_grad():
        assert accuracy(model(x_valid.view(-1, 1, 8, 8)), y_valid).item() > 0.6
