"""Emits the fx graph of a lowered model node by node (see :mod:`.lower` and :mod:`.optimize`)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
import torch
import torch.fx

from inferplex.devices.gpu._activation_fusions import Gelu, gelu
from inferplex.devices.gpu._norm_fusions import Norm, layer_norm, rms_norm
from inferplex.devices.gpu._residual_layer_norm import ResidualLayerNorm
from inferplex.devices.gpu.build_quantized import QuantizedEmitters
from inferplex.devices.gpu.ops import nn
from inferplex.devices.gpu.ops._fused_float import linear, scaled_dot_product_attention, to_channels_last
from inferplex.devices.gpu.ops._residual_layer_norm import layer_norm_with_partials, residual_layer_norm
from inferplex.devices.gpu.ops.control_flow import outer_values
from inferplex.devices.gpu.optimize import Attention, ConvRelu, Fusions, WeightCache, fold_conv_bn
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


_INTEGER_PRODUCTS = {"MatMulInteger", "ConvInteger"}


def _casts_integer_sums(node: ir.Node) -> bool:
    """Whether ``node`` is a Cast of a MatMulInteger's or ConvInteger's int32 sums: in a reduced
    precision its float32 values stay float32 (sums of 8-bit products pass float16's range), and
    the nodes that read them (the Mul by the scales) give the compute type."""
    source = node.inputs[0].producer() if node.op_type == "Cast" and node.inputs and node.inputs[0] else None
    return source is not None and source.op_type in _INTEGER_PRODUCTS and source.domain in ("", "ai.onnx")


def _lower_float32(tensor: Any, dtype: torch.dtype) -> Any:
    if isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32:
        return tensor.to(dtype)
    return tensor


class Builder(QuantizedEmitters):
    """Emits the fx graph node by node; holds the value -> fx node map.  The quantized models'
    fused calls are :class:`~.build_quantized.QuantizedEmitters`'."""

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
        self.value_ranges: dict[ir.Value, torch.fx.Node] = {}
        """A ranged dynamic convolution's or matmul's output -> the value range its call records
        (see :meth:`_emit_dequantized_conv` and :meth:`_gelu_range`)."""
        self.partials: dict[ir.Value, torch.fx.Node] = {}
        """A float normalization's output -> the partial minima and maxima its call writes for the
        DynamicQuantizeLinear that reads it (see :attr:`Fusions.partial_norms`)."""
        self.range_block: torch.fx.Node | None = None
        """The zeroed block of those value ranges, made once per run (see :meth:`_range_slot`)."""
        self.integer_sums: set[ir.Value] = set()
        """Float32 values of :func:`_casts_integer_sums` Casts, kept float32 in a reduced precision."""

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

    def bind(self, name: str, op_type: str, call: torch.fx.Node, values: Iterable[ir.Value]) -> None:
        """Bind each of ``values`` to the output of ``call`` at its place (a node each, carrying the
        name and op type the profile's record shows)."""
        for index, value in enumerate(values):
            out = self.graph.call_function(_pick, (call, index))
            out.meta.update(onnx_name=name, onnx_op=op_type)
            self.env[value] = out

    def _fused_emitters(self) -> tuple[tuple[Mapping[str, Any], Callable[[str, ir.Node, Any], None]], ...]:
        """The planned fusions (friendly name of the node that emits each -> its plan) with the
        method that emits it, in the order a node is looked up."""
        fusions = self.fusions
        return ((fusions.conv_relu, self._emit_conv_relu), (fusions.conv_bn, self._emit_conv_bn),
                (fusions.linear, self._emit_linear), (fusions.quantized_matmul, self._emit_quantized_matmul),
                (fusions.quantize_dequantize, self._emit_quantize_dequantize),
                (fusions.pooled_pairs, self._emit_pooled_pair),
                (fusions.quantized_attention, self._emit_quantized_attention),
                (fusions.quantized_gelu, self._emit_quantized_gelu),
                (fusions.quantized_conv, self._emit_quantized_conv),
                (fusions.residual_layer_norm, self._emit_residual_layer_norm),
                (fusions.centered_quantizers, self._emit_centered_quantizer),
                (fusions.row_quantizers, self._emit_row_quantizer),
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
        sums = _casts_integer_sums(node)
        lowered = self.compute_dtype is not None and (
            (node.op_type in _TYPE_MAKERS and not sums) or any(v in self.integer_sums for v in node.inputs))
        for index, value in enumerate(outputs):
            out = call if len(outputs) == 1 else self.graph.call_function(_pick, (call, index))
            if lowered:
                out = self.graph.call_function(_lower_float32, (out, self.compute_dtype))
            elif sums:
                self.integer_sums.add(value)
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
        args: tuple[Any, ...] = (self._conv_input(name, conv), weight, bias, other)
        if found.quantize is not None:
            self._emit_relu_range_conv(name, end, conv, args, found.quantize)
            return
        self.env[end.outputs[0]] = self.call(name, conv, nn.conv_relu(self.analysis.infos[name]), args)

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

    def _emit_residual_layer_norm(self, name: str, node: ir.Node, found: ResidualLayerNorm) -> None:
        """The residual Add and LayerNormalization (and a QDQ layer's pairs) as one call named after
        the normalization (see :mod:`._residual_layer_norm`); it binds the normalization's output to the
        fake-quantized value (where something reads it) and, where an int8 matmul or the next
        normalization reads it, the QuantizeLinear's data; inputs that a pair's call hands over as
        levels are read as that pair's data."""
        name, norm = found.norm_name, found.norm
        attribute = norm.attributes.get("epsilon")
        epsilon = float(attribute.value) if attribute is not None else 1e-5
        steps = tuple(None if pair is None else self._fake_quantize_args(pair)
                      for pair in (found.sum_pair, found.output_pair))
        quantize = self._quantize_numbers(found.quantizer) if found.quantizer and found.writes_data else None
        first, second = (self.arg(value if pair is None else pair.quantizer.outputs[0])
                         for value, pair in zip((found.first, found.second), found.levels, strict=True))
        inputs = (first, second, self.arg(norm.inputs[1]), self.arg(norm.inputs[2]), epsilon)
        if name in self.fusions.partial_norms:  # a float normalization a DynamicQuantizeLinear reads
            call = self.call(name, norm, layer_norm_with_partials, inputs)
            self.env[found.output] = self.graph.call_function(operator.getitem, (call, 0))
            self.partials[found.output] = self.graph.call_function(operator.getitem, (call, 1))
            return
        levels = tuple(None if pair is None else self._fake_quantize_args(pair) for pair in found.levels)
        args = (*inputs, *steps, quantize, levels, found.writes_value)
        call = self.call(name, norm, residual_layer_norm, args)
        if quantize is None or found.quantizer is None:
            self.env[found.output] = call
        elif not found.writes_value:  # the data alone, which the next calls read as levels
            self.env[found.quantizer.outputs[0]] = call
        else:
            self.bind(name, norm.op_type, call, (found.output, found.quantizer.outputs[0]))

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
