"""Models quantized with ``onnxruntime.quantization``, on the CPU and on ``GPU.0``, against ONNX.

Six small float models (:mod:`quantization_matrix_models`) go through
``quantize_static`` (QDQ and QOperator formats), ``quantize_dynamic`` and
``MatMulNBitsQuantizer`` (QDQ format) under many of their options; each quantized
model then runs on ``CPU`` and on ``GPU.0`` (emulated on torch's CPU) with
``PERFORMANCE_HINT`` LATENCY (and, on the GPU, ``INFERENCE_PRECISION_HINT`` f32).
QOperator cases quantize only the ops whose quantized forms are standard ONNX ops
(QLinearConv, QLinearMatMul): on the others ``quantize_static`` writes
com.microsoft ops (QGemm, QLinearAdd, QLinearConcat, QLinearGlobalAveragePool,
QLinearSigmoid, QLinearMul, QLinearSoftmax).

The reference is the model as ONNX defines it, computed by ONNX Runtime running
each op as written (graph optimizations off) or, for models with integer ops, by
ONNX's reference evaluator.  ONNX Runtime's default session departs from that
definition on x86 CPUs without VNNI: its fused QDQ kernels, QLinearConv with
per-channel weights and MatMulInteger multiply uint8 by int8 with ``vpmaddubsw``,
which saturates 16-bit pair sums once int8 weights use more than 7 bits (the
default unless ``reduce_range``); and, on any CPU, its fused kernels depart on
16-bit types and it fuses blockwise weights into MatMulNBits, which computes less
accurately (:func:`test_onnx_runtime_default_session_departs_without_vnni` shows
one).

Tolerance: a quantized model requantizes its activations, and a value that sits
on a rounding boundary may round either way under another (equally right) float
summation order; a step so lost grows through the layers after it (a 2x2
AveragePool of quantized values lands on such boundaries often: the models here
have none).  The outputs must be within ``STEPS`` steps of the output's
scale (the scale of the DequantizeLinear that makes the output; for a float
output, a thousandth of its largest magnitude) plus one float32 rounding, and
at most 5% of them may be a step off.
"""

from __future__ import annotations

import platform
import time
from functools import cache
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator
from quantization_matrix_models import MODELS, FloatModel

import inferplex as ov

quantization = pytest.importorskip("onnxruntime.quantization")
torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

STEPS = 1
"""Outputs must lie within this many steps of the output's scale of the reference's."""

