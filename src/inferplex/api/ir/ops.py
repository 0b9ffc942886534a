"""Each OpenVINO op type read from an IR, as a call of its :mod:`inferplex.opset` builder.

:data:`BUILDERS` maps an op type to a function of one :class:`OpView` (the op's attributes,
friendly name and inputs) that returns the built :class:`~inferplex.api.nodes.Node`.  The
attributes mostly keep their names; where a builder spells one differently (MaxPool's and
AvgPool's ``kernel`` is ``kernel_shape``, AvgPool's ``exclude-pad`` is ``exclude_pad``, Swish's
beta is an input) or an op's versions differ (BatchNormInference-1 takes gamma and beta first,
MaxPool-1 has one output, MVN-1 takes ``reduction_axes``), the function here says so.  Divide
of integers truncates, as ONNX's Div and OpenVINO's CPU plugin do, whatever its ``m_pythondiv``
(which OpenVINO's ONNX reader sets on the ONNX Div it reads).
:data:`VERSIONS` lists the versions read of the ops whose versions differ in meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import onnx_ir as ir

from inferplex import opset
from inferplex.api.ir.ops_detection import DETECTION_BUILDERS
from inferplex.api.ir.ops_recent import RECENT_BUILDERS
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.errors import InputError
from inferplex.state.ops import assign, read_value

__all__ = ["BUILDERS", "VERSIONS", "OpView"]


class OpView(Protocol):
    """What a builder sees of one OpenVINO op."""

    type_name: str
    version: int
    attrs: dict[str, Any]
    name: str
    size: int
    """The number of inputs."""

    def value(self, index: int) -> Any:
        """Input ``index`` as the output port it reads (what OpenVINO programs give the builders)."""

    def dtype(self, index: int) -> ir.DataType | None:
        """Input ``index``'s element type."""

    def constant(self, index: int, what: str) -> np.ndarray:
        """Input ``index``'s constant data; InputError naming ``what`` when it is computed."""

    def arg(self, index: int) -> Any:
        """Input ``index``: its data where it is constant (builders that take constants), else its value."""

    def ints(self, index: int) -> Any:
        """Input ``index`` as int64 (shapes, axes, bounds, indices): its data where it is constant."""

    node: Any
    """The OpenVINO op itself (its bodies and port descriptions, for If, Loop and TensorIterator)."""

    def used(self, index: int) -> bool:
        """Whether output ``index`` is read (by an op or a Result)."""


Build = Callable[[OpView], Node]

_UNARY = {"Abs": "abs", "Acos": "acos", "Acosh": "acosh", "Asin": "asin", "Asinh": "asinh", "Atan": "atan",
          "Atanh": "atanh", "BitwiseNot": "bitwise_not", "Ceiling": "ceiling", "Cos": "cos", "Cosh": "cosh",
          "Erf": "erf", "Exp": "exp", "Floor": "floor", "HSigmoid": "hsigmoid", "HSwish": "hswish",
          "IsFinite": "is_finite", "IsNaN": "is_nan", "Log": "log", "LogicalNot": "logical_not",
          "Mish": "mish", "Negative": "negative", "Relu": "relu", "Sigmoid": "sigmoid", "Sign": "sign",
          "Sin": "sin", "Sinh": "sinh", "SoftPlus": "softplus", "SoftSign": "softsign", "Sqrt": "sqrt",
          "Tan": "tan", "Tanh": "tanh"}
