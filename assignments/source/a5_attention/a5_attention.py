# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 5: Normalization and attention
#
# The layers that make deep networks and transformers train: BatchNorm and LayerNorm, softmax,
# scaled dot-product attention with a causal mask, and one step of an LSTM. Each is one
# `Function` whose backward you derive on paper and write in plain tensor math.
#
# Both normalizations compute $\hat x = (x - \mu)\, r$ with $r = 1/\sqrt{\sigma^2 + \epsilon}$
# (the *biased* variance, $\sigma^2 = \langle (x - \mu)^2 \rangle$) and return
# $y = \gamma \hat x + \beta$. With $g = G\gamma$ and $\langle\cdot\rangle$ the mean over the
# elements that share $\mu$ and $\sigma^2$, the chain rule through $\mu$ *and* through
# $\sigma^2$ gives
#
# $$\frac{\partial L}{\partial x} = r\left(g - \langle g \rangle - \hat x\,\langle g \hat x\rangle\right),
#   \qquad \frac{\partial L}{\partial \gamma} = \sum G \hat x, \qquad
#   \frac{\partial L}{\partial \beta} = \sum G.$$
#
# (The last term comes from the variance: leave it out and the gradient is wrong.)
#
# **How you are graded.** Hidden checks on random float64 inputs of several non-square shapes,
# compared with reference values to about $10^{-12}$ and with central differences. Reductions
# take a `keepdim=True` argument; `x.amax(dim, keepdim=True)` is the maximum.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import numpy as np

import torchlight as tl
from torchlight.autograd import Function, gradcheck
from torchlight.testing import assert_close, assert_exact, assert_gradient_scales

tl.manual_seed(0)

# %% [markdown] nbgrader={"grade": false, "grade_id": "batchnorm_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. BatchNorm (training mode)
#
# `BatchNorm.apply(x, weight, bias, eps)` with `x` of shape $(N, C)$ normalizes each channel
# (column) with the mean and biased variance of the batch; `weight` and `bias` have shape
# $(C)$. Backward returns the gradients for `x`, `weight` and `bias` (not for `eps`).

# %% nbgrader={"grade": false, "grade_id": "batchnorm", "locked": false, "schema_version": 3, "solution": true}
class BatchNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        ### BEGIN SOLUTION
        centred = x - x.mean(0, keepdim=True)
        rstd = 1.0 / ((centred * centred).mean(0, keepdim=True) + eps).sqrt()
        x_hat = centred * rstd
        ctx.save_for_backward(x_hat, rstd, weight)
        return x_hat * weight + bias
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x_hat, rstd, weight = ctx.saved_tensors
        g = grad_output * weight
        mean_g, mean_gx = g.mean(0, keepdim=True), (g * x_hat).mean(0, keepdim=True)
        grad_x = rstd * (g - mean_g - x_hat * mean_gx)
        return grad_x, (grad_output * x_hat).sum(0), grad_output.sum(0)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_batchnorm", "locked": true, "points": 2, "schema_version": 3, "solution": false}
x = tl.tensor([[1.0, 10.0], [3.0, 30.0]])
y = BatchNorm.apply(x, tl.ones(2), tl.zeros(2), 0.0)
assert_close(y.numpy(), [[-1.0, -1.0], [1.0, 1.0]])
args = tl.randn(5, 3, requires_grad=True), tl.randn(3, requires_grad=True), tl.randn(3, requires_grad=True)
assert gradcheck(lambda x, w, b: BatchNorm.apply(x, w, b, 1e-5), *args)
# Exact, not estimated: the output is linear in weight and bias, so their gradients must not
# change when they are scaled by 2**50 (there, w + h rounds back to w).
for i in (1, 2):
    assert_gradient_scales(lambda x, w, b: BatchNorm.apply(x, w, b, 1e-5), [tl.randn(5, 3), tl.randn(3), tl.randn(3)], i)