DEVICES = {"CPU": {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"},
           "GPU.0": {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}}
"""Each device at f32: a CPU with bf16 (AVX512_BF16, AMX) runs a model's float ops in bf16 by default,
as OpenVINO does, and ONNX's values are those of float32."""

Q = quantization.QuantType


class _Reader:
    """Calibration batches for quantize_static."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._feeds = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


# (model, format, opset, options): format is "qdq", "qop" (quantize_static), "blockwise"
# (MatMulNBitsQuantizer) or "dynamic"; the option "preprocess" runs onnxruntime.quantization's
# quant_pre_process (shape inference, ONNX Runtime's basic graph optimizations) first, as ONNX
# Runtime's quantization guide advises
CASES: dict[str, tuple[str, str, int, dict[str, Any]]] = {
    # QDQ: per tensor / per channel, each activation type with each weight type
    "cnn-qdq-u8u8": ("cnn", "qdq", 13, {"activation_type": Q.QUInt8, "weight_type": Q.QUInt8}),
    "cnn-qdq-u8s8-pc": ("cnn", "qdq", 13, {"activation_type": Q.QUInt8, "weight_type": Q.QInt8,
                                           "per_channel": True}),
    "cnn-qdq-s8s8-pc-rr": ("cnn", "qdq", 13, {"activation_type": Q.QInt8, "weight_type": Q.QInt8,
                                              "per_channel": True, "reduce_range": True}),
    "cnn-qdq-u16s8": ("cnn", "qdq", 21, {"activation_type": Q.QUInt16, "weight_type": Q.QInt8}),
    "cnn-qdq-s16s16": ("cnn", "qdq", 21, {"activation_type": Q.QInt16, "weight_type": Q.QInt16}),
    "cnn-qdq-s4-pc": ("cnn", "qdq", 21, {"activation_type": Q.QUInt8, "weight_type": Q.QInt4,
                                         "per_channel": True}),
    "cnn-qdq-entropy": ("cnn", "qdq", 13, {"calibrate_method": quantization.CalibrationMethod.Entropy}),
    "cnn-qdq-keep-removable": ("cnn", "qdq", 13, {"extra_options": {"QDQKeepRemovableActivations": True}}),
    "cnn-qdq-dedicated": ("cnn", "qdq", 13, {"extra_options": {"DedicatedQDQPair": True}}),
    "cnn-qdq-weight-pair": ("cnn", "qdq", 13, {"extra_options": {"AddQDQPairToWeight": True}}),
    "cnn-qdq-movers": ("cnn", "qdq", 13, {"op_types_to_quantize": ["Conv", "MaxPool", "Concat", "Resize"]}),
    "cnn-qdq-conv-only": ("cnn", "qdq", 13, {"op_types_to_quantize": ["Conv"]}),
    "separable-qdq-u8s8-pc": ("separable", "qdq", 13, {"activation_type": Q.QUInt8, "weight_type": Q.QInt8,
                                                       "per_channel": True}),
    "separable-qdq-s8s8-pc-rr": ("separable", "qdq", 13, {"activation_type": Q.QInt8, "weight_type": Q.QInt8,
                                                          "per_channel": True, "reduce_range": True}),
    "separable-qdq-u8u8": ("separable", "qdq", 13, {"activation_type": Q.QUInt8, "weight_type": Q.QUInt8}),
    "separable-qdq-s4": ("separable", "qdq", 21, {"activation_type": Q.QInt8, "weight_type": Q.QInt4}),
    "mlp-qdq-u8s8": ("mlp", "qdq", 13, {"activation_type": Q.QUInt8, "weight_type": Q.QInt8}),
    "mlp-qdq-s8s8-sym": ("mlp", "qdq", 13, {"activation_type": Q.QInt8, "weight_type": Q.QInt8,
                                            "extra_options": {"ActivationSymmetric": True,
                                                              "WeightSymmetric": True}}),
    "mlp-qdq-u8u8-pc-axis": ("mlp", "qdq", 13, {
        "activation_type": Q.QUInt8, "weight_type": Q.QUInt8, "per_channel": True,
        "extra_options": {"QDQOpTypePerChannelSupportToAxis": {"MatMul": 1}}}),
    "mlp-qdq-percentile": ("mlp", "qdq", 13, {"calibrate_method": quantization.CalibrationMethod.Percentile}),
    "mlp-qdq-s8-asymmetric-weights": ("mlp", "qdq", 13, {"weight_type": Q.QInt8,
                                                         "extra_options": {"WeightSymmetric": False}}),
    "mlp-qdq-s4-pc": ("mlp", "qdq", 21, {"weight_type": Q.QInt4, "per_channel": True}),
    "mlp-qdq-u16u8": ("mlp", "qdq", 21, {"activation_type": Q.QUInt16, "weight_type": Q.QUInt8}),
    "transformer-qdq-u8s8": ("transformer", "qdq", 17, {"activation_type": Q.QUInt8, "weight_type": Q.QInt8}),
    "transformer-qdq-s8s8-pc": ("transformer", "qdq", 17, {"activation_type": Q.QInt8, "weight_type": Q.QInt8,
                                                           "per_channel": True}),
    "transformer-qdq-preprocessed-pc": ("transformer", "qdq", 17, {"per_channel": True, "preprocess": True}),
    "transformer-qdq-matmul-only": ("transformer", "qdq", 17, {"op_types_to_quantize": ["MatMul"]}),
    "transformer-qdq-s16-sym": ("transformer", "qdq", 21, {
        "activation_type": Q.QInt16, "weight_type": Q.QInt8, "extra_options": {"ActivationSymmetric": True}}),
    "transformer-qdq-u16s8": ("transformer", "qdq", 21, {"activation_type": Q.QUInt16,
                                                         "weight_type": Q.QInt8}),
    "decoder-qdq-u8s8": ("decoder", "qdq", 13, {"activation_type": Q.QUInt8, "weight_type": Q.QInt8}),
    "decoder-qdq-s16s8": ("decoder", "qdq", 21, {"activation_type": Q.QInt16, "weight_type": Q.QInt8}),
    "decoder-qdq-s8s8-pc": ("decoder", "qdq", 13, {"activation_type": Q.QInt8, "weight_type": Q.QInt8,
                                                   "per_channel": True}),
    "embedding-qdq-u8u8": ("embedding", "qdq", 13, {"activation_type": Q.QUInt8, "weight_type": Q.QUInt8}),
    "embedding-qdq-u16u16": ("embedding", "qdq", 21, {"activation_type": Q.QUInt16,
                                                      "weight_type": Q.QUInt16}),
    "embedding-qdq-s8s8": ("embedding", "qdq", 13, {"activation_type": Q.QInt8, "weight_type": Q.QInt8}),
    # QOperator: only standard-domain ops (QLinearConv, QLinearMatMul)
    "cnn-qop-conv": ("cnn", "qop", 13, {"op_types_to_quantize": ["Conv"]}),
    "cnn-qop-conv-pc": ("cnn", "qop", 13, {"op_types_to_quantize": ["Conv"], "per_channel": True,
                                           "weight_type": Q.QInt8, "activation_type": Q.QUInt8}),
    "separable-qop": ("separable", "qop", 13, {"op_types_to_quantize": ["Conv"]}),
    "mlp-qop-matmul": ("mlp", "qop", 13, {"op_types_to_quantize": ["MatMul"]}),
    "mlp-qop-matmul-pc": ("mlp", "qop", 13, {"op_types_to_quantize": ["MatMul"], "per_channel": True}),
    "cnn-qop-conv-s8s8": ("cnn", "qop", 13, {"op_types_to_quantize": ["Conv"], "activation_type": Q.QInt8}),
    "transformer-qop-matmul": ("transformer", "qop", 17, {"op_types_to_quantize": ["MatMul"]}),
    "decoder-qop": ("decoder", "qop", 13, {"op_types_to_quantize": ["ConvTranspose"]}),
    # blockwise 4-bit weights (MatMulNBitsQuantizer, QDQ format; opset 21); a float output
    "mlp-blockwise-sym-16": ("mlp", "blockwise", 21, {"block_size": 16, "is_symmetric": True}),
    "transformer-blockwise-asym-32": ("transformer", "blockwise", 21, {"block_size": 32,
                                                                       "is_symmetric": False}),
    # dynamic
    "cnn-dyn-u8": ("cnn", "dynamic", 13, {"weight_type": Q.QUInt8, "op_types_to_quantize": ["Conv"]}),
    "cnn-dyn-s8-pc-rr": ("cnn", "dynamic", 13, {"weight_type": Q.QInt8, "per_channel": True,
                                                "reduce_range": True, "op_types_to_quantize": ["Conv"]}),
    "separable-dyn-s8": ("separable", "dynamic", 13, {"weight_type": Q.QInt8,
                                                      "op_types_to_quantize": ["Conv"]}),
    "mlp-dyn-u8": ("mlp", "dynamic", 13, {"weight_type": Q.QUInt8}),
    "mlp-dyn-s8-pc": ("mlp", "dynamic", 13, {"weight_type": Q.QInt8, "per_channel": True}),
    "mlp-dyn-default": ("mlp", "dynamic", 13, {}),
    "cnn-dyn-s8": ("cnn", "dynamic", 13, {"weight_type": Q.QInt8, "op_types_to_quantize": ["Conv"]}),
    "transformer-dyn-default": ("transformer", "dynamic", 17, {}),
    "mlp-dyn-s8-rr": ("mlp", "dynamic", 13, {"weight_type": Q.QInt8, "reduce_range": True}),
    "transformer-dyn-constb": ("transformer", "dynamic", 17, {
        "weight_type": Q.QInt8, "reduce_range": True, "extra_options": {"MatMulConstBOnly": True}}),
    "transformer-dyn-pc": ("transformer", "dynamic", 17, {"weight_type": Q.QUInt8, "per_channel": True,
                                                          "op_types_to_quantize": ["MatMul"]}),
    "embedding-dyn-gather": ("embedding", "dynamic", 13, {"weight_type": Q.QUInt8,
                                                          "op_types_to_quantize": ["Gather", "MatMul"]}),
}


@cache
def _quantized(case: str) -> tuple[onnx.ModelProto, list[dict[str, np.ndarray]]]:
    """The case's quantized model (IR 10) and two input batches."""
    name, form, opset, options = CASES[case]
    options = dict(options)
    float_model: FloatModel = MODELS[name](opset)
    rng = np.random.default_rng(7)
    with TemporaryDirectory() as folder:
        source, target = Path(folder, "float.onnx"), Path(folder, "quantized.onnx")
        onnx.save(float_model.model, source)
        if options.pop("preprocess", False):
            quantization.shape_inference.quant_pre_process(source, source)
        if form == "dynamic":
            quantization.quantize_dynamic(source, target, **options)
        elif form == "blockwise":  # weight-only, 4 bits per block of K
            _quantize_blockwise(float_model.model, target, **options)
        else:
            calibration = _Reader([float_model.feed(rng) for _ in range(4)])
            fmt = quantization.QuantFormat.QDQ if form == "qdq" else quantization.QuantFormat.QOperator
            quantization.quantize_static(source, target, calibration, quant_format=fmt, **options)
        model = onnx.load(target)
    model.ir_version = 10
    assert all(node.domain in ("", "ai.onnx") for node in model.graph.node), "com.microsoft ops written"
    if float_model.rows is not None:  # a symbolic batch axis: one row, then more than calibrated
        return model, [float_model.rows(rng, 1), float_model.rows(rng, 9)]
    return model, [float_model.feed(rng) for _ in range(2)]


def _quantize_blockwise(model: onnx.ModelProto, target: Path, block_size: int, is_symmetric: bool) -> None:
    """MatMulNBitsQuantizer in the QDQ format: int4 weights, DequantizeLinear with ``block_size``."""
    from onnxruntime.quantization import matmul_nbits_quantizer as nbits

    config = nbits.DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=is_symmetric,
                                                quant_format=quantization.QuantFormat.QDQ,
                                                op_types_to_quantize=("MatMul",))
    quantizer = nbits.MatMulNBitsQuantizer(model, algo_config=config)
    quantizer.process()
    onnx.save(quantizer.model.model, target)


