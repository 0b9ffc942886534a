"""The :class:`~.build.Builder`'s emitters of quantized models' fused calls (planned by
:mod:`._quantized_fusions`, :mod:`._qdq_pairs`, :mod:`._qdq_attention`, :mod:`._qdq_gelu` and
:mod:`._qdq_conv`): int8 matmuls (with the table of a GELU computed once here), fake-quantize
pairs, and ``quantize_dynamic``'s convolutions and matmuls."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
import torch
import torch.fx

from inferplex.devices.gpu._qdq_attention import QuantizedAttention
from inferplex.devices.gpu._qdq_conv import QuantizedConv, int8_conv_plan
from inferplex.devices.gpu._qdq_gelu import QuantizedGelu
from inferplex.devices.gpu._qdq_pairs import QuantizeDequantize
from inferplex.devices.gpu._quantized_fusions import DynamicConv, DynamicMatMul, QuantizedMatMul, RowQuantizer
from inferplex.devices.gpu.ops import nn
from inferplex.devices.gpu.ops._fake_quantize import FakeQuantizeStep, quantize_dequantize
from inferplex.devices.gpu.ops._fused_quantized import (
    DYNAMIC_CONV_WEIGHT_FACTOR,
    dequantized_conv,
    dynamic_quantize_centered,
    dynamic_quantize_rows,
    dynamic_quantized_conv,
    dynamic_quantized_linear,
    quantized_linear,
    quantized_linear_arrays,
)
from inferplex.devices.gpu.ops._gelu_levels import band_types, gelu_band, gelu_quantize_rows
from inferplex.devices.gpu.ops._int8_conv import int8_conv_arrays
from inferplex.devices.gpu.ops._pooling import fake_quantized_max_pool
from inferplex.devices.gpu.ops._qdq_attention import quantized_attention
from inferplex.devices.gpu.ops._qdq_conv import quantized_conv, quantized_relu_conv
from inferplex.devices.gpu.ops._qdq_gelu import gelu_table, quantized_gelu
from inferplex.devices.gpu.ops._quantized_triton import fresh_value_range
from inferplex.devices.gpu.ops._window import Window
from inferplex.devices.gpu.tensors import torch_to_numpy

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis
    from inferplex.devices.gpu.optimize import Fusions

__all__ = ["QuantizedEmitters"]


class QuantizedEmitters:
    """The emitters of quantized models' fused calls, mixed into :class:`~.build.Builder`, whose
    values, buffers and calls they use."""

    if TYPE_CHECKING:  # the Builder's
        analysis: Analysis
        device: torch.device
        compute_dtype: torch.dtype | None
        fusions: Fusions
        graph: torch.fx.Graph
        env: dict[ir.Value, torch.fx.Node]
        fake_quantized: dict[tuple[Any, ...], torch.fx.Node]
        value_ranges: dict[ir.Value, torch.fx.Node]
        partials: dict[ir.Value, torch.fx.Node]
        range_block: torch.fx.Node | None

        def buffer(self, key: Any, sources: Iterable[ir.Value | None], make_array: Callable[[], np.ndarray],
                   channels_last: bool = False, keep_type: bool = False) -> torch.fx.Node: ...

        def arg(self, value: ir.Value | None) -> torch.fx.Node | None: ...

        def call(self, name: str, node: ir.Node, fn: Callable[..., Any],
                 args: tuple[Any, ...]) -> torch.fx.Node: ...

        def bind(self, name: str, op_type: str, call: torch.fx.Node, values: Iterable[ir.Value]) -> None: ...

        def _conv_input(self, name: str, conv: ir.Node) -> Any: ...

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
        if found.writes_levels and found.quantize is not None:  # the last pair's data, read as levels
            call = self.call(name, node, quantized_linear, (*args, *steps, None, True))
            self.env[found.quantize.quantizer.outputs[0]] = call
            return
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
        constant as the program holds it (rounded to the compute type).  Where the call writes an
        int8 matmul's data (see :func:`~._qdq_attention.quantizing_attentions`) it binds the
        QuantizeLinear's output to it."""
        factor = None
        if found.factor is not None:
            array = self.analysis.constants[found.factor].reshape(-1)[:1].astype(np.float32)
            factor = float(torch.from_numpy(array).to(self.compute_dtype or torch.float32)[0])
        steps = tuple(None if pair is None else self._fake_quantize_args(pair) for pair in (
            found.scores, found.scaled, found.masked, found.probabilities, found.context))
        mask = None if found.mask is None else self.arg(found.mask)
        args = (self.arg(found.query), self.arg(found.key_t), self.arg(found.value), mask, factor,
                found.divide, steps)
        if found.quantizer is None:
            self.env[found.output] = self.call(name, node, quantized_attention, args)
            return
        # the QuantizeLinear's data after the Transpose to (B, S, H, D) and the Reshape joining H and D
        call = self.call(name, node, quantized_attention, (*args, self._quantize_numbers(found.quantizer)))
        self.env[found.quantizer.outputs[0]] = self.graph.call_function(torch.flatten, (call, 2))

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
        scale_value = inputs[1]
        assert scale_value is not None  # the planners take QuantizeLinear nodes of constant numbers
        return float(constants[scale_value].reshape(-1)[0]), zero, torch.int8 if signed else torch.uint8

    def _emit_quantized_conv(self, name: str, node: ir.Node, found: QuantizedConv) -> None:
        """A QDQ Conv, its pair and (where the chain has them) the Add and its pair as one call named
        after the Conv (see :mod:`._qdq_conv`)."""
        name, conv = found.conv_name, found.conv
        bias = self.arg(conv.inputs[2]) if len(conv.inputs) > 2 else None
        other = self.arg(found.other) if found.other is not None else None
        second = self._fake_quantize_args(found.second) if found.second is not None else None
        args = (self._conv_input(name, conv), self.arg(conv.inputs[1]), bias, other,
                self._fake_quantize_args(found.first), second, self._int8_conv_weight(name, conv),
                self.fusions.level_reads.get(name), self.fusions.level_writes.get(name))
        self.env[found.output] = self.call(name, conv, quantized_conv(self.analysis.infos[name]), args)

    def _emit_relu_range_conv(self, name: str, end: ir.Node, conv: ir.Node, args: tuple[Any, ...],
                              pair: QuantizeDequantize) -> None:
        """A QDQ Conv (and residual Add) whose pair's range holds the Relu, as one call named after
        the Conv (see :func:`quantized_relu_conv`); ``args``: the data, weight, bias and residual."""
        run = quantized_relu_conv(self.analysis.infos[name])
        args = (*args, *self._fake_quantize_args(pair), self._int8_conv_weight(name, conv),
                self.fusions.level_reads.get(name), self.fusions.level_writes.get(name))
        self.env[end.outputs[0]] = self.call(name, conv, run, args)

    def _int8_conv_weight(self, name: str, conv: ir.Node) -> tuple[Any, ...] | None:
        """What the int8 convolution takes of ``conv`` (:data:`~.ops._int8_conv.Int8Weight`: buffers
        made once, and the data's pair), or None where it cannot take it: a Conv its planner
        refuses, or the program's type is bfloat16 (whose 8 bits of mantissa cannot hold the data's
        256 levels apart, so its float values would not give them back)."""
        found = int8_conv_plan(self.analysis, conv)
        if found is None or self.compute_dtype not in (None, torch.float16) or name in self.fusions.conv_bn:
            return None
        constants = self.analysis.constants
        sources = (found.weight, found.weight_scale, found.x_scale)
        arrays: list[np.ndarray] = []

        def made(index: int) -> np.ndarray:
            if not arrays:  # computed once, only when a tensor is not cached yet
                arrays.extend(int8_conv_arrays(constants[found.weight], constants[found.weight_scale],
                                               float(constants[found.x_scale].reshape(()))))
            return arrays[index]

        weight, columns, scale = (self.buffer(("int8_conv", name, index), sources,
                                              functools.partial(made, index), keep_type=True)
                                  for index in range(3))
        x_scale = float(constants[found.x_scale].reshape(()))
        return (weight, columns, scale, x_scale, found.x_zero, found.x_signed)

    def _emit_pooled_pair(self, name: str, pool: ir.Node, found: QuantizeDequantize) -> None:
        """The MaxPool with the pair before it run on its output (see :func:`fake_quantized_max_pool`)."""
        args = (self.arg(pool.inputs[0]), *self._fake_quantize_args(found))
        run = fake_quantized_max_pool(self.analysis.infos[name])
        self.env[pool.outputs[0]] = self.call(name, pool, run, args)

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
        float convolutions; or, where those may all run as int8 convolutions, its levels (see
        :func:`~._quantized_fusions.level_quantizers`)."""
        dequantized = self._dequantized_input(data)
        pads = self.fusions.level_writes.get(name) if dequantized else None
        value_range = self.value_ranges.get(node.inputs[0]) if pads is not None else None  # type: ignore[arg-type]
        call = self.call(name, node, dynamic_quantize_centered,
                         (self.arg(node.inputs[0]), dequantized, pads, value_range))
        self.bind(name, node.op_type, call, node.outputs)

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
        ranged = found.conv_name in self.fusions.ranged_convs
        run = dequantized_conv(nn.conv(info), nn.conv_relu(info), Window(info), channels_last, found.relu,
                               ranged)
        args: tuple[Any, ...] = (self.arg(found.conv.inputs[0]), weight, bias, self.arg(found.residual))
        reads = self.fusions.level_reads.get(found.conv_name)
        quantizer = found.conv.inputs[0].producer() if found.conv.inputs[0] is not None else None
        if reads is not None and quantizer is not None:
            out_range = self._range_slot(found.conv_name) if ranged else None
            args = (*args, self._dynamic_int8_weight(found), self.arg(quantizer.outputs[1]),
                    self.arg(quantizer.outputs[2]), reads, out_range)
        call = self.call(found.conv_name, found.conv, run, args)
        if not ranged:
            self.env[found.output] = call
            return
        self.env[found.output] = self.graph.call_function(operator.getitem, (call, 0))
        self.value_ranges[found.output] = self.graph.call_function(operator.getitem, (call, 1))

    def _range_slot(self, name: str) -> torch.fx.Node:
        """The fresh value range a ranged convolution or matmul (:attr:`Fusions.ranged_convs`,
        :attr:`Fusions.ranged_matmuls`) records its output's in: a row of one zeroed block made once
        per run for all of them."""
        ranged = sorted(self.fusions.ranged_convs | self.fusions.ranged_matmuls)
        if self.range_block is None:
            self.range_block = self.graph.call_function(fresh_value_range, (self.device, len(ranged)))
        return self.graph.call_function(operator.getitem, (self.range_block, ranged.index(name)))

    def _emit_row_quantizer(self, name: str, node: ir.Node, found: RowQuantizer) -> None:
        """A DynamicQuantizeLinear handing its levels to the dynamic matmuls that alone read its
        data (see :func:`~._quantized_fusions.row_quantizers`), from the partial minima and maxima
        the normalization before wrote where it did, or computing the GELU it quantizes."""
        if found.gelu is not None:
            formula = found.gelu
            call = self.call(name, node, gelu_quantize_rows, (self.arg(formula.input), formula.approximate,
                                                              self.value_ranges.get(formula.input)))
        else:
            partials = self.partials.get(found.input)
            call = self.call(name, node, dynamic_quantize_rows, (self.arg(found.input), partials))
        self.bind(name, node.op_type, call, node.outputs)

    def _dynamic_int8_weight(self, found: DynamicConv) -> tuple[Any, ...]:
        """What the int8 convolution takes of a dynamic convolution whose quantizer hands it its
        levels (:data:`~.ops._int8_conv.Int8Weight`, with the weight's scale alone: the data's
        comes with its levels)."""
        constants = self.analysis.constants
        weight_value, scale_value = found.weight, found.weight_scale
        assert scale_value is not None  # level_quantizers plans only such convolutions
        arrays: list[np.ndarray] = []

        def made(index: int) -> np.ndarray:
            if not arrays:  # computed once, only when a tensor is not cached yet
                arrays.extend(int8_conv_arrays(constants[weight_value], constants[scale_value], 1.0))
            return arrays[index]

        weight, columns, scale = (self.buffer(("dynamic_int8_conv", weight_value, scale_value, index),
                                              (weight_value, scale_value), functools.partial(made, index),
                                              keep_type=True)
                                  for index in range(3))
        return (weight, columns, scale, 1.0, 0, True)

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
        scale_value, scale = found.weight_scale, self.arg(found.scale)
        quantizer = matmul.inputs[0].producer() if matmul.inputs[0] is not None else None
        if scale_value is not None and quantizer is not None:  # the call multiplies the data's scale by it
            scale = self.buffer(("value", scale_value, "float32"), (scale_value,),
                                lambda: constants[scale_value].reshape(-1), keep_type=True)
            x_scale = self.arg(quantizer.outputs[1])
        else:
            x_scale = None
        levels = any(found.data is matmul.inputs[0] for found in self.fusions.row_quantizers.values())
        gelu_range = self._gelu_range(found)
        args = (self.arg(matmul.inputs[0]), zero, weight, sums, scale, bias,
                self.compute_dtype or torch.float32, x_scale, levels, gelu_range)
        self.env[found.output] = self.call(found.matmul_name, matmul, dynamic_quantized_linear, args)

    def _gelu_range(self, found: DynamicMatMul) -> tuple[torch.fx.Node, float, float] | None:
        """What a ranged dynamic matmul's call records its output's GELU quantizer needs in (its
        value range, and the band of the GELU that reads it), where the program's type has a band;
        else None (the quantizer finds the range itself)."""
        if found.matmul_name not in self.fusions.ranged_matmuls or self.compute_dtype not in band_types():
            return None
        approximate = next(quantizer.gelu.approximate for quantizer in self.fusions.row_quantizers.values()
                           if quantizer.matmul == found.matmul_name and quantizer.gelu is not None)
        band = gelu_band(self.compute_dtype, approximate)
        slot = self._range_slot(found.matmul_name)
        self.value_ranges[found.output] = slot
        return (slot, band.low, band.high)
