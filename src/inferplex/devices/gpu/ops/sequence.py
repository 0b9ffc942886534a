"""Lowerings: the recurrent layers RNN, GRU and LSTM, every direction, layout and ONNX activation.

Each layer runs as a Python loop over time steps of batched torch ops: the input
projections of all steps are one matmul up front, and each step adds the
recurrent projection and applies the gates, as ONNX writes them (gate order
i, o, f, c for LSTM and z, r, h for GRU; ``clip`` bounds the gates' inputs;
``linear_before_reset``, ``input_forget`` and peepholes included).
``sequence_lens`` masks the steps past each batch row's length: the state stops
changing and Y is zero there, and the reverse direction, walked from the last
step down, starts each row at its own last valid step.  A row of length 0 gets
zero final states, as ONNX Runtime gives it.  Cells with a projection
or a different number of activations than the op takes are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops._common import FLOAT_DTYPES, attrs_reason, dtype_reason, first_reason, text
from inferplex.devices.gpu.registry import NodeInfo, register

Activation = Callable[[torch.Tensor], torch.Tensor]

# name -> (needs alpha, needs beta, default alpha, default beta, builder).  ONNX names no defaults for
# the recurrent ops' activations; these are ONNX Runtime's: LeakyRelu, HardSigmoid and Elu take their
# own op's defaults, Affine, ThresholdedRelu and ScaledTanh take 0 for a missing alpha or beta.
_ACTIVATIONS: dict[str, tuple[bool, bool, float, float, Callable[[float, float], Activation]]] = {
    "Relu": (False, False, 0, 0, lambda a, b: torch.relu),
    "Tanh": (False, False, 0, 0, lambda a, b: torch.tanh),
    "Sigmoid": (False, False, 0, 0, lambda a, b: torch.sigmoid),
    "Softsign": (False, False, 0, 0, lambda a, b: F.softsign),
    "Softplus": (False, False, 0, 0, lambda a, b: F.softplus),
    "Affine": (True, True, 0.0, 0.0, lambda a, b: lambda x: a * x + b),
    "LeakyRelu": (True, False, 0.01, 0, lambda a, b: lambda x: F.leaky_relu(x, a)),
    "ThresholdedRelu": (True, False, 0.0, 0, lambda a, b: lambda x: torch.where(x > a, x, 0 * x)),
    "ScaledTanh": (True, True, 0.0, 0.0, lambda a, b: lambda x: a * torch.tanh(b * x)),
    "HardSigmoid": (True, True, 0.2, 0.5, lambda a, b: lambda x: torch.clamp(a * x + b, 0, 1)),
    "Elu": (True, False, 1.0, 0, lambda a, b: lambda x: F.elu(x, a)),
}
_DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
          "layout")
_EXTRA_ATTRS = {"RNN": (), "GRU": ("linear_before_reset",), "LSTM": ("input_forget",)}


def _directions(info: NodeInfo) -> int:
    return 2 if text(info.attr("direction", "forward")) == "bidirectional" else 1


def _activation_names(info: NodeInfo) -> list[str]:
    names = [text(n) for n in info.attr("activations", [])]
    return names or _DEFAULTS[info.op_type] * _directions(info)


def _recurrent_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, _ATTRS + _EXTRA_ATTRS[info.op_type]),
                          dtype_reason(info, (0, 1, 2, 3, 5, 6, 7), FLOAT_DTYPES))
    if reason is not None:
        return reason
    direction = text(info.attr("direction", "forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        return f"{info.op_type} direction {direction!r} is not forward, reverse or bidirectional"
    names = _activation_names(info)
    expected = len(_DEFAULTS[info.op_type]) * _directions(info)
    if len(names) != expected:
        return f"{info.op_type} has {len(names)} activations; a {direction} one takes {expected}"
    unknown = [n for n in names if n not in _ACTIVATIONS]
    if unknown:
        return f"{info.op_type} activation(s) {', '.join(unknown)} not supported"
    return None


def _activations(info: NodeInfo) -> list[Activation]:
    """The activation functions in attribute order, alphas and betas consumed by those that take them."""
    alphas = list(info.attr("activation_alpha", []))
    betas = list(info.attr("activation_beta", []))
    result = []
    for name in _activation_names(info):
        needs_alpha, needs_beta, alpha, beta, build = _ACTIVATIONS[name]
        if needs_alpha and alphas:
            alpha = alphas.pop(0)
        if needs_beta and betas:
            beta = betas.pop(0)
        result.append(build(alpha, beta))
    return result


def _clipped(fn: Activation, clip: float | None) -> Activation:
    if clip is None:
        return fn
    return lambda x: fn(torch.clamp(x, -clip, clip))


def _rnn_cell(fns: Sequence[Activation], hidden: int, extra: dict[str, Any]) -> Callable[..., Any]:
    (f,) = fns

    def step(xw: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None, r: torch.Tensor,
             rb: torch.Tensor, p: torch.Tensor | None) -> tuple[torch.Tensor, None]:
        return f(xw + h @ r.t() + rb), None

    return step


def _gru_cell(fns: Sequence[Activation], hidden: int, extra: dict[str, Any]) -> Callable[..., Any]:
    f, g = fns
    before_reset = bool(extra.get("linear_before_reset", 0))

    def step(xw: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None, r: torch.Tensor,
             rb: torch.Tensor, p: torch.Tensor | None) -> tuple[torch.Tensor, None]:
        xz, xr, xh = xw.split(hidden, dim=-1)
        rz, rr, rh = r.split(hidden, dim=0)
        bz, br, bh = rb.split(hidden, dim=-1)
        z = f(xz + h @ rz.t() + bz)
        reset = f(xr + h @ rr.t() + br)
        if before_reset:
            candidate = g(xh + reset * (h @ rh.t() + bh))
        else:
            candidate = g(xh + (reset * h) @ rh.t() + bh)
        return (1 - z) * candidate + z * h, None

    return step


def _lstm_cell(fns: Sequence[Activation], hidden: int, extra: dict[str, Any]) -> Callable[..., Any]:
    f, g, h_fn = fns
    input_forget = bool(extra.get("input_forget", 0))

    def step(xw: torch.Tensor, h: torch.Tensor, c: torch.Tensor, r: torch.Tensor, rb: torch.Tensor,
             p: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        gates = xw + h @ r.t() + rb
        gi, go, gf, gc = gates.split(hidden, dim=-1)
        pi, po, pf = p.split(hidden, dim=-1) if p is not None else (None, None, None)
        i = f(gi + pi * c if pi is not None else gi)
        forget = 1 - i if input_forget else f(gf + pf * c if pf is not None else gf)
        c_new = forget * c + i * g(gc)
        o = f(go + po * c_new if po is not None else go)
        return o * h_fn(c_new), c_new

    return step


_CELLS = {"RNN": _rnn_cell, "GRU": _gru_cell, "LSTM": _lstm_cell}


def _run_direction(step: Callable[..., Any], x: torch.Tensor, w: torch.Tensor, r: torch.Tensor,
                   wb: torch.Tensor, rb: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None,
                   p: torch.Tensor | None, lengths: torch.Tensor | None,
                   reverse: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One direction over [seq, batch, input] ``x``: Y [seq, batch, hidden], the last H and C."""
    projected = x @ w.t() + wb  # every step's input projection at once
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    ys: list[torch.Tensor] = [h] * x.shape[0]
    for t in steps:
        h_new, c_new = step(projected[t], h, c, r, rb, p)
        if lengths is None:
            h, c, ys[t] = h_new, c_new, h_new
            continue
        valid = (lengths > t).unsqueeze(-1)
        h = torch.where(valid, h_new, h)
        if c is not None:
            c = torch.where(valid, c_new, c)
        ys[t] = torch.where(valid, h_new, torch.zeros_like(h_new))
    if lengths is not None:
        # A row of length 0 runs no step: ONNX Runtime gives it zero states, not the initial ones.
        ran = (lengths > 0).unsqueeze(-1)
        h = torch.where(ran, h, torch.zeros_like(h))
        c = None if c is None else torch.where(ran, c, torch.zeros_like(c))
    return torch.stack(ys), h, c