_INTEGER_KERNELS = frozenset({"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"})


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The model's output as ONNX defines it (see the module docstring for why not ONNX Runtime's
    default session): ONNX Runtime running each op as written, or for a model with integer ops
    ONNX's reference evaluator, whose integer ops sum exactly (its QuantizeLinear/DequantizeLinear
    are registered from opset 19 on, where they read 8-bit types as before)."""
    if not any(node.op_type in _INTEGER_KERNELS for node in model.graph.node):
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return np.asarray(session.run(None, feeds)[0])
    newer = onnx.ModelProto()
    newer.CopyFrom(model)
    for opset in newer.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = max(opset.version, 19)
    return np.asarray(ReferenceEvaluator(newer).run(None, feeds)[0])


def _output_step(model: onnx.ModelProto, reference: np.ndarray) -> float:
    """One step of the output's scale (see the module docstring)."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    producer = next(n for n in model.graph.node if model.graph.output[0].name in n.output)
    if producer.op_type == "DequantizeLinear" and producer.input[1] in inits:
        return float(np.max(inits[producer.input[1]]))
    return float(np.abs(reference).max()) / 1000


def _assert_within_steps(got: np.ndarray, want: np.ndarray, step: float, steps: float = STEPS) -> None:
    # a float32 output is one rounding of the exact value: its ulp comes on top of the steps
    rounding = 2 * np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    off = np.maximum(np.abs(got.astype(np.float64) - want) - rounding, 0) / step
    assert off.max() <= steps * 1.001, f"{off.max():.2f} steps of {step:.3g} off at {np.argmax(off)}"
    assert np.mean(off > 0.5) <= 0.05, f"{np.mean(off > 0.5):.0%} of the outputs a step off or more"


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