_BINARY = {"Add": "add", "Subtract": "subtract", "Multiply": "multiply", "Power": "power",
           "Divide": "divide", "Maximum": "maximum", "Minimum": "minimum", "Equal": "equal",
           "NotEqual": "not_equal",
           "Less": "less", "LessEqual": "less_equal", "Greater": "greater", "GreaterEqual": "greater_equal",
           "LogicalAnd": "logical_and", "LogicalOr": "logical_or", "LogicalXor": "logical_xor",
           "FloorMod": "floor_mod", "Mod": "mod", "SquaredDifference": "squared_difference",
           "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}
_REDUCE = {"ReduceSum": "reduce_sum", "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max",
           "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod", "ReduceL1": "reduce_l1",
           "ReduceL2": "reduce_l2", "ReduceLogicalAnd": "reduce_logical_and",
           "ReduceLogicalOr": "reduce_logical_or"}

VERSIONS = {"AvgPool": {1, 14}, "BatchNormInference": {1, 5}, "Broadcast": {1, 3}, "Gather": {1, 7, 8},
            "GatherND": {5, 8}, "Gelu": {2, 7}, "Interpolate": {1, 4, 11}, "LSTMCell": {1, 4},
            "LSTMSequence": {5}, "MaxPool": {1, 8, 14}, "NonMaxSuppression": {1, 3, 4, 5, 9},
            "MVN": {2, 6}, "OneHot": {1, 16}, "Pad": {1, 12}, "Range": {1, 4}, "ReadValue": {3, 6},
            "ROIAlign": {3, 9},
            "Assign": {3, 6}, "ScatterElementsUpdate": {3, 12}, "ScatterNDUpdate": {3, 4, 15},
            "ShapeOf": {1, 3}, "Softmax": {1, 8}, "Squeeze": {1, 15}, "TopK": {1, 3, 11}}
"""The opset versions read of the ops whose versions differ; other ops are read in every version."""


def _unary(function: str) -> Build:
    return lambda op: getattr(opset, function)(op.value(0), name=op.name)


def _binary(function: str) -> Build:
    def build(op: OpView) -> Node:
        spec = str(op.attrs.get("auto_broadcast", "numpy"))
        return getattr(opset, function)(op.value(0), op.value(1), spec, name=op.name)
    return build


def _reduce(function: str) -> Build:
    def build(op: OpView) -> Node:
        axes = op.constant(1, f"{op.type_name} axes")
        return getattr(opset, function)(op.value(0), axes, bool(op.attrs.get("keep_dims", False)),
                                        name=op.name)
    return build


def _optional(op: OpView, index: int) -> Any:
    return op.value(index) if index < op.size else None


def _geometry(op: OpView) -> dict[str, Any]:
    """Convolution and pooling attributes under the builders' names."""
    return {"strides": op.attrs["strides"], "pads_begin": op.attrs["pads_begin"],
            "pads_end": op.attrs["pads_end"], "auto_pad": op.attrs.get("auto_pad", "explicit")}


def _convolution(function: str) -> Build:
    def build(op: OpView) -> Node:
        return getattr(opset, function)(op.value(0), op.value(1), dilations=op.attrs["dilations"],
                                        name=op.name, **_geometry(op))
    return build


def _backprop(function: str) -> Build:
    def build(op: OpView) -> Node:
        output_shape = op.ints(2) if op.size > 2 else None
        return getattr(opset, function)(op.value(0), op.value(1), output_shape=output_shape,
                                        dilations=op.attrs.get("dilations"),
                                        output_padding=op.attrs.get("output_padding"), name=op.name,
                                        **_geometry(op))
    return build


def _max_pool(op: OpView) -> Node:
    """MaxPool-1: values only; MaxPool-8/14: values and indices (the indices left out where unused)."""
    geometry = _geometry(op)
    kernel = op.attrs["kernel"]
    dilations = op.attrs.get("dilations", [1] * len(kernel))
    rounding = op.attrs.get("rounding_type", "floor")
    if op.version == 1 or not op.used(1):
        return opset.max_pool_node(op.value(0), geometry["strides"], dilations, geometry["pads_begin"],
                                   geometry["pads_end"], kernel, rounding, geometry["auto_pad"], op.name,
                                   num_outputs=1)
    return opset.max_pool(op.value(0), geometry["strides"], dilations, geometry["pads_begin"],
                          geometry["pads_end"], kernel, rounding, geometry["auto_pad"],
                          op.attrs.get("index_element_type", "i64"), int(op.attrs.get("axis", 0)),
                          name=op.name)


def _avg_pool(op: OpView) -> Node:
    geometry = _geometry(op)
    return opset.avg_pool(op.value(0), geometry["strides"], geometry["pads_begin"], geometry["pads_end"],
                          op.attrs["kernel"], bool(op.attrs["exclude-pad"]),
                          op.attrs.get("rounding_type", "floor"), geometry["auto_pad"], name=op.name)


def _batch_norm(op: OpView) -> Node:
    """BatchNormInference-5 takes (data, gamma, beta, mean, variance); -1 takes (gamma, beta, data,
    mean, variance)."""
    order = (0, 1, 2, 3, 4) if op.version >= 5 else (2, 0, 1, 3, 4)
    data, gamma, beta, mean, variance = (op.value(i) for i in order)
    return opset.batch_norm_inference(data, gamma, beta, mean, variance, float(op.attrs["epsilon"]),
                                      name=op.name)


def _mvn(op: OpView) -> Node:
    """MVN-6 takes its axes as an input; MVN-1 as ``reduction_axes`` (or ``across_channels``)."""
    normalize = bool(op.attrs["normalize_variance"])
    eps = float(op.attrs["eps"])
    if op.version >= 6:
        return opset.mvn(op.value(0), op.constant(1, "MVN axes"), normalize, eps,
                         str(op.attrs.get("eps_mode", "inside_sqrt")).lower(), name=op.name)
    axes = op.attrs.get("reduction_axes")
    if axes:
        return opset.mvn(op.value(0), np.asarray(axes, np.int64), normalize, eps, "inside_sqrt", name=op.name)
    return opset.mvn(op.value(0), bool(op.attrs.get("across_channels", False)), normalize, eps, name=op.name)


def _interpolate(op: OpView) -> Node:
    """Interpolate-1 (attributes as a dict), -4 (sizes and scales) and -11 (sizes or scales)."""
    attrs = op.attrs
    if op.version == 1:
        options = {key: attrs[key] for key in ("axes", "mode", "align_corners", "antialias", "pads_begin",
                                               "pads_end") if key in attrs}
        return opset.interpolate(op.value(0), op.ints(1), options, name=op.name)
    common = {"pads_begin": attrs.get("pads_begin"), "pads_end": attrs.get("pads_end"),
              "coordinate_transformation_mode": attrs.get("coordinate_transformation_mode", "half_pixel"),
              "nearest_mode": attrs.get("nearest_mode", "round_prefer_floor"),
              "antialias": bool(attrs.get("antialias", False)),
              "cube_coeff": float(attrs.get("cube_coeff", -0.75)), "name": op.name}
    if op.version == 4:
        axes = op.ints(3) if op.size > 3 else None
        return opset.interpolate(op.value(0), op.arg(1), op.arg(2), attrs["mode"],
                                 attrs["shape_calculation_mode"], axes=axes, **common)
    axes = op.ints(2) if op.size > 2 else None
    return opset.interpolate(op.value(0), op.arg(1), attrs["mode"], attrs["shape_calculation_mode"],
                             axes=axes, **common)


def _squeeze(op: OpView) -> Node:
    if op.attrs.get("allow_axis_skip"):
        raise InputError("Squeeze with allow_axis_skip=True (axes whose length is not 1 left alone) "
                         "has no ONNX equivalent")
    return opset.squeeze(op.value(0), op.ints(1) if op.size > 1 else None, name=op.name)


def _gather(op: OpView) -> Node:
    return opset.gather(op.value(0), op.value(1), op.constant(2, "Gather axis"),
                        int(op.attrs.get("batch_dims", 0)), name=op.name)


def _gather_nd(op: OpView) -> Node:
    batch_dims = int(op.attrs.get("batch_dims", 0))
    if op.version == 5 and batch_dims:
        raise InputError("GatherND-5 with batch_dims > 0 folds the batch dims into one; ONNX GatherND "
                         "keeps them (as GatherND-8)")
    return opset.gather_nd(op.value(0), op.ints(1), batch_dims, name=op.name)


def _broadcast(op: OpView) -> Node:
    mode = str(op.attrs.get("mode", "numpy"))
    axes = op.ints(2) if op.size > 2 else None
    return opset.broadcast(op.value(0), op.ints(1), axes, mode, name=op.name)


def _pad(op: OpView) -> Node:
    return opset.pad(op.value(0), op.ints(1), op.ints(2), str(op.attrs["pad_mode"]), _optional(op, 3),
                     name=op.name)


def _range(op: OpView) -> Node:
    output_type = op.attrs.get("output_type") if op.version >= 4 else None
    return opset.range(op.arg(0), op.arg(1), op.arg(2), output_type, name=op.name)


def _topk(op: OpView) -> Node:
    a = op.attrs
    return opset.topk(op.value(0), op.ints(1), int(a["axis"]), a["mode"], a["sort"],
                      a.get("index_element_type", "i32"), bool(a.get("stable", False)), name=op.name)


def _one_hot(op: OpView) -> Node:
    mode = str(op.attrs.get("negative_indices_mode", "ignore_negative")).replace("_", "-")
    return opset.one_hot(op.value(0), op.ints(1), op.arg(2), op.arg(3), int(op.attrs["axis"]), mode,
                         name=op.name)


def _scatter_elements(op: OpView) -> Node:
    return opset.scatter_elements_update(op.value(0), op.value(1), op.value(2),
                                         op.constant(3, "ScatterElementsUpdate axis"),
                                         op.attrs.get("reduction", "none"),
                                         bool(op.attrs.get("use_init_val", True)), name=op.name)


def _read_value(op: OpView) -> Node:
    a = op.attrs
    variable = str(a["variable_id"])
    if op.size == 0:
        return read_value(variable, a.get("variable_type"), a.get("variable_shape"), name=op.name)
    if op.version < 6:
        return read_value(op.value(0), variable, name=op.name)
    return read_value(op.value(0), variable, a.get("variable_type"), a.get("variable_shape"), name=op.name)


def _strided_slice(op: OpView) -> Node:
    a = op.attrs
    strides = op.ints(3) if op.size > 3 else np.ones(len(op.constant(1, "StridedSlice begin")), np.int64)
    return opset.strided_slice(op.value(0), op.ints(1), op.ints(2), strides, a["begin_mask"], a["end_mask"],
                               a.get("new_axis_mask"), a.get("shrink_axis_mask"), a.get("ellipsis_mask"),
                               name=op.name)


def _recurrent(function: str, inputs: int) -> Build:
    """LSTM/GRU/RNN sequences and cells: ``inputs`` data inputs, then the attributes; LSTMCell-1's
    peepholes (a seventh input) must be zeros, its weights in OpenVINO's f, i, c, o order."""
    def build(op: OpView) -> Node:
        a = op.attrs
        if str(a.get("weights_format", "fico")).lower() != "fico" or a.get("input_forget"):
            raise InputError(f"{op.type_name} with weights_format={a.get('weights_format')!r}, input_forget="
                             f"{a.get('input_forget')}; accepted: 'fico', input_forget false")
        if op.size > inputs and np.any(op.constant(inputs, f"{op.type_name} peepholes")):
            raise InputError(f"{op.type_name} with peepholes: ONNX's LSTM orders them differently; "
                             "accepted: peepholes of zeros")
        options = {"hidden_size": int(a["hidden_size"]), "activations": a.get("activations"),
                   "activations_alpha": a.get("activations_alpha") or [],
                   "activations_beta": a.get("activations_beta") or [], "clip": float(a.get("clip", 0.0))}
        if "direction" in a:
            options["direction"] = str(a["direction"])
        if "linear_before_reset" in a:
            options["linear_before_reset"] = bool(a["linear_before_reset"])
        return getattr(opset, function)(*(op.value(i) for i in range(inputs)), name=op.name, **options)
    return build


def _fourier(function: str) -> Build:
    return lambda op: getattr(opset, function)(op.value(0), op.ints(1), op.ints(2) if op.size > 2 else None,
                                               name=op.name)


_CASTABLE = {ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE,
             ir.DataType.BOOL, ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
             ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64,
             ir.DataType.STRING}
"""Element types ONNX's Cast (opset 17) takes; Converts of constants of the others (i4, u4, f8, ...:
weights stored compressed) are folded into constants of the target type."""


def _convert(op: OpView) -> Node:
    target = op.attrs["destination_type"]
    if op.dtype(0) in _CASTABLE:
        return opset.convert(op.value(0), target, name=op.name)
    data = op.constant(0, f"Convert from {op.dtype(0)} (ONNX's Cast takes it from opset 19 or 21 only)")
    return opset.constant(data.astype(to_ir_dtype(target).numpy()), name=op.name)


def _unique(op: OpView) -> Node:
    a = op.attrs
    axis = op.constant(1, "Unique axis") if op.size > 1 else None
    return opset.unique(op.value(0), axis, bool(a.get("sorted", True)), a.get("index_element_type", "i64"),
                        a.get("count_element_type", "i64"), name=op.name)


def _multinomial(op: OpView) -> Node:
    a = op.attrs
    return opset.multinomial(op.value(0), op.arg(1), a["convert_type"], bool(a["with_replacement"]),
                             bool(a["log_probs"]), int(a.get("global_seed", 0)), int(a.get("op_seed", 0)),
                             name=op.name)


def _deformable_convolution(op: OpView) -> Node:
    """DeformableConvolution-1 (no mask) and -8."""
    a = op.attrs
    return opset.deformable_convolution(op.value(0), op.value(1), op.value(2), a["strides"], a["pads_begin"],
                                        a["pads_end"], a["dilations"], _optional(op, 3),
                                        str(a.get("auto_pad", "explicit")), int(a.get("group", 1)),
                                        int(a.get("deformable_group", 1)),
                                        bool(a.get("bilinear_interpolation_pad", False)), name=op.name)


def _multiclass_nms(op: OpView) -> Node:
    """MulticlassNms-8 and -9 (-9 also with boxes [C, M, 4], scores [C, M] and roisnum)."""
    a = op.attrs
    return opset.multiclass_nms(
        op.value(0), op.value(1), _optional(op, 2), str(a.get("sort_result_type", "none")),
        bool(a.get("sort_result_across_batch", False)), str(a.get("output_type", "i64")),
        float(a.get("iou_threshold", 0.0)), float(a.get("score_threshold", 0.0)), int(a.get("nms_top_k", -1)),
        int(a.get("keep_top_k", -1)), int(a.get("background_class", -1)), float(a.get("nms_eta", 1.0)),
        bool(a.get("normalized", True)), name=op.name)


def _matrix_nms(op: OpView) -> Node:
    a = op.attrs
    return opset.matrix_nms(
        op.value(0), op.value(1), str(a.get("sort_result_type", "none")),
        bool(a.get("sort_result_across_batch", False)), str(a.get("output_type", "i64")),
        float(a.get("score_threshold", 0.0)), int(a.get("nms_top_k", -1)), int(a.get("keep_top_k", -1)),
        int(a.get("background_class", -1)), str(a.get("decay_function", "linear")),
        float(a.get("gaussian_sigma", 2.0)), float(a.get("post_threshold", 0.0)),
        bool(a.get("normalized", True)), name=op.name)


def _psroi_pooling(op: OpView) -> Node:
    a = op.attrs
    return opset.psroi_pooling(op.value(0), op.value(1), int(a["output_dim"]), int(a["group_size"]),
                               float(a["spatial_scale"]), int(a.get("spatial_bins_x", 1)),
                               int(a.get("spatial_bins_y", 1)), str(a.get("mode", "average")), name=op.name)


def _gelu(op: OpView) -> Node:
    return opset.gelu(op.value(0), str(op.attrs.get("approximation_mode", "erf")).lower(), name=op.name)


_ATTRIBUTE_OPS: dict[str, Build] = {
    "Assign": lambda op: assign(op.value(0), str(op.attrs["variable_id"]), name=op.name),
    "AdaptiveAvgPool": lambda op: opset.adaptive_avg_pool(op.value(0), op.ints(1), name=op.name),
    "AdaptiveMaxPool": lambda op: opset.adaptive_max_pool(
        op.value(0), op.ints(1), op.attrs.get("index_element_type", "i64"), name=op.name),
    "AvgPool": _avg_pool,
    "BatchToSpace": lambda op: opset.batch_to_space(op.value(0), op.ints(1), op.ints(2), op.ints(3),
                                                    name=op.name),
    "BatchNormInference": _batch_norm,
    "Broadcast": _broadcast,
    "Clamp": lambda op: opset.clamp(op.value(0), op.attrs["min"], op.attrs["max"], name=op.name),
    "Concat": lambda op: opset.concat([op.value(i) for i in range(op.size)], int(op.attrs["axis"]),
                                      name=op.name),
    "Convert": _convert,
    "Identity": lambda op: opset.identity(op.value(0), name=op.name),
    "ConvertLike": lambda op: opset.convert_like(op.value(0), op.value(1), name=op.name),
    "Convolution": _convolution("convolution"),
    "ConvolutionBackpropData": _backprop("convolution_backprop_data"),
    "CumSum": lambda op: opset.cum_sum(op.value(0), op.ints(1) if op.size > 1 else np.int64(0),
                                       bool(op.attrs["exclusive"]), bool(op.attrs["reverse"]), name=op.name),
    "CTCGreedyDecoder": lambda op: opset.ctc_greedy_decoder(op.value(0), op.value(1),
                                                            bool(op.attrs.get("ctc_merge_repeated", True)),
                                                            name=op.name),
    "CTCGreedyDecoderSeqLen": lambda op: opset.ctc_greedy_decoder_seq_len(
        op.value(0), op.value(1), _optional(op, 2), bool(op.attrs.get("merge_repeated", True)),
        op.attrs.get("classes_index_type", "i32"), op.attrs.get("sequence_length_type", "i32"), name=op.name),
    "DeformableConvolution": _deformable_convolution,
    "DetectionOutput": lambda op: opset.detection_output(
        op.value(0), op.value(1), op.value(2), dict(op.attrs), _optional(op, 3), _optional(op, 4),
        name=op.name),
    "DFT": _fourier("dft"),
    "DepthToSpace": lambda op: opset.depth_to_space(op.value(0), op.attrs["mode"],
                                                    int(op.attrs["block_size"]), name=op.name),
    "Einsum": lambda op: opset.einsum([op.value(i) for i in range(op.size)], op.attrs["equation"],
                                      name=op.name),
    "EmbeddingBagOffsetsSum": lambda op: opset.embedding_bag_offsets_sum(
        op.value(0), op.value(1), op.value(2), _optional(op, 3), _optional(op, 4), name=op.name),
    "EmbeddingBagPackedSum": lambda op: opset.embedding_bag_packed_sum(
        op.value(0), op.value(1), _optional(op, 2), name=op.name),
    "EmbeddingSegmentsSum": lambda op: opset.embedding_segments_sum(
        op.value(0), op.value(1), op.value(2), op.value(3), _optional(op, 4), _optional(op, 5), name=op.name),
    "Bucketize": lambda op: opset.bucketize(op.value(0), op.value(1), str(op.attrs["output_type"]),
                                           bool(op.attrs["with_right_bound"]), name=op.name),
    "Elu": lambda op: opset.elu(op.value(0), float(op.attrs["alpha"]), name=op.name),
    "ExtractImagePatches": lambda op: opset.extract_image_patches(
        op.value(0), op.attrs["sizes"], op.attrs["strides"], op.attrs["rates"], op.attrs["auto_pad"],
        name=op.name),
    "FakeQuantize": lambda op: opset.fake_quantize(
        op.value(0), op.value(1), op.value(2), op.value(3), op.value(4), int(op.attrs["levels"]),
        str(op.attrs.get("auto_broadcast", "numpy")), name=op.name),
    "Eye": lambda op: opset.eye(op.arg(0), op.arg(1), op.arg(2), op.attrs["output_type"],
                                op.arg(3) if op.size > 3 else None, name=op.name),
    "FakeConvert": lambda op: opset.fake_convert(
        op.value(0), op.value(1), _optional(op, 2), str(op.attrs.get("destination_type", "f8e4m3")),
        name=op.name),
    "Gather": _gather,
    "GatherElements": lambda op: opset.gather_elements(op.value(0), op.value(1), int(op.attrs["axis"]),
                                                       name=op.name),
    "GatherND": _gather_nd,
    "Gelu": _gelu,
    "GridSample": lambda op: opset.grid_sample(op.value(0), op.value(1), dict(op.attrs), name=op.name),
    "GRN": lambda op: opset.grn(op.value(0), float(op.attrs["bias"]), name=op.name),
    "GroupConvolution": _convolution("group_convolution"),
    "GRUCell": _recurrent("gru_cell", 5),
    "GRUSequence": _recurrent("gru_sequence", 6),
    "GroupConvolutionBackpropData": _backprop("group_convolution_backprop_data"),
    "GroupNormalization": lambda op: opset.group_normalization(
        op.value(0), op.value(1), op.value(2), int(op.attrs["num_groups"]), float(op.attrs["epsilon"]),
        name=op.name),
    "HardSigmoid": lambda op: opset.hard_sigmoid(op.value(0), op.arg(1), op.arg(2), name=op.name),
    "IDFT": _fourier("idft"),
    "Interpolate": _interpolate,
    "IRDFT": _fourier("irdft"),
    "IsInf": lambda op: opset.is_inf(op.value(0), dict(op.attrs), name=op.name),
    "LogSoftmax": lambda op: opset.log_softmax(op.value(0), int(op.attrs["axis"]), name=op.name),
    "LSTMCell": _recurrent("lstm_cell", 6),
    "LSTMSequence": _recurrent("lstm_sequence", 7),
    "LRN": lambda op: opset.lrn(op.value(0), op.constant(1, "LRN axes"), float(op.attrs["alpha"]),
                                float(op.attrs["beta"]), float(op.attrs["bias"]), int(op.attrs["size"]),
                                name=op.name),
    "MatMul": lambda op: opset.matmul(op.value(0), op.value(1), bool(op.attrs["transpose_a"]),
                                      bool(op.attrs["transpose_b"]), name=op.name),
    "MaxPool": _max_pool,
    "Multinomial": _multinomial,
    "MulticlassNms": _multiclass_nms,
    "MatrixNms": _matrix_nms,
    "MVN": _mvn,
    "NonZero": lambda op: opset.non_zero(op.value(0), op.attrs.get("output_type", "i64"), name=op.name),
    "NormalizeL2": lambda op: opset.normalize_l2(op.value(0), op.constant(1, "NormalizeL2 axes"),
                                                 float(op.attrs["eps"]), op.attrs["eps_mode"], name=op.name),
    "OneHot": _one_hot,
    "Pad": _pad,
    "PSROIPooling": _psroi_pooling,
    "PRelu": lambda op: opset.prelu(op.value(0), op.value(1), name=op.name),
    "Range": _range,
    "RDFT": _fourier("rdft"),
    "ReadValue": _read_value,
    "RNNCell": _recurrent("rnn_cell", 5),
    "RNNSequence": _recurrent("rnn_sequence", 6),
    "Reshape": lambda op: opset.reshape(op.value(0), op.ints(1), bool(op.attrs["special_zero"]),
                                        name=op.name),
    "ReverseSequence": lambda op: opset.reverse_sequence(op.value(0), op.ints(1), int(op.attrs["batch_axis"]),
                                                         int(op.attrs["seq_axis"]), name=op.name),
    "Roll": lambda op: opset.roll(op.value(0), op.ints(1), op.ints(2), name=op.name),
    "Round": lambda op: opset.round(op.value(0), str(op.attrs["mode"]), name=op.name),
    "ScaledDotProductAttention": lambda op: opset.scaled_dot_product_attention(
        op.value(0), op.value(1), op.value(2), _optional(op, 3), _optional(op, 4),
        bool(op.attrs.get("causal", False)), name=op.name),
    "ScatterElementsUpdate": _scatter_elements,
    "ScatterNDUpdate": lambda op: opset.scatter_nd_update(op.value(0), op.ints(1), op.value(2),
                                                          op.attrs.get("reduction"), name=op.name),
    "ScatterUpdate": lambda op: opset.scatter_update(op.value(0), op.ints(1), op.value(2),
                                                     op.constant(3, "ScatterUpdate axis"), name=op.name),
    "Select": lambda op: opset.select(op.value(0), op.value(1), op.value(2),
                                      str(op.attrs.get("auto_broadcast", "numpy")), name=op.name),
    "Selu": lambda op: opset.selu(op.value(0), op.arg(1), op.arg(2), name=op.name),
    "SpaceToBatch": lambda op: opset.space_to_batch(op.value(0), op.ints(1), op.ints(2), op.ints(3),
                                                    name=op.name),
    "ShapeOf": lambda op: opset.shape_of(op.value(0), op.attrs.get("output_type", "i64"), name=op.name),
    "ShuffleChannels": lambda op: opset.shuffle_channels(op.value(0), int(op.attrs["axis"]),
                                                         int(op.attrs["group"]), name=op.name),
    "Slice": lambda op: opset.slice(op.value(0), op.ints(1), op.ints(2), op.ints(3),
                                    op.ints(4) if op.size > 4 else None, name=op.name),
    "Softmax": lambda op: opset.softmax(op.value(0), int(op.attrs["axis"]), name=op.name),
    "SpaceToDepth": lambda op: opset.space_to_depth(op.value(0), op.attrs["mode"],
                                                    int(op.attrs["block_size"]), name=op.name),
    "Split": lambda op: opset.split(op.value(0), op.constant(1, "Split axis"), int(op.attrs["num_splits"]),
                                    name=op.name),
    "Squeeze": _squeeze,
    "StridedSlice": _strided_slice,
    "Swish": lambda op: opset.swish(op.value(0), _optional(op, 1), name=op.name),
    "Tile": lambda op: opset.tile(op.value(0), op.ints(1), name=op.name),
    "TopK": _topk,
    "Transpose": lambda op: opset.transpose(op.value(0), op.constant(1, "Transpose order"), name=op.name),
    "Unique": _unique,
    "Unsqueeze": lambda op: opset.unsqueeze(op.value(0), op.ints(1), name=op.name),
    "VariadicSplit": lambda op: opset.variadic_split(op.value(0), op.constant(1, "VariadicSplit axis"),
                                                     op.constant(2, "VariadicSplit split_lengths"),
                                                     name=op.name),
}

def _if(op: OpView) -> Node:
    """An If, its two bodies rebuilt by the same reader; inputs and outputs as its descriptions say."""
    from inferplex.api.ir.graph import rebuild

    node = op.node
    bodies = [rebuild(node.get_function(side), f"{op.name} {label} body")
              for side, label in ((0, "then"), (1, "else"))]
    built = opset.if_op(op.value(0), name=op.name)
    built.set_then_body(bodies[0])
    built.set_else_body(bodies[1])
    feeds: dict[int, list[Any]] = {}
    picks: dict[int, list[Any]] = {}
    for side, body in enumerate(bodies):
        for described in node.get_input_descriptions(side):
            feeds.setdefault(described.input_index, [None, None])[side] = \
                body.get_parameters()[described.body_parameter_index]
        for described in node.get_output_descriptions(side):
            picks.setdefault(described.output_index, [None, None])[side] = \
                body.get_results()[described.body_value_index]
    for index in sorted(feeds):
        built.set_input(op.value(index), *feeds[index])
    for index in sorted(picks):
        built.set_output(*picks[index])
    return built


def _loop(op: OpView) -> Node:
    """A Loop or TensorIterator, its body rebuilt by the same reader; its sliced, merged and
    invariant inputs and its last-value and concatenated outputs as its descriptions say."""
    from inferplex.api.ir.graph import rebuild

    node = op.node
    body = rebuild(node.get_function(), f"{op.name} body")
    if op.type_name == "Loop":
        built = opset.loop(op.value(0), op.value(1), name=op.name)
        built.set_function(body)
        built.set_special_body_ports(list(node.get_special_body_ports()))
    else:
        built = opset.tensor_iterator(name=op.name)
        built.set_function(body)
    parameters, results = body.get_parameters(), body.get_results()
    for described in node.get_input_descriptions():
        kind = type(described).__name__
        parameter, value = parameters[described.body_parameter_index], op.value(described.input_index)
        if kind == "SliceInputDescription":
            built.set_sliced_input(parameter, value, described.start, described.stride, described.part_size,
                                   described.end, described.axis)
        elif kind == "MergedInputDescription":
            built.set_merged_input(parameter, value, results[described.body_value_index])
        else:
            built.set_invariant_input(parameter, value)
    for described in sorted(node.get_output_descriptions(), key=lambda d: d.output_index):
        result = results[described.body_value_index]
        if type(described).__name__ == "ConcatOutputDescription":
            built.get_concatenated_slices(result, described.start, described.stride, described.part_size,
                                          described.end, described.axis)
        else:
            built.get_iter_value(result, described.iteration)
    return built


BUILDERS: dict[str, Build] = {
    "If": _if,
    "Loop": _loop,
    "TensorIterator": _loop,
    **{type_name: _unary(function) for type_name, function in _UNARY.items()},
    **{type_name: _binary(function) for type_name, function in _BINARY.items()},
    **{type_name: _reduce(function) for type_name, function in _REDUCE.items()},
    **_ATTRIBUTE_OPS,
    **DETECTION_BUILDERS,
    **RECENT_BUILDERS,
}
"""OpenVINO op type -> the function that builds it (Parameter, Constant and Result are the reader's)."""