def _recurrent(info: NodeInfo) -> Callable[..., Any]:
    op = info.op_type
    gates, dirs = _GATES[op], _directions(info)
    direction = text(info.attr("direction", "forward"))
    layout = int(info.attr("layout", 0))
    clip = info.attr("clip")
    fns = [_clipped(fn, clip) for fn in _activations(info)]
    per_dir = len(_DEFAULTS[op])
    extra = {name: info.attr(name, 0) for name in _EXTRA_ATTRS[op]}
    outputs = len(info.node.outputs)

    def recurrent(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor, b: torch.Tensor | None = None,
                  lengths: torch.Tensor | None = None, h0: torch.Tensor | None = None,
                  c0: torch.Tensor | None = None, p: torch.Tensor | None = None) -> Any:
        if layout:
            x = x.transpose(0, 1)
            h0 = None if h0 is None else h0.transpose(0, 1)
            c0 = None if c0 is None else c0.transpose(0, 1)
        hidden = r.shape[-1]
        batch = x.shape[1]
        zeros = x.new_zeros((dirs, batch, hidden))
        h0 = zeros if h0 is None else h0
        c0 = (zeros if c0 is None else c0) if op == "LSTM" else None
        b = x.new_zeros((dirs, 2 * gates * hidden)) if b is None else b
        ys, hs, cs = [], [], []
        for d in range(dirs):
            step = _CELLS[op](fns[d * per_dir:(d + 1) * per_dir], hidden, extra)
            reverse = direction == "reverse" or d == 1
            y, h, c = _run_direction(step, x, w[d], r[d], b[d, :gates * hidden], b[d, gates * hidden:],
                                     h0[d], None if c0 is None else c0[d], None if p is None else p[d],
                                     lengths, reverse)
            ys.append(y)
            hs.append(h)
            cs.append(c)
        y_all = torch.stack(ys, dim=1)  # [seq, dirs, batch, hidden]
        h_all = torch.stack(hs)
        c_all = torch.stack([c for c in cs if c is not None]) if op == "LSTM" else None
        if layout:
            y_all = y_all.permute(2, 0, 1, 3)
            h_all = h_all.transpose(0, 1)
            c_all = None if c_all is None else c_all.transpose(0, 1)
        if outputs == 1:  # one declared output is one value, not a 1-tuple
            return y_all
        return (y_all, h_all, c_all)[:outputs]

    return recurrent


for _op in ("RNN", "GRU", "LSTM"):
    register(_op, versions=(7, None), supports=_recurrent_supports)(_recurrent)