@pytest.fixture
def cuda_core(monkeypatch: pytest.MonkeyPatch) -> ov.Core:
    """A Core whose GPU.0 is the first CUDA GPU (not an emulated one)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    monkeypatch.delenv("INFERPLEX_EMULATED_GPUS", raising=False)
    return ov.Core()


@pytest.mark.parametrize("device", list(DEVICES))
@pytest.mark.parametrize("case", list(CASES))
def test_quantized_model_matches_onnx(core: ov.Core, case: str, device: str) -> None:
    model, batches = _quantized(case)
    compiled = core.compile_model(model, device, DEVICES[device])
    for feeds in batches:
        want = _reference(model, feeds)
        _assert_within_steps(np.asarray(compiled(feeds)[0]), want, _output_step(model, want))


@pytest.mark.parametrize("case", ["mlp-qdq-s8s8-sym", "transformer-qdq-u16s8", "cnn-qop-conv-pc",
                                  "mlp-dyn-default", "mlp-dyn-s8-pc", "cnn-dyn-s8",
                                  "transformer-dyn-default", "mlp-blockwise-sym-16"])
def test_quantized_model_on_the_onnx_runtime_engine_matches_onnx(core: ov.Core, case: str) -> None:
    """The CPU's ONNX Runtime engine, asked for by name, where ONNX Runtime's default session departs."""
    model, batches = _quantized(case)
    compiled = core.compile_model(model, "CPU", {"ENGINE": "ONNXRUNTIME"})
    for feeds in batches:
        want = _reference(model, feeds)
        _assert_within_steps(np.asarray(compiled(feeds)[0]), want, _output_step(model, want))


@pytest.mark.parametrize("case", ["mlp-qdq-u8s8", "cnn-qdq-u8s8-pc"])
def test_quantized_model_under_f16_hint_on_the_gpu_stays_close(core: ov.Core, case: str) -> None:
    """f16 rounds the float ops between the pairs: more values land on the other side of a
    rounding boundary, each a step off."""
    model, batches = _quantized(case)
    compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f16"})
    want = _reference(model, batches[0])
    off = np.abs(np.asarray(compiled(batches[0])[0], np.float64) - want) / _output_step(model, want)
    assert off.max() <= 4.001 and np.mean(off > 0.5) <= 0.25


def test_cpu_says_why_it_runs_a_16_bit_model_on_onnx_runtime(core: ov.Core) -> None:
    model, _ = _quantized("cnn-qdq-u16s8")
    compiled = core.compile_model(model, "CPU")
    assert compiled.get_property("ENGINE") == "ONNXRUNTIME"
    assert "16-bit" in compiled.get_property("ENGINE_FALLBACK_REASON")
    asked = core.compile_model(model, "CPU", {"ENGINE": "OPENVINO"})  # an explicit engine is kept
    assert asked.get_property("ENGINE") == "OPENVINO"


@pytest.mark.parametrize("case", ["cnn-qop-conv-pc", "mlp-qdq-s8s8-sym", "mlp-dyn-default"])
def test_quantized_model_from_the_cpu_cache_keeps_its_values(core: ov.Core, tmp_path: Path,
                                                             case: str) -> None:
    """A program the cache holds runs the model as the first compile did (ONNX Runtime's program
    with its quantized ops as written, where the CPU chose that)."""
    model, batches = _quantized(case)
    config = {"CACHE_DIR": str(tmp_path), "ENGINE": "ONNXRUNTIME"}
    first = core.compile_model(model, "CPU", config)
    cached = core.compile_model(model, "CPU", config)
    assert cached.get_property("LOADED_FROM_CACHE")
    want = _reference(model, batches[0])
    for compiled in (first, cached):
        _assert_within_steps(np.asarray(compiled(batches[0])[0]), want, _output_step(model, want))


_PRODUCTS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "QLinearConv", "QLinearMatMul",
                       "MatMulInteger"})


@pytest.mark.parametrize(("case", "on_cpu"), [
    ("cnn-qdq-u8s8-pc", "products"), ("transformer-qdq-u16s8", "every other"),
    ("cnn-qop-conv-pc", "products"), ("mlp-dyn-default", "every other")])
def test_quantized_model_split_between_gpu_and_cpu_matches_onnx(core: ov.Core, case: str,
                                                                on_cpu: str) -> None:
    """HETERO with the products (or every other op) on the CPU, the rest on GPU.0: quantized
    tensors cross devices, and each part runs on its device as the whole model would."""
    model, batches = _quantized(case)
    split = core.read_model(model)
    for index, op in enumerate(split.get_ops()):
        cpu = op.get_type_name() in _PRODUCTS if on_cpu == "products" else index % 2 == 1
        op.get_rt_info()["affinity"] = "CPU" if cpu else "GPU.0"
    compiled = core.compile_model(split, "HETERO:GPU.0,CPU",
                                  {"DEVICE_PROPERTIES": {"GPU.0": DEVICES["GPU.0"], "CPU": DEVICES["CPU"]}})
    assert compiled.get_property("HETERO_NUMBER_OF_SUBMODELS") > 2
    for feeds in batches:
        want = _reference(model, feeds)
        _assert_within_steps(np.asarray(compiled(feeds)[0]), want, _output_step(model, want))


def _vnni(core: ov.Core) -> bool:
    return bool({"AVX512_VNNI", "AVX_VNNI", "AMX"} & set(core.get_property("CPU", "INSTRUCTION_SETS")))


def _exact_int8_products(core: ov.Core) -> bool:
    """An Intel CPU with VNNI or AMX (or no x86 at all): OpenVINO's 8-bit kernels sum exactly there."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    return _vnni(core) and "Intel" in core.get_property("CPU", "FULL_DEVICE_NAME")


