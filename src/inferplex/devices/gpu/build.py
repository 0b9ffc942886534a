"""Emits the fx graph of a lowered model node by node (see :mod:`.lower` and :mod:`.optimize`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
import torch
import torch.fx

from inferplex.devices.gpu._activation_fusions import Gelu, gelu
from inferplex.devices.gpu._norm_fusions import Norm, layer_norm, rms_norm
from inferplex.devices.gpu._qdq_attention import QuantizedAttention
from inferplex.devices.gpu._qdq_conv import QuantizedConv
from inferplex.devices.gpu._qdq_gelu import QuantizedGelu
from inferplex.devices.gpu._qdq_pairs import (
    QuantizeDequantize,
)
from inferplex.devices.gpu._quantized_fusions import (
    DynamicConv,
    DynamicMatMul,
    QuantizedMatMul,
)
from inferplex.devices.gpu._residual_layer_norm import ResidualLayerNorm
from inferplex.devices.gpu.ops import nn
from inferplex.devices.gpu.ops._fake_quantize import FakeQuantizeStep, conv_fake_quantize, quantize_dequantize
from inferplex.devices.gpu.ops._fused_quantized import (
    DYNAMIC_CONV_WEIGHT_FACTOR,
    dequantized_conv,
    dynamic_quantize_centered,
    dynamic_quantized_conv,
    dynamic_quantized_linear,
    quantized_linear,
    quantized_linear_arrays,
)
from inferplex.devices.gpu.ops._qdq_attention import quantized_attention, scores_table
from inferplex.devices.gpu.ops._qdq_conv import quantized_conv
from inferplex.devices.gpu.ops._qdq_gelu import gelu_table, quantized_gelu
from inferplex.devices.gpu.ops._residual_layer_norm import residual_layer_norm
from inferplex.devices.gpu.ops.control_flow import outer_values
from inferplex.devices.gpu.optimize import (
    Attention,
    ConvRelu,
    Fusions,
    WeightCache,
    fold_conv_bn,
    linear,
    scaled_dot_product_attention,
    to_channels_last,
)
from inferplex.devices.gpu.tensors import VIEWED_NUMPY_DTYPES, numpy_to_torch, torch_to_numpy
from inferplex.errors import CompileError, ModelError

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["Builder", "cast_to", "cast_value", "keeps_float32"]

# Ops that create floating tensors of a type given by an attribute; under a
# reduced precision hint their float32 outputs are brought to the compute type.
_TYPE_MAKERS = {"Cast", "CastLike", "ConstantOfShape", "EyeLike", "Range", "RandomNormal",
                "RandomUniform", "RandomNormalLike", "RandomUniformLike"}


_KEPT_FLOAT32 = {"NonMaxSuppression": (0, 1, 3, 4), "RoiAlign": (1,)}
"""Inputs that decide discrete results: the boxes, scores and thresholds that say which boxes
NonMaxSuppression keeps, the regions that say where RoiAlign samples."""


def keeps_float32(value: ir.Value) -> bool:
    """Whether ``value`` stays float32 under an f16/bf16 hint: only inputs of :data:`_KEPT_FLOAT32`
    read it.  In f16 a score or threshold rounds by about 1e-3 and a coordinate of a few hundred
    by a fraction of a pixel, which changes which boxes are kept and where regions are read."""
    uses = list(value.uses())
    return bool(uses) and all(use.idx in _KEPT_FLOAT32.get(use.node.op_type, ()) for use in uses)


def _pick(result: Any, index: int) -> Any:
    """Output ``index`` of a node whose lowering returned one value or a tuple (a list is one
    value: a sequence)."""
    if isinstance(result, tuple):
        return result[index] if index < len(result) else None
    return result if index == 0 else None


def cast_to(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def cast_value(value: Any, dtype: torch.dtype) -> Any:
    """:func:`cast_to` for a sequence (a list: each tensor cast) or an optional (None stays None)."""
    if isinstance(value, list):
        return [cast_to(tensor, dtype) for tensor in value]
    return None if value is None else cast_to(value, dtype)


def _lower_float32(tensor: Any, dtype: torch.dtype) -> Any:
    if isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32:
        return tensor.to(dtype)
    return tensor


class Builder:
    """Emits the fx graph node by node; holds the value -> fx node map."""

    def __init__(self, analysis: Analysis, device: torch.device, compute_dtype: torch.dtype | None,
                 cache: WeightCache, fusions: Fusions):
        self.analysis = analysis
        self.device = device
        self.compute_dtype = compute_dtype
        self.cache = cache
        self.fusions = fusions
        self._emitters = self._fused_emitters()
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.env: dict[ir.Value, torch.fx.Node] = {}
        self.buffer_nodes: dict[Any, torch.fx.Node] = {}
        self.fake_quantized: dict[tuple[Any, ...], torch.fx.Node] = {}
        """One fake-quantize call per float value and numbers, whichever pairs end in it."""

    def buffer(self, key: Any, sources: Iterable[ir.Value | None], make_array: Callable[[], np.ndarray],
               channels_last: bool = False, keep_type: bool = False) -> torch.fx.Node:
        """A buffer of the module, taken from (or put in) the shared cache when its sources allow.

        ``keep_type``: float32 stays float32 under a reduced precision (quantization scales).
        """
        if key in self.buffer_nodes:
            return self.buffer_nodes[key]

        def make() -> torch.Tensor:
            array = make_array()
            tensor = numpy_to_torch(array)
            # Never alias the model's own arrays; numpy_to_torch copied read-only ones already.
            # bfloat16 and float8 tensors are views of the array's bits (and have no ``numpy()``).
            shared = np.asarray(array).dtype.name in VIEWED_NUMPY_DTYPES or (
                tensor.numel() > 0 and np.may_share_memory(array, tensor.numpy()))
            if self.compute_dtype is not None and tensor.dtype in (torch.float32, torch.float64) \
                    and not keep_type:
                tensor, shared = tensor.to(self.compute_dtype), False
            tensor = tensor.to(self.device, copy=shared)
            if channels_last and tensor.dim() == 4:
                tensor = tensor.contiguous(memory_format=torch.channels_last)
            return tensor

        name = f"const_{len(self.buffer_nodes)}"
        self.root.register_buffer(name, self.cache.get(key, sources, make))
        node = self.buffer_nodes[key] = self.graph.get_attr(name)
        return node

    def constant(self, value: ir.Value) -> torch.fx.Node:
        return self.buffer(("value", value), (value,), lambda: self.analysis.constants[value],
                           value in self.fusions.channels_last_weights, keeps_float32(value))

    def arg(self, value: ir.Value | None) -> torch.fx.Node | None:
        if value is None:
            return None
        if value in self.analysis.constants:
            return self.constant(value)
        if value not in self.env:
            raise ModelError(f"value {value.name!r} is used before it is produced; "
                             "the graph must be topologically sorted")
        return self.env[value]

    def call(self, name: str, node: ir.Node, fn: Callable[..., Any], args: tuple[Any, ...]) -> torch.fx.Node:
        # Lowerings marked ``takes_device`` make a tensor no input places: they get the device.
        kwargs: dict[str, Any] | None = None
        if getattr(fn, "takes_device", False):
            kwargs = {"device": self.device}
        call = self.graph.call_function(fn, args, kwargs)
        call.meta.update(onnx_name=name, onnx_op=node.op_type)
        return call

    def _fused_emitters(self) -> tuple[tuple[Mapping[str, Any], Callable[[str, ir.Node, Any], None]], ...]:
        """The planned fusions (friendly name of the node that emits each -> its plan) with the
        method that emits it, in the order a node is looked up."""
        fusions = self.fusions
        return ((fusions.conv_relu, self._emit_conv_relu), (fusions.conv_bn, self._emit_conv_bn),
                (fusions.linear, self._emit_linear), (fusions.quantized_matmul, self._emit_quantized_matmul),
                (fusions.quantize_dequantize, self._emit_quantize_dequantize),
                (fusions.quantized_attention, self._emit_quantized_attention),
                (fusions.quantized_gelu, self._emit_quantized_gelu),
                (fusions.quantized_conv, self._emit_quantized_conv),
                (fusions.residual_layer_norm, self._emit_residual_layer_norm),
                (fusions.centered_quantizers, self._emit_centered_quantizer),
                (fusions.dynamic_conv, self._emit_dynamic_conv),
                (fusions.dynamic_matmul, self._emit_dynamic_matmul),
                (fusions.gelu, self._emit_gelu), (fusions.norm, self._emit_norm),
                (fusions.attention, self._emit_attention))

    def emit(self, name: str, node: ir.Node) -> None:
        for planned, emit_fused in self._emitters:
            if name in planned:
                emit_fused(name, node, planned[name])
                return
        if node.op_type == "DequantizeLinear" and node.domain in ("", "ai.onnx") \
                and all(v is None or v in self.analysis.constants for v in node.inputs):
            self._emit_constant_dequantize(name, node)
            return
        # If/Loop/Scan bodies read enclosing values implicitly: they follow the node's own inputs.
        args = [self.arg(v) for v in (*node.inputs, *outer_values(node))]
        if name in self.fusions.channels_last_convs:
            args[0] = self.graph.call_function(to_channels_last, (args[0],))
        call = self.call(name, node, self.analysis.functions[name], tuple(args))
        outputs = list(node.outputs)
        for index, value in enumerate(outputs):
            out = call if len(outputs) == 1 else self.graph.call_function(_pick, (call, index))
            if self.compute_dtype is not None and node.op_type in _TYPE_MAKERS:
                out = self.graph.call_function(_lower_float32, (out, self.compute_dtype))
            out.meta.update(onnx_name=name, onnx_op=node.op_type)
            self.env[value] = out

    def _emit_gelu(self, name: str, node: ir.Node, formula: Gelu) -> None:
        self.env[formula.output] = self.call(name, node, gelu, (self.arg(formula.input), formula.approximate))

    def _emit_attention(self, name: str, node: ir.Node, found: Attention) -> None:
        values = (found.query, found.key_t, found.value, found.mask)
        self.env[found.output] = self.call(name, node, scaled_dot_product_attention,
                                           (*map(self.arg, values), found.scale))

    def _emit_conv_bn(self, name: str, conv: ir.Node, bn: ir.Node) -> None:
        weight, bias = self._folded_conv_bn(name, conv, bn)
        self.env[bn.outputs[0]] = self.call(name, conv, self.analysis.functions[name],
                                            (self._conv_input(name, conv), weight, bias))

    def _emit_conv_relu(self, name: str, end: ir.Node, found: ConvRelu) -> None:
        """The Conv (its BatchNormalization folded), the Add and the Relu (or the pair whose range
        holds it, the Relu then run in the convolution's epilogue, see
        :func:`~inferplex.devices.gpu.ops._fake_quantize.conv_fake_quantize`) up to ``end``: one call
        named after the Conv."""
        name, conv = found.conv_name, found.conv
        bn = self.fusions.conv_bn.get(name)
        if bn is not None:
            weight, bias = self._folded_conv_bn(name, conv, bn)
        else:
            weight = self.arg(conv.inputs[1])
            bias = self.arg(conv.inputs[2]) if len(conv.inputs) > 2 else None
        other = self.arg(found.other) if found.add is not None else None
        run = nn.conv_relu(self.analysis.infos[name])
        args: tuple[Any, ...] = (self._conv_input(name, conv), weight, bias, other)
        if found.quantize is not None:
            run, args = conv_fake_quantize(run), (*args, *self._fake_quantize_args(found.quantize))
        self.env[end.outputs[0]] = self.call(name, conv, run, args)

    def _conv_input(self, name: str, conv: ir.Node) -> Any:
        x = self.arg(conv.inputs[0])
        if name in self.fusions.channels_last_convs:
            return self.graph.call_function(to_channels_last, (x,))
        return x

    def _folded_conv_bn(self, name: str, conv: ir.Node, bn: ir.Node) -> tuple[Any, Any]:
        """The device tensors of the Conv's weight and bias with ``bn`` folded in."""
        constants = self.analysis.constants
        weight_value = conv.inputs[1]
        bias_value = conv.inputs[2] if len(conv.inputs) > 2 else None
        param_values = [v for v in bn.inputs[1:5] if v is not None]
        if weight_value is None or len(param_values) != 4:
            raise CompileError(f"{name}: a Conv fused with a BatchNormalization needs a constant weight "
                               "and four constant BatchNormalization parameters")
        sources = (weight_value, bias_value, *bn.inputs[1:5])
        folded: list[np.ndarray] = []

        def arrays() -> list[np.ndarray]:
            if not folded:  # computed once, only when a tensor is not cached yet
                folded.extend(fold_conv_bn(constants[weight_value],
                                           None if bias_value is None else constants[bias_value],
                                           bn, [constants[v] for v in param_values]))
            return folded

        weight = self.buffer(("conv_bn", name, "weight"), sources, lambda: arrays()[0],
                             name in self.fusions.channels_last_convs)
        bias = self.buffer(("conv_bn", name, "bias"), sources, lambda: arrays()[1])
        return weight, bias

    def _emit_norm(self, name: str, node: ir.Node, found: Norm) -> None:
        weight = None if found.weight is None else self.arg(found.weight)
        if found.kind == "layer":
            bias = None if found.bias is None else self.arg(found.bias)
            args: tuple[Any, ...] = (self.arg(found.input), weight, bias, found.epsilon)
            self.env[found.output] = self.call(name, node, layer_norm, args)
        else:
            args = (self.arg(found.input), weight, found.epsilon)
            self.env[found.output] = self.call(name, node, rms_norm, args)

    def _emit_linear(self, name: str, matmul: ir.Node, found: tuple[ir.Node, int]) -> None:
        add, bias_index = found
        args = (self.arg(matmul.inputs[0]), self.arg(matmul.inputs[1]), self.arg(add.inputs[bias_index]))
        self.env[add.outputs[0]] = self.call(name, matmul, linear, args)

    def _emit_quantized_matmul(self, name: str, node: ir.Node, found: QuantizedMatMul) -> None:
        constants = self.analysis.constants
        zero = 0 if found.activation_zero is None else int(constants[found.activation_zero].reshape(-1)[0])
        offset = (0 if found.activation_signed else 128) - zero
        sources = (found.weight, found.weight_scale, found.activation_scale, found.activation_zero)
        arrays: list[np.ndarray] = []

        def made(index: int) -> np.ndarray:
            if not arrays:  # computed once, only when a tensor is not cached yet
                arrays.extend(quantized_linear_arrays(constants[found.weight], found.transposed,
                                                      constants[found.activation_scale],
                                                      constants[found.weight_scale], offset))
            return arrays[index]

        weight, correction, scales = (
            self.buffer(("quantized_matmul", name, i), sources, functools.partial(made, i), keep_type=True)
            if i != 1 or offset else None for i in range(3))
        bias_value = found.bias
        if bias_value is None:
            bias = None
        elif found.requantize is not None:  # added to the requantized output as the Add adds it
            bias = self.arg(bias_value)
        else:
            bias = self.buffer(("value", bias_value, "float32"), (bias_value,), lambda: constants[bias_value],
                               keep_type=True)
        args: tuple[Any, ...] = (weight, correction, scales, bias, self.compute_dtype or torch.float32)
        if found.source is None:
            args = (self.arg(found.activation), *args, None, 0)
        else:  # quantize the float input in the call (see QuantizedMatMul)
            scale_value = found.activation_scale
            scale = self.buffer(("value", scale_value, "float32"), (scale_value,),
                                lambda: constants[scale_value].reshape(()), keep_type=True)
            args = (self.arg(found.source), *args, scale, zero - (0 if found.activation_signed else 128))
        steps = tuple(None if pair is None else self._fake_quantize_args(pair)
                      for pair in (found.requantize, found.quantize))
        gelu = found.gelu
        if gelu is None:
            self.env[found.output] = self.call(name, node, quantized_linear, (*args, *steps))
            return
        output = gelu.output if gelu.quantizer is None else gelu.quantizer.outputs[0]
        table = self._gelu_table(name, found)
        self.env[output] = self.call(name, node, quantized_linear, (*args, *steps, table))

    def _gelu_table(self, name: str, found: QuantizedMatMul) -> torch.fx.Node:
        """The table of the GELU formula an int8 matmul computes (see :func:`tabled_gelus`): the
        formula's call, run once here on the device, at each level of the matmul's last pair."""
        gelu, pair = found.gelu, found.quantize
        assert gelu is not None and pair is not None

        def make() -> np.ndarray:
            with torch.no_grad():
                table = gelu_table(self._step_tensors(pair), self.compute_dtype or torch.float32,
                                   *self._gelu_numbers(gelu, self._step_tensors))
            return torch_to_numpy(table.cpu())

        pairs = (pair, gelu.erf, gelu.sum, gelu.product)
        sources = (gelu.factor, gelu.one, gelu.half, *(p.scale for p in pairs if p is not None),
                   *(gelu.quantizer.inputs[1:] if gelu.quantizer is not None else ()))
        return self.buffer(("gelu_table", name), sources, make, keep_type=True)

    def _step_tensors(self, found: QuantizeDequantize) -> FakeQuantizeStep:
        """:meth:`_fake_quantize_args` as tensors and numbers, for a call run while building."""
        value = float(self.analysis.constants[found.scale].reshape(()))
        scale = torch.tensor(value, dtype=torch.float32, device=self.device)
        return scale, value, found.zero_point, found.low, found.high

    def _emit_quantized_attention(self, name: str, node: ir.Node, found: QuantizedAttention) -> None:
        """The QDQ attention chain as one call named after its second MatMul; the scale is the
        constant as the program holds it (rounded to the compute type)."""
        factor = None
        if found.factor is not None:
            array = self.analysis.constants[found.factor].reshape(-1)[:1].astype(np.float32)
            factor = float(torch.from_numpy(array).to(self.compute_dtype or torch.float32)[0])
        steps = tuple(None if pair is None else self._fake_quantize_args(pair) for pair in (
            found.scores, found.scaled, found.masked, found.probabilities, found.context))
        mask = None if found.mask is None else self.arg(found.mask)
        table = None if found.scores is None else self._scores_table(name, found, factor)
        args = (self.arg(found.query), self.arg(found.key_t), self.arg(found.value), mask, factor,
                found.divide, steps, table)
        self.env[found.output] = self.call(name, node, quantized_attention, args)

    def _scores_table(self, name: str, found: QuantizedAttention, factor: float | None) -> torch.fx.Node:
        """The attention's scaled scores at each level of its scores' pair (see
        :func:`scores_table`), computed once here on the device."""
        pairs = (found.scores, found.scaled)

        def make() -> np.ndarray:
            steps = tuple(None if pair is None else self._step_tensors(pair) for pair in pairs)
            with torch.no_grad():
                table = scores_table(self.compute_dtype or torch.float32, factor, found.divide, steps)
            return torch_to_numpy(table.cpu())

        sources = (found.factor, *(pair.scale for pair in pairs if pair is not None))
        return self.buffer(("scores_table", name), sources, make, keep_type=True)

    def _emit_quantized_gelu(self, name: str, node: ir.Node, found: QuantizedGelu) -> None:
        """The QDQ GELU formula as one call named after its last Mul."""
        args = (self.arg(found.input), *self._gelu_numbers(found, self._fake_quantize_args))
        output = found.output if found.quantizer is None else found.quantizer.outputs[0]
        self.env[output] = self.call(name, node, quantized_gelu, args)

    def _gelu_numbers(self, found: QuantizedGelu,
                      step: Callable[[QuantizeDequantize], Any]) -> tuple[Any, ...]:
        """:func:`quantized_gelu`'s arguments after ``x``: the constants as the separate calls compute
        with them (a Div's in the compute type, a tensor operand; the Mul's and Add's in float32,
        numbers torch takes in float32), each pair's arguments by ``step``, and where the call
        writes the quantizer's 8-bit data, its numbers."""
        def number(value: ir.Value, rounded: bool) -> float:
            array = self.analysis.constants[value].reshape(-1)[:1].astype(np.float32)
            tensor = torch.from_numpy(array)
            return float(tensor.to(self.compute_dtype)[0] if rounded and self.compute_dtype is not None
                         else tensor[0])

        steps = tuple(None if pair is None else step(pair) for pair in (found.erf, found.sum, found.product))
        quantize = None if found.quantizer is None else self._quantize_numbers(found.quantizer)
        return (number(found.factor, found.divide), found.divide, number(found.one, False),
                number(found.half, False), steps, quantize)

    def _quantize_numbers(self, quantizer: ir.Node) -> tuple[float, int, torch.dtype]:
        """The scale, zero point and 8-bit type of a per-tensor QuantizeLinear of constant numbers,
        which a fused call runs on its result."""
        inputs, constants = quantizer.inputs, self.analysis.constants
        zero_value = inputs[2] if len(inputs) > 2 else None
        zero = 0 if zero_value is None else int(constants[zero_value].reshape(-1)[0])
        signed = zero_value is not None and constants[zero_value].dtype == np.int8
        return float(constants[inputs[1]].reshape(-1)[0]), zero, torch.int8 if signed else torch.uint8

    def _emit_residual_layer_norm(self, name: str, node: ir.Node, found: ResidualLayerNorm) -> None:
        """The residual Add and LayerNormalization (and a QDQ layer's pairs) as one call named after
        the normalization (see :mod:`._residual_layer_norm`); it binds the normalization's output to the
        fake-quantized value and, where an int8 matmul reads it, the QuantizeLinear's data."""
        name, norm = found.norm_name, found.norm
        attribute = norm.attributes.get("epsilon")
        epsilon = float(attribute.value) if attribute is not None else 1e-5
        steps = tuple(None if pair is None else self._fake_quantize_args(pair)
                      for pair in (found.sum_pair, found.output_pair))
        quantize = self._quantize_numbers(found.quantizer) if found.quantizer and found.writes_data else None
        args = (self.arg(found.first), self.arg(found.second), self.arg(norm.inputs[1]),
                self.arg(norm.inputs[2]), epsilon, *steps, quantize)
        call = self.call(name, norm, residual_layer_norm, args)
        if quantize is None or found.quantizer is None:
            self.env[found.output] = call
            return
        for index, value in enumerate((found.output, found.quantizer.outputs[0])):
            out = self.graph.call_function(_pick, (call, index))
            out.meta.update(onnx_name=name, onnx_op=norm.op_type)
            self.env[value] = out

    def _emit_quantized_conv(self, name: str, node: ir.Node, found: QuantizedConv) -> None:
        """A QDQ Conv, its pair and (where the chain has them) the Add and its pair as one call named
        after the Conv (see :mod:`._qdq_conv`)."""
        name, conv = found.conv_name, found.conv
        bias = self.arg(conv.inputs[2]) if len(conv.inputs) > 2 else None
        other = self.arg(found.other) if found.other is not None else None
        second = self._fake_quantize_args(found.second) if found.second is not None else None
        args = (self._conv_input(name, conv), self.arg(conv.inputs[1]), bias, other,
                self._fake_quantize_args(found.first), second)
        self.env[found.output] = self.call(name, conv, quantized_conv(self.analysis.infos[name]), args)

    def _emit_constant_dequantize(self, name: str, node: ir.Node) -> None:
        """A DequantizeLinear of constants too large to fold at analysis (a big quantized weight)
        runs once, here: its output is a buffer in the compute precision, like a folded one, not
        a dequantization on every run."""
        dequantize, constants = self.analysis.functions[name], self.analysis.constants

        def make() -> np.ndarray:
            with torch.no_grad():
                args = [None if v is None else numpy_to_torch(constants[v]) for v in node.inputs]
                return torch_to_numpy(dequantize(*args))

        value = node.outputs[0]
        self.env[value] = self.buffer(("dequantized", value), tuple(node.inputs), make,
                                      value in self.fusions.channels_last_weights, keeps_float32(value))

    def _emit_quantize_dequantize(self, name: str, node: ir.Node, found: QuantizeDequantize) -> None:
        """One fake-quantize call for the pair; its profiling record is the DequantizeLinear's,
        of type FakeQuantize (OpenVINO's name for the same operation).  Pairs that share their
        QuantizeLinear (one DequantizeLinear per consumer) share the call."""
        source = self.arg(found.source)
        if found.identity and source is not None:  # the source holds only values of the pair's grid
            self.env[found.output] = source
            return
        key = (found.source, found.scale, found.zero_point, found.low, found.high)
        call = self.fake_quantized.get(key)
        if call is None:
            args = (source, *self._fake_quantize_args(found))
            call = self.fake_quantized[key] = self.graph.call_function(quantize_dequantize, args)
            call.meta.update(onnx_name=name, onnx_op="FakeQuantize")
        self.env[found.output] = call

    def _fake_quantize_args(self, found: QuantizeDequantize) -> tuple[Any, ...]:
        """The arguments of :func:`quantize_dequantize` after the data: the scale as a float32
        buffer and a number, the zero point and the range."""
        scale_value = found.scale
        array = self.analysis.constants[scale_value].reshape(())
        scale = self.buffer(("value", scale_value, "float32"), (scale_value,), lambda: array, keep_type=True)
        return scale, float(array), found.zero_point, found.low, found.high

    def _emit_centered_quantizer(self, name: str, node: ir.Node, data: ir.Value) -> None:
        """DynamicQuantizeLinear handing centered float data to the dynamic convolutions (which
        then get no zero point, see :meth:`_emit_dynamic_conv`), dequantized where they run as
        float convolutions."""
        call = self.call(name, node, dynamic_quantize_centered,
                         (self.arg(node.inputs[0]), self._dequantized_input(data)))
        for index, value in enumerate(node.outputs):
            out = self.graph.call_function(_pick, (call, index))
            out.meta.update(onnx_name=name, onnx_op=node.op_type)
            self.env[value] = out

    def _dequantized_input(self, data: ir.Value) -> bool:
        """Whether the dynamic convolutions reading a centered quantizer's ``data`` run as float
        convolutions on its dequantized values (:func:`dequantized_conv`): in a reduced precision,
        where each one's scale is the quantizer's times a constant weight scale."""
        readers = [found for found in self.fusions.dynamic_conv.values() if found.conv.inputs[0] is data]
        return self.compute_dtype is not None and all(found.weight_scale is not None for found in readers)

    def _emit_dequantized_conv(self, found: DynamicConv) -> None:
        """A dynamic convolution as the float convolution of the dequantized input and the weight
        times its scale (see :meth:`_dequantized_input`)."""
        constants = self.analysis.constants
        weight_value, zero_value, scale_value = found.weight, found.weight_zero, found.weight_scale

        def scaled_weight() -> np.ndarray:
            weight = constants[weight_value].astype(np.float32)
            if zero_value is not None:
                zero = constants[zero_value].astype(np.float32).reshape(-1)
                weight -= zero.reshape((-1,) + (1,) * (weight.ndim - 1)) if zero.size > 1 else zero[0]
            return weight * constants[scale_value].astype(np.float32).reshape(())  # type: ignore[index]

        channels_last = found.conv_name in self.fusions.channels_last_convs
        weight = self.buffer(("dequantized_conv", weight_value, zero_value, scale_value),
                             (weight_value, zero_value, scale_value), scaled_weight, channels_last)
        bias_value = found.bias
        bias = None if bias_value is None else self.buffer(
            ("dequantized_conv", "bias", bias_value), (bias_value,),
            lambda: constants[bias_value].reshape(-1))
        info = self.analysis.infos[found.conv_name]
        run = dequantized_conv(nn.conv(info), nn.conv_relu(info), channels_last, found.relu)
        args = (self.arg(found.conv.inputs[0]), weight, bias, self.arg(found.residual))
        self.env[found.output] = self.call(found.conv_name, found.conv, run, args)

    def _emit_dynamic_conv(self, name: str, node: ir.Node, found: DynamicConv) -> None:
        conv = found.conv
        if conv.inputs[0] in self.fusions.centered_quantizers.values() \
                and self._dequantized_input(conv.inputs[0]):  # type: ignore[arg-type]
            self._emit_dequantized_conv(found)
            return
        constants, reduced = self.analysis.constants, self.compute_dtype is not None
        weight_value, zero_value = found.weight, found.weight_zero

        def centered_weight() -> np.ndarray:
            weight = constants[weight_value].astype(np.float32)
            if zero_value is not None:
                zero = constants[zero_value].astype(np.float32).reshape(-1)
                weight -= zero.reshape((-1,) + (1,) * (weight.ndim - 1)) if zero.size > 1 else zero[0]
            return weight * np.float32(DYNAMIC_CONV_WEIGHT_FACTOR) if reduced else weight

        channels_last = found.conv_name in self.fusions.channels_last_convs
        weight = self.buffer(("dynamic_conv", weight_value, zero_value), (weight_value, zero_value),
                             centered_weight, channels_last, keep_type=not reduced)
        bias_value = found.bias
        bias = None if bias_value is None else self.buffer(
            ("dynamic_conv", "bias", bias_value), (bias_value,),
            lambda: constants[bias_value].reshape((1, -1) + (1,) * (constants[weight_value].ndim - 2)))
        # data a centered quantizer made is already ``x - zero``, in the weight's floating type
        takes_centered = conv.inputs[0] in self.fusions.centered_quantizers.values()
        zero = self.arg(conv.inputs[2]) if len(conv.inputs) > 2 and not takes_centered else None
        run = dynamic_quantized_conv(nn.conv(self.analysis.infos[found.conv_name]), channels_last, found.relu)
        args = (self.arg(conv.inputs[0]), zero, weight, self.arg(found.scale), bias, self.arg(found.residual))
        self.env[found.output] = self.call(found.conv_name, conv, run, args)

    def _emit_dynamic_matmul(self, name: str, node: ir.Node, found: DynamicMatMul) -> None:
        constants = self.analysis.constants
        weight_array = constants[found.weight]
        weight = self.buffer(("dynamic_matmul", found.weight, "weight"), (found.weight,),
                             lambda: np.ascontiguousarray(weight_array.T))
        sums = self.buffer(("dynamic_matmul", found.weight, "sums"), (found.weight,),
                           lambda: weight_array.sum(axis=0, dtype=np.int32).reshape(1, -1))
        matmul = found.matmul
        zero = self.arg(matmul.inputs[2]) if len(matmul.inputs) > 2 else None
        bias_value = found.bias
        bias = None if bias_value is None else self.buffer(
            ("value", bias_value, "float32"), (bias_value,), lambda: constants[bias_value], keep_type=True)
        args = (self.arg(matmul.inputs[0]), zero, weight, sums, self.arg(found.scale), bias,
                self.compute_dtype or torch.float32)
        self.env[found.output] = self.call(found.matmul_name, matmul, dynamic_quantized_linear, args)