print("BatchNorm: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a5_attention", "test_batchnorm", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "batch_norm_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. Running statistics and evaluation mode
#
# `batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)` returns
# `(y, running_mean, running_var)`, as `torch.nn.functional.batch_norm` does:
#
# - **training**: $y$ is `BatchNorm.apply(x, weight, bias, eps)`, and the running statistics
#   move towards the batch's: $\hat\mu \leftarrow (1 - m)\hat\mu + m\mu$,
#   $\hat\sigma^2 \leftarrow (1 - m)\hat\sigma^2 + m\frac{N}{N-1}\sigma^2$ (the *unbiased*
#   variance here, as in PyTorch);
# - **evaluation**: $y = (x - \hat\mu)/\sqrt{\hat\sigma^2 + \epsilon}\,\gamma + \beta$ with the
#   running statistics, which stay as they are: a sample's output must not depend on the rest
#   of its batch.

# %% nbgrader={"grade": false, "grade_id": "batch_norm", "locked": false, "schema_version": 3, "solution": true}
def batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps):
    ### BEGIN SOLUTION
    if training:
        n = x.shape[0]
        mean = x.mean(0)
        var = ((x - mean) * (x - mean)).mean(0)
        running_mean = running_mean * (1 - momentum) + mean * momentum
        running_var = running_var * (1 - momentum) + var * (momentum * n / (n - 1))
        return BatchNorm.apply(x, weight, bias, eps), running_mean, running_var
    y = (x - running_mean) / (running_var + eps).sqrt() * weight + bias
    return y, running_mean, running_var
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_batchnorm_eval", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.tensor([[1.0], [3.0]])
stats = tl.zeros(1), tl.ones(1)
y, mean, var = batch_norm(x, *stats, tl.ones(1), tl.zeros(1), True, 0.5, 0.0)
assert np.allclose(mean.numpy(), [1.0]) and np.allclose(var.numpy(), [1.5])
y, _, _ = batch_norm(tl.tensor([[5.0]]), mean, var, tl.ones(1), tl.zeros(1), False, 0.5, 0.0)
assert_close(y.numpy(), [[4.0 / math.sqrt(1.5)]])
print("batch_norm: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a5_attention", "test_batchnorm_eval", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "layernorm_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. LayerNorm
#
# `LayerNorm.apply(x, weight, bias, eps)` normalizes over the **last** dimension of `x`
# (shape $(*, D)$; `weight` and `bias` of shape $(D)$). The same formulas with means over the
# last dimension; the gradients of `weight` and `bias` sum over all the leading dimensions.

# %% nbgrader={"grade": false, "grade_id": "layernorm", "locked": false, "schema_version": 3, "solution": true}
class LayerNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        ### BEGIN SOLUTION
        centred = x - x.mean(-1, keepdim=True)
        rstd = 1.0 / ((centred * centred).mean(-1, keepdim=True) + eps).sqrt()
        x_hat = centred * rstd
        ctx.save_for_backward(x_hat, rstd, weight)
        return x_hat * weight + bias
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x_hat, rstd, weight = ctx.saved_tensors
        g = grad_output * weight
        mean_g, mean_gx = g.mean(-1, keepdim=True), (g * x_hat).mean(-1, keepdim=True)
        lead = tuple(range(x_hat.ndim - 1))
        grad_x = rstd * (g - mean_g - x_hat * mean_gx)
        return grad_x, (grad_output * x_hat).sum(lead), grad_output.sum(lead)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_layernorm", "locked": true, "points": 2, "schema_version": 3, "solution": false}
y = LayerNorm.apply(tl.tensor([[0.0, 2.0], [5.0, 1.0]]), tl.ones(2), tl.zeros(2), 0.0)
assert_close(y.numpy(), [[-1.0, 1.0], [1.0, -1.0]])
args = tl.randn(2, 3, 4, requires_grad=True), tl.randn(4, requires_grad=True), tl.randn(4, requires_grad=True)
assert gradcheck(lambda x, w, b: LayerNorm.apply(x, w, b, 1e-5), *args)
# Exact, not estimated: the output is linear in weight and bias.
for i in (1, 2):
    assert_gradient_scales(lambda x, w, b: LayerNorm.apply(x, w, b, 1e-5), [tl.randn(4, 5), tl.randn(5), tl.randn(5)], i)
print("LayerNorm: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a5_attention", "test_layernorm", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "softmax_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. Softmax
#
# `Softmax.apply(x)` over the last dimension: $s_i = e^{x_i - m} / \sum_j e^{x_j - m}$ with
# $m = \max_j x_j$ (subtracting the max keeps $e^x$ from overflowing for logits in the
# hundreds). Backward: $\partial L/\partial x = s \odot (G - \sum_j G_j s_j)$.

# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true}
class Softmax(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        e = (x - x.amax(-1, keepdim=True)).exp()
        s = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(s)
        return s
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (s,) = ctx.saved_tensors
        return s * (grad_output - (grad_output * s).sum(-1, keepdim=True))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_softmax", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert_close(Softmax.apply(tl.tensor([[0.0, math.log(3.0)]])).numpy(), [[0.25, 0.75]])
assert_close(Softmax.apply(tl.tensor([[1000.0, 1000.0]])).numpy(), [[0.5, 0.5]])
assert gradcheck(Softmax.apply, tl.randn(3, 5, requires_grad=True))
# Exact, not estimated: adding 2**20 to the incoming gradient changes nothing (a softmax sums
# to 1), but makes every value a finite difference subtracts about 2**20, rounded by far more
# than the difference it measures.
x, g = tl.randn(3, 5, requires_grad=True), tl.randn(3, 5)
Softmax.apply(x).backward(g)
plain, x.grad = x.grad.numpy().copy(), None
Softmax.apply(x).backward(g + 2.0**20)
s = Softmax.apply(x).detach().numpy()
assert_exact(x.grad, plain, atol=2 * np.finfo(float).eps * 2.0**20 * 7 * s)
print("Softmax: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a5_attention", "test_softmax", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "attention_md", "locked": true, "schema_version": 3, "solution": false}
# ## 5. Scaled dot-product attention
#
# `Attention.apply(q, k, v, causal)` with `q` of shape $(*, L, E)$, `k` $(*, S, E)$ and `v`
# $(*, S, E_v)$ returns $P V$, shape $(*, L, E_v)$, where
#
# $$P = \mathrm{softmax}\!\left(\frac{Q K^T}{\sqrt{E}} + M\right)$$
#
# (softmax over the keys, the last dimension). With `causal=True`, $M_{ij} = -\infty$ for
# $j > i$ (query $i$ may not see later keys) and 0 elsewhere; the mask goes in **before** the
# softmax, so each row still sums to 1. With `causal=False`, $M = 0$. Backward returns the
# gradients of `q`, `k` and `v`: with $G$ the gradient of the output,
# $\partial L/\partial V = P^T G$, $\partial L/\partial P = G V^T$, the softmax backward gives
# $\partial L/\partial S$ for the scaled scores, and the scale appears once more in
# $\partial L/\partial Q$ and $\partial L/\partial K$. `t.transpose(-2, -1)` swaps the last two
# dimensions; `@` multiplies batches of matrices.

# %% nbgrader={"grade": false, "grade_id": "attention", "locked": false, "schema_version": 3, "solution": true}
class Attention(Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        ### BEGIN SOLUTION
        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.transpose(-2, -1)) * scale
        if causal:
            upper = np.triu(np.ones((q.shape[-2], k.shape[-2]), dtype=bool), k=1)
            scores = scores + tl.tensor(np.where(upper, -np.inf, 0.0))
        e = (scores - scores.amax(-1, keepdim=True)).exp()
        p = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(q, k, v, p)
        ctx.scale = scale
        return p @ v
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        q, k, v, p = ctx.saved_tensors
        grad_v = p.transpose(-2, -1) @ grad_output
        grad_p = grad_output @ v.transpose(-2, -1)
        grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True)) * ctx.scale
        return grad_s @ k, grad_s.transpose(-2, -1) @ q, grad_v
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_attention", "locked": true, "points": 3, "schema_version": 3, "solution": false}
q = tl.tensor([[[1.0, 0.0], [0.0, 1.0]]])
out = Attention.apply(q, q, tl.tensor([[[1.0, 2.0], [3.0, 4.0]]]), True)
assert np.allclose(out.numpy()[0, 0], [1.0, 2.0])  # the first query only sees the first key
qkv = [tl.randn(2, 4, 3, requires_grad=True) for _ in range(3)]
assert gradcheck(lambda q, k, v: Attention.apply(q, k, v, True), *qkv)
# Exact, not estimated: attention is linear in the values, so their gradient must not change when
# they are scaled by 2**50 (there, v + h rounds back to v).
assert_gradient_scales(lambda q, k, v: Attention.apply(q, k, v, True), [tl.randn(2, 4, 3), tl.randn(2, 4, 3), tl.randn(2, 4, 2)], 2)
print("Attention: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a5_attention", "test_attention", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lstm_md", "locked": true, "schema_version": 3, "solution": false}
# ## 6. The backward pass of an LSTM cell
#
# One LSTM step after its matmuls: from the gate pre-activations $z$, shape $(N, 4H)$, and the
# previous cell state $c_{t-1}$, shape $(N, H)$, the gates in PyTorch's order
# $i = \sigma(z_i)$, $f = \sigma(z_f)$, $g = \tanh(z_g)$, $o = \sigma(z_o)$ (four blocks of $H$
# columns), then $c_t = f \odot c_{t-1} + i \odot g$ and $h_t = o \odot \tanh(c_t)$. The forward
# is written for you: it returns $(h_t, c_t)$ stacked, shape $(2, N, H)$, so `grad_output[0]`
# is $G_h$ and `grad_output[1]` is $G_c$. Write the backward: the gradients of `z` (the four
# gate blocks side by side, `tl.cat([...], dim=-1)`) and of `c_prev`. The cell state gets
# gradient from $G_c$ directly and from $G_h$ through $\tanh(c_t)$.

# %% nbgrader={"grade": false, "grade_id": "lstm_cell", "locked": false, "schema_version": 3, "solution": true}
class LSTMCell(Function):
    @staticmethod
    def forward(ctx, z, c_prev):
        size = c_prev.shape[-1]
        i, f = z[:, :size].sigmoid(), z[:, size : 2 * size].sigmoid()
        g, o = z[:, 2 * size : 3 * size].tanh(), z[:, 3 * size :].sigmoid()
        c = f * c_prev + i * g
        tanh_c = c.tanh()
        ctx.save_for_backward(i, f, g, o, c_prev, tanh_c)
        return tl.stack([o * tanh_c, c])

    @staticmethod
    def backward(ctx, grad_output):
        i, f, g, o, c_prev, tanh_c = ctx.saved_tensors
        grad_h, grad_c = grad_output[0], grad_output[1]
        ### BEGIN SOLUTION
        delta_c = grad_c + grad_h * o * (1.0 - tanh_c * tanh_c)
        grad_z = tl.cat(
            [
                delta_c * g * i * (1.0 - i),
                delta_c * c_prev * f * (1.0 - f),
                delta_c * i * (1.0 - g * g),
                grad_h * tanh_c * o * (1.0 - o),
            ],
            dim=-1,
        )
        return grad_z, delta_c * f
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_lstm_cell", "locked": true, "points": 2, "schema_version": 3, "solution": false}
assert LSTMCell.apply(tl.zeros(3, 8), tl.ones(3, 2)).shape == (2, 3, 2)
assert gradcheck(LSTMCell.apply, tl.randn(3, 8, requires_grad=True), tl.randn(3, 2, requires_grad=True))
# Exact, not estimated: the new cell state is linear in the old one, so with a gradient on the
# cell state only, the gradient of c_prev must not change when c_prev is scaled by 2**50.
grad = tl.tensor(np.stack([np.zeros((3, 2)), np.arange(1.0, 7.0).reshape(3, 2)]))
assert_gradient_scales(LSTMCell.apply, [tl.randn(3, 8), tl.randn(3, 2)], 1, grad_output=grad)
print("LSTMCell: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a5_attention", "test_lstm_cell", globals())
### END HIDDEN TESTS