def test_cpu_engine_choice_for_8_bit_weights_follows_the_cpu(core: ov.Core) -> None:
    """Static 8-bit weights (int8, 7-bit ``reduce_range`` ones and uint8) leave OpenVINO on x86 CPUs
    other than Intel's with VNNI; 4-bit weights and dynamically quantized models stay on OpenVINO."""
    expected = "OPENVINO" if _exact_int8_products(core) else "ONNXRUNTIME"
    for case in ("mlp-qdq-u8s8", "cnn-qdq-s8s8-pc-rr", "cnn-qop-conv", "cnn-qdq-u8u8"):
        compiled = core.compile_model(_quantized(case)[0], "CPU")
        assert compiled.get_property("ENGINE") == expected
        if expected == "ONNXRUNTIME":
            assert "VNNI" in compiled.get_property("ENGINE_FALLBACK_REASON")
    for case in ("cnn-qdq-s4-pc", "mlp-dyn-default"):
        assert core.compile_model(_quantized(case)[0], "CPU").get_property("ENGINE") == "OPENVINO"


def test_onnx_runtime_default_session_departs_without_vnni(core: ov.Core) -> None:
    """Why the reference is not ONNX Runtime's default session: without VNNI its fused uint8 x int8
    kernels saturate, many steps away from ONNX's definition (and from the CPU device)."""
    if _vnni(core):
        pytest.skip("the CPU has VNNI: ONNX Runtime's int8 kernels sum exactly")
    model, batches = _quantized("mlp-qdq-s8s8-sym")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    fused = np.asarray(session.run(None, batches[0])[0])
    want = _reference(model, batches[0])
    assert np.abs(fused - want).max() > 3 * _output_step(model, want)
    _assert_within_steps(np.asarray(core.compile_model(model, "CPU")(batches[0])[0]), want,
                         _output_step(model, want))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["cnn-qdq-u8s8-pc", "mlp-qdq-s8s8-sym", "transformer-qdq-u8s8",
                                  "transformer-qdq-u16s8", "cnn-qop-conv-pc", "mlp-dyn-default",
                                  "embedding-qdq-s8s8", "decoder-qdq-u8s8"])
def test_quantized_model_on_cuda_matches_onnx(cuda_core: ov.Core, case: str) -> None:
    model, batches = _quantized(case)
    compiled = cuda_core.compile_model(model, "GPU.0", DEVICES["GPU.0"])
    for feeds in batches:
        want = _reference(model, feeds)
        _assert_within_steps(np.asarray(compiled(feeds)[0]), want, _output_step(model, want))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["cnn-qdq-u8s8-pc", "mlp-qdq-s8s8-sym"])
def test_quantized_model_on_the_compiled_cuda_tier_matches_onnx(cuda_core: ov.Core, case: str) -> None:
    model, batches = _quantized(case)
    compiled = cuda_core.compile_model(model, "GPU.0", {**DEVICES["GPU.0"], "TORCH_COMPILE": "YES"})
    compiled(batches[0])
    deadline = time.monotonic() + 300
    while compiled.get_property("COMPILED_TIER") == "COMPILING" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert compiled.get_property("COMPILED_TIER") in ("COMPILED", "KEPT_EAGER")
    for feeds in batches:
        want = _reference(model, feeds)
        _assert_within_steps(np.asarray(compiled(feeds)[0]), want, _output_step(model, want))
