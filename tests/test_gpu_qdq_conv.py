"""QDQ and dynamically quantized convolutions on the GPU device, through the public API.

A QuantizeLinear -> DequantizeLinear pair on one per-tensor scale (the activations
before a QDQ model's convolutions, adds and pools) runs as one fake-quantize call,
recorded as FakeQuantize under the DequantizeLinear's name; the weights'
DequantizeLinear nodes fold at compile time, so the Convs run in float in the
program's precision.  ``quantize_dynamic``'s ``Mul(Cast(ConvInteger))`` chains run
as one float convolution each, recorded under the ConvInteger's name.  Results are
compared with ONNX Runtime running each op as written (see :mod:`quantized_models`),
or with numpy where ONNX Runtime refuses the model; pairs that must not fuse (the
quantized data read elsewhere, two scales) stay as written.  The emulated tests run
on ``GPU.0`` on torch's CPU; the ``gpu`` ones need CUDA.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from quantized_models import PROFILED, ort_unfused, output_scale, profiled, quantized, relu_range_dequantizers
from torch_export import export_onnx

import inferplex as ov

from conftest import make_model

torch = pytest.importorskip("torch")
quantization = pytest.importorskip("onnxruntime.quantization")
nn = torch.nn


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def _cnn() -> onnx.ModelProto:
    """Conv-BN-ReLU, a residual block, max pool, a strided 1x1 Conv, global pool and a Linear head."""
    torch.manual_seed(12)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
            self.body = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16))
            self.down = nn.Conv2d(16, 24, 1, stride=2)
            self.head = nn.Linear(24, 10)

        def forward(self, x: Any) -> Any:
            y = self.stem(x)
            y = torch.nn.functional.max_pool2d(torch.relu(self.body(y) + y), 2)
            return self.head(torch.relu(self.down(y)).mean((2, 3)))

    net = Net()
    with torch.no_grad():  # running statistics that are not the identity
        for bn in (net.stem[1], net.body[1]):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 2.0)
    return export_onnx(net, (torch.randn(2, 3, 12, 12),), ["x"], {"x": {0: "N"}}, opset=13)


def _cnn_feeds(seed: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((2, 3, 12, 12)).astype(np.float32)}


def _check_cnn_fused(model: onnx.ModelProto, records: dict[str, str]) -> None:
    """Every QuantizeLinear ran inside a call: the pairs after the Convs ran inside the Conv's call
    (recorded as the Conv): the two that ``quantize_static`` gave a Relu's range in cuDNN's fused
    call, the body Conv's with the residual Add and the Add's pair in one pass after the
    convolution; the others ran as one fake-quantize call each (recorded as the
    DequantizeLinear); every weight's DequantizeLinear was folded at compile time, and the Convs
    ran."""
    constants = {i.name for i in model.graph.initializer}
    quantizers = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    pairs = {n.name for n in model.graph.node if n.op_type == "DequantizeLinear"
             and n.input[0] in {q.output[0] for q in quantizers}}
    weights = [n.name for n in model.graph.node
               if n.op_type == "DequantizeLinear" and n.input[0] in constants]
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]
    adds = [n.name for n in model.graph.node if n.op_type == "Add"]
    relu_ranges = relu_range_dequantizers(model)
    assert len(quantizers) >= 5 and len(convs) == 3 and len(weights) >= 6 and len(relu_ranges) == 2
    assert len(adds) == 1 and not ({q.name for q in quantizers} | set(adds)) & set(records)
    producers = {o: n for n in model.graph.node for o in n.output}
    nodes = {n.name: n for n in model.graph.node}

    def quantized_op(dequantizer: str) -> str | None:
        source = producers.get(producers[nodes[dequantizer].input[0]].input[0])
        return source.op_type if source is not None else None

    inside = {name for name in pairs if quantized_op(name) in ("Conv", "Add")}
    assert relu_ranges < inside and len(inside) == 4
    assert not any(records.get(name) == "FakeQuantize" for name in inside)
    # of the others, the pooled value's pair changes nothing (MaxPool keeps the grid) and runs no call
    assert sum(records.get(name) == "FakeQuantize" for name in pairs - inside) == len(pairs - inside) - 1
    assert all(records[name] == "constant folded" for name in weights)
    assert all(records[name] == "Conv" for name in convs)


@pytest.mark.parametrize(("per_channel", "activation"),
                         [(True, "QUInt8"), (False, "QUInt8"), (True, "QInt8")])
def test_static_qdq_cnn_matches_onnx_runtime_and_runs_fused(core: ov.Core, tmp_path: Any,
                                                            per_channel: bool, activation: str) -> None:
    model = quantized(tmp_path, _cnn(), True, per_channel=per_channel,
                       activation_type=getattr(quantization.QuantType, activation))
    feeds = _cnn_feeds(21)
    got, records = profiled(core, model, feeds)
    (want,) = ort_unfused(model, feeds)
    step = output_scale(model)
    # float32 convolutions may sum in another order than ONNX Runtime's: an intermediate value on
    # a rounding boundary would move by one step, rarely, and the output with it.
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 1.01)
    assert np.mean(got != want) < 0.02
    _check_cnn_fused(model, records)


def test_static_qdq_cnn_under_f16_hint_stays_close(core: ov.Core, tmp_path: Any) -> None:
    model = quantized(tmp_path, _cnn(), True, per_channel=True)
    feeds = _cnn_feeds(22)
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": "f16"})
    (want,) = ort_unfused(model, feeds)
    step = output_scale(model)
    # f16 activations and weights move some quantized values by a step; the output is handed
    # out from f16 as well.
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 3.01)
    assert np.abs(got - want).mean() < step / 2
    _check_cnn_fused(model, records)


def _stem() -> onnx.ModelProto:
    """A ResNet's stem: Conv-BN-ReLU and a 3 x 3 max pool of stride 2, whose values are the output."""
    torch.manual_seed(13)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
    return export_onnx(net, (torch.randn(2, 3, 13, 13),), ["x"], {"x": {0: "N"}}, opset=13)


def test_static_qdq_stem_max_pool_of_the_relu_range_pair_matches_onnx_runtime(core: ov.Core,
                                                                            tmp_path: Any) -> None:
    # the stem Conv's pair (a Relu's range) runs on the pooled values, in the MaxPool's call; the
    # pair after the MaxPool changes nothing, so the output is what that call made
    model = quantized(tmp_path, _stem(), True, per_channel=True)
    feeds = {"x": np.random.default_rng(24).standard_normal((3, 3, 13, 13)).astype(np.float32)}
    (want,) = ort_unfused(model, feeds)
    step = output_scale(model)
    got, records = profiled(core, model, feeds)
    # a convolution summing in another order may move a value on a rounding boundary by a step
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 1.01)
    assert np.mean(got != want) < 0.02
    # f16 activations and weights move some values by a step, and the output is handed out from f16
    half, _ = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": "f16"})
    np.testing.assert_allclose(half, want, rtol=0, atol=step * 2.01)
    assert np.abs(half - want).mean() < step / 2
    pool = next(n for n in model.graph.node if n.op_type == "MaxPool")
    stem_pair = next(n for n in model.graph.node if n.output[0] == pool.input[0])
    assert stem_pair.op_type == "DequantizeLinear" and stem_pair.name in relu_range_dequantizers(model)
    assert records[pool.name] == "MaxPool" and records.get(stem_pair.name) != "FakeQuantize"


def test_static_qdq_cnn_loaded_from_the_cache_runs_fused(core: ov.Core, tmp_path: Any) -> None:
    model = quantized(tmp_path, _cnn(), True, per_channel=True)
    feeds = _cnn_feeds(23)
    config = {**PROFILED, "CACHE_DIR": str(tmp_path / "cache")}
    cold, _ = profiled(core, model, feeds, config)
    warm, records = profiled(core, model, feeds, config)
    assert core.compile_model(model, "GPU.0", config).get_property("LOADED_FROM_CACHE")
    np.testing.assert_array_equal(warm, cold)
    quantizers = {n.name for n in model.graph.node if n.op_type == "QuantizeLinear"}
    assert not quantizers & set(records) and list(records.values()).count("FakeQuantize") == 3


def _pair_model(data_type: int, scales: tuple[float, float], readers: int) -> onnx.ModelProto:
    """x -> QuantizeLinear -> DequantizeLinear -> Relu, the quantized data also a graph output
    when ``readers`` is 2; the two nodes' scales may differ."""
    zero_type = np.uint8 if data_type == TensorProto.UINT8 else np.int8
    inits = [numpy_helper.from_array(np.array(scales[0], np.float32), "sq"),
             numpy_helper.from_array(np.array(scales[1], np.float32), "sd"),
             numpy_helper.from_array(np.array(3, zero_type), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sq", "z"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "sd", "z"], ["xd"], name="dq"),
             helper.make_node("Relu", ["xd"], ["y"], name="relu")]
    outputs = [("y", TensorProto.FLOAT, ["N", 8])] + ([("xq", data_type, ["N", 8])] if readers == 2 else [])
    return make_model(nodes, [("x", TensorProto.FLOAT, ["N", 8])], outputs, inits, opset=13)


def _pair_feeds(scale: float) -> dict[str, np.ndarray]:
    """Random values, exact halves of the scale (ties), and values far beyond the 8-bit range."""
    rng = np.random.default_rng(19)
    ties = (np.arange(-40, 40, dtype=np.float32) + 0.5) * np.float32(scale)
    wide = np.array([-1e3, -300, -129.5, 127.5, 255.5, 256.5, 300, 1e3], np.float32) * np.float32(scale)
    data = np.concatenate([rng.standard_normal(72).astype(np.float32), ties, wide])
    return {"x": data.reshape(-1, 8)}


def _check_pair_exact(core: ov.Core, data_type: int, precision: str) -> None:
    """The fused pair gives ONNX Runtime's values to the bit: at ties and saturation under either
    precision (a power-of-two scale, whose halves f16 holds exactly), and for any scale at f32."""
    config = {"INFERENCE_PRECISION_HINT": precision}
    scale = 0.0625  # a power of two: x / scale is exact, so the halves are exact ties
    model = _pair_model(data_type, (scale, scale), 1)
    feeds = _pair_feeds(scale)
    got, records = profiled(core, model, feeds, config)
    np.testing.assert_array_equal(got, ort_unfused(model, feeds)[0])
    assert records["dq"] == "FakeQuantize" and "q" not in records
    if precision == "f32":
        model = _pair_model(data_type, (0.0237, 0.0237), 1)
        feeds = {"x": np.random.default_rng(20).standard_normal((4096, 8)).astype(np.float32) * 2}
        np.testing.assert_array_equal(profiled(core, model, feeds, config)[0], ort_unfused(model, feeds)[0])


@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("data_type", [TensorProto.UINT8, TensorProto.INT8])
def test_quantize_dequantize_pair_is_exact_at_ties_and_saturation(core: ov.Core, data_type: int,
                                                                  precision: str) -> None:
    _check_pair_exact(core, data_type, precision)


@pytest.mark.parametrize(("scales", "readers"), [((0.05, 0.05), 2), ((0.05, 0.04), 1)])
def test_quantize_dequantize_pair_with_another_reader_or_scale_still_matches(core: ov.Core,
                                                                   scales: tuple[float, float],
                                                                   readers: int) -> None:
    model = _pair_model(TensorProto.UINT8, scales, readers)
    feeds = _pair_feeds(0.05)
    compiled = core.compile_model(model, "GPU.0", PROFILED)
    request = compiled.create_infer_request()
    results = request.infer(feeds)
    for got, want in zip([np.asarray(results[i]) for i in range(readers)], ort_unfused(model, feeds),
                         strict=True):
        np.testing.assert_array_equal(got, want)
    records = {r.node_name: r.node_type for r in request.get_profiling_info()}
    # the 8-bit data as a graph output keeps its QuantizeLinear running; the DequantizeLinear with
    # the same numbers still runs from the float input as one fake-quantize call
    assert records["q"] == "QuantizeLinear"
    assert records["dq"] == ("FakeQuantize" if readers == 2 else "DequantizeLinear")


@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize(("mover", "second_scale"),
                         [("Transpose", 0.05), ("Reshape", 0.05), ("Transpose", 0.04)])
def test_pair_after_data_movement_of_the_same_grid_runs_no_call(core: ov.Core, mover: str,
                                                                second_scale: float, precision: str) -> None:
    # x -> Q -> DQ -> Transpose/Reshape -> Q -> DQ -> Relu, as quantize_static writes around data
    # movement: with the same numbers the second pair changes nothing and runs no call
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s1"),
             numpy_helper.from_array(np.array(second_scale, np.float32), "s2"),
             numpy_helper.from_array(np.array(3, np.uint8), "z"),
             numpy_helper.from_array(np.array([8, -1], np.int64), "shape")]
    move = (helper.make_node("Transpose", ["xd"], ["m"], name="move", perm=[1, 0]) if mover == "Transpose"
            else helper.make_node("Reshape", ["xd", "shape"], ["m"], name="move"))
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z"], ["xq"], name="q1"),
             helper.make_node("DequantizeLinear", ["xq", "s1", "z"], ["xd"], name="dq1"), move,
             helper.make_node("QuantizeLinear", ["m", "s2", "z"], ["mq"], name="q2"),
             helper.make_node("DequantizeLinear", ["mq", "s2", "z"], ["md"], name="dq2"),
             helper.make_node("Relu", ["md"], ["y"], name="relu")]
    model = make_model(nodes, [("x", TensorProto.FLOAT, [20, 8])], [("y", TensorProto.FLOAT, [8, 20])], inits,
                       opset=13)
    feeds = _pair_feeds(0.05)
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    (want,) = ort_unfused(model, feeds)
    if precision == "f32":
        np.testing.assert_array_equal(got, want)
    else:  # f16 values of the grid; the feeds' exact ties may round a step the other way in each pair
        np.testing.assert_allclose(got, want, rtol=0, atol=0.05 + second_scale * 1.01)
        assert np.mean(np.abs(got - want) < 1e-3) > 0.8
    assert records["dq1"] == "FakeQuantize" and not {"q1", "q2"} & set(records)
    assert ("dq2" in records) == (second_scale != 0.05)


def test_quantized_tensor_read_by_several_dequantizers_is_fake_quantized_once(core: ov.Core) -> None:
    # one QuantizeLinear, a DequantizeLinear per consumer (as quantize_static writes them)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(128, np.uint8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["a"], name="dqa"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["b"], name="dqb"),
             helper.make_node("Relu", ["a"], ["ra"], name="relu"),
             helper.make_node("Sigmoid", ["b"], ["sb"], name="sigmoid"),
             helper.make_node("Add", ["ra", "sb"], ["y"], name="add")]
    model = make_model(nodes, [("x", TensorProto.FLOAT, ["N", 8])], [("y", TensorProto.FLOAT, ["N", 8])],
                       inits, opset=13)
    feeds = _pair_feeds(0.05)
    got, records = profiled(core, model, feeds)
    np.testing.assert_allclose(got, ort_unfused(model, feeds)[0], rtol=1e-6, atol=1e-6)
    assert "q" not in records and list(records.values()).count("FakeQuantize") == 1


def _conv_integer_model(weight: np.ndarray) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.array(131, np.uint8), "zx")]
    nodes = [helper.make_node("ConvInteger", ["x", "w", "zx"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    return make_model(nodes, [("x", TensorProto.UINT8, ["N", weight.shape[1], 9, 9])],
                      [("y", TensorProto.INT32, ["N", weight.shape[0], 9, 9])], inits, opset=13)


def test_conv_integer_sums_exactly(core: ov.Core) -> None:
    # 32 x 3 x 3 products of up to 124 x 255: sums near 2**23, beyond what float16 or TF32 hold
    rng = np.random.default_rng(24)
    weight = rng.integers(0, 256, (8, 32, 3, 3), dtype=np.uint8)
    model = _conv_integer_model(weight)
    feeds = {"x": rng.integers(0, 256, (2, 32, 9, 9), dtype=np.uint8)}
    feeds["x"][0] = 255  # every product of the first item at its largest
    compiled = core.compile_model(model, "GPU.0")
    got = np.asarray(compiled(feeds)[0])
    want = ort_unfused(model, feeds)[0]
    assert got.dtype == np.int32 and np.abs(want).max() < 2**24
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_dynamic_quantized_cnn_matches_onnx_runtime(core: ov.Core, tmp_path: Any, precision: str) -> None:
    model = quantized(tmp_path, _cnn(), False, reduce_range=True)
    convs = [n.name for n in model.graph.node if n.op_type == "ConvInteger"]
    nodes = model.graph.node
    sums = {o for n in nodes if n.op_type == "ConvInteger" for o in n.output}
    casts = {n.output[0]: n.name for n in nodes if n.op_type == "Cast" and n.input[0] in sums}
    scaled = {o for n in nodes if n.op_type == "Mul" and set(n.input) & set(casts) for o in n.output}
    chains = {*casts.values(), *(n.name for n in nodes if n.op_type == "Add" and set(n.input) & scaled)}
    assert len(convs) == 3 and len(chains) == 6
    feeds = _cnn_feeds(25)
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    want = ort_unfused(model, feeds)[0]
    if precision == "f32":  # integer sums, then the Cast, Mul and Add's float32 arithmetic
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:  # f16 activations quantize on a slightly different scale, and each sum rounds to f16
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-2 * np.abs(want).max())
    # each ConvInteger's Cast, scale Mul and bias Add run inside its call
    assert all(records[name] == "ConvInteger" for name in convs) and not chains & set(records)


def _conv_integer_chain(weight: np.ndarray, weight_zero: np.ndarray | None,
                        tail: str = "bias") -> onnx.ModelProto:
    """DynamicQuantizeLinear, ConvInteger (zero points of both), Cast, Mul by the scales' product,
    then per ``tail`` the Add of a per-channel bias ("bias"), a residual Add of a second input
    ``r`` ("residual") and a Relu ("relu"), in that order: ``quantize_dynamic``'s Conv written out,
    and a residual block's Add and Relu after it."""
    channels = weight.shape[0]
    bias = np.linspace(-1, 1, channels, dtype=np.float32).reshape(1, -1, 1, 1)
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.array(0.01, np.float32), "ws")]
    conv_inputs = ["xq", "w", "xz"]
    if weight_zero is not None:
        inits.append(numpy_helper.from_array(weight_zero, "wz"))
        conv_inputs.append("wz")
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dql"),
             helper.make_node("Mul", ["xs", "ws"], ["scale"], name="scales"),
             helper.make_node("ConvInteger", conv_inputs, ["acc"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["accf", "scale"], ["scaled"], name="mul")]
    if "bias" in tail:
        inits.append(numpy_helper.from_array(bias, "b"))
        nodes.append(helper.make_node("Add", ["scaled", "b"], ["biased"], name="bias"))
    inputs = [("x", TensorProto.FLOAT, ["N", weight.shape[1], 10, 10])]
    if "residual" in tail:
        nodes.append(helper.make_node("Add", [nodes[-1].output[0], "r"], ["summed"], name="residual"))
        inputs.append(("r", TensorProto.FLOAT, ["N", channels, 10, 10]))
    if "relu" in tail:
        nodes.append(helper.make_node("Relu", [nodes[-1].output[0]], ["y"], name="relu"))
    nodes[-1].output[0] = "y"
    return make_model(nodes, inputs, [("y", TensorProto.FLOAT, ["N", channels, 10, 10])], inits, opset=13)


def _conv_integer_chain_reference(x: np.ndarray, weight: np.ndarray, weight_zero: np.ndarray,
                                  bias: np.ndarray | None, residual: np.ndarray | None,
                                  relu: bool) -> np.ndarray:
    """:func:`_conv_integer_chain` in numpy (float64 sums of the ONNX ops' integers), for a weight
    zero point per output channel, which ONNX Runtime's ConvInteger refuses."""
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = np.float32((high - low) / 255)
    zero = np.clip(np.round(-low / scale), 0, 255)
    data = np.clip(np.round(x / scale) + zero, 0, 255) - zero
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1))),
                                                       (3, 3), axis=(2, 3))
    centered = weight.astype(np.float64) - weight_zero.reshape(-1, 1, 1, 1)
    sums = np.einsum("nchwij,ocij->nohw", windows, centered).astype(np.float32)
    result = sums * (scale * np.float32(0.01)) + (bias if bias is not None else np.float32(0))
    result = result + residual if residual is not None else result
    return np.maximum(result, 0) if relu else result


def _two_conv_integer_chains() -> onnx.ModelProto:
    """A residual block's downsampling form as ``quantize_dynamic`` writes it: two ConvInteger chains
    (3x3 and 1x1) of one DynamicQuantizeLinear, each scaled and biased, added, then a Relu."""
    rng = np.random.default_rng(29)
    inits = [numpy_helper.from_array(rng.integers(-127, 128, (12, 16, 3, 3), dtype=np.int8), "w3"),
             numpy_helper.from_array(rng.integers(-127, 128, (12, 16, 1, 1), dtype=np.int8), "w1"),
             numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
             numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(1, -1, 1, 1), "b")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dql"),
             helper.make_node("Mul", ["xs", "ws"], ["scale"], name="scales")]
    for k, pads in (("3", [1, 1, 1, 1]), ("1", [0, 0, 0, 0])):
        nodes += [helper.make_node("ConvInteger", ["xq", f"w{k}", "xz"], [f"acc{k}"], name=f"conv{k}",
                                   pads=pads),
                  helper.make_node("Cast", [f"acc{k}"], [f"f{k}"], name=f"cast{k}", to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"f{k}", "scale"], [f"s{k}"], name=f"mul{k}"),
                  helper.make_node("Add", [f"s{k}", "b"], [f"b{k}"], name=f"bias{k}")]
    nodes += [helper.make_node("Add", ["b3", "b1"], ["sum"], name="residual"),
              helper.make_node("Relu", ["sum"], ["y"], name="relu")]
    return make_model(nodes, [("x", TensorProto.FLOAT, ["N", 16, 10, 10])],
                      [("y", TensorProto.FLOAT, ["N", 12, 10, 10])], inits, opset=13)


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_two_conv_integer_chains_added_run_as_two_calls(core: ov.Core, precision: str) -> None:
    """The residual Add of two ConvInteger chains joins the later chain's call (the earlier one's
    value is made by then), with the Relu; the result matches ONNX Runtime."""
    model = _two_conv_integer_chains()
    feeds = {"x": np.random.default_rng(30).standard_normal((2, 16, 10, 10)).astype(np.float32)}
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    want = ort_unfused(model, feeds)[0]
    tolerance = (1e-6 if precision == "f32" else 1e-2) * np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=tolerance)
    assert records["conv3"] == records["conv1"] == "ConvInteger"
    assert not {"bias3", "bias1", "residual", "relu"} & set(records)


@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize(("zero", "tail"), [("none", "bias"), ("tensor", "bias"), ("channel", "bias"),
                                            ("tensor", "bias-relu"), ("channel", "relu"),
                                            ("tensor", "bias-residual-relu"), ("channel", "residual")])
def test_conv_integer_chain_fuses_and_matches_onnx_runtime(core: ov.Core, zero: str, tail: str,
                                                           precision: str) -> None:
    _check_conv_integer_chain(core, zero, precision, tail)


def _check_conv_integer_chain(core: ov.Core, zero: str, precision: str, tail: str) -> None:
    """:func:`_conv_integer_chain` runs as one call, its bias Add, residual Add and Relu included, and
    matches ONNX Runtime (numpy for a weight zero point per channel)."""
    rng = np.random.default_rng(28)
    weight = rng.integers(0, 256, (12, 16, 3, 3), dtype=np.uint8)
    weight_zero = {"none": None, "tensor": np.array(128, np.uint8),
                   "channel": rng.integers(100, 156, 12, dtype=np.uint8)}[zero]
    model = _conv_integer_chain(weight, weight_zero, tail)
    feeds = {"x": rng.standard_normal((2, 16, 10, 10)).astype(np.float32)}
    if "residual" in tail:
        feeds["r"] = rng.standard_normal((2, 12, 10, 10)).astype(np.float32) * 50
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    if zero == "channel":
        bias = next((numpy_helper.to_array(i) for i in model.graph.initializer if i.name == "b"), None)
        want = _conv_integer_chain_reference(feeds["x"], weight, weight_zero, bias,  # type: ignore[arg-type]
                                             feeds.get("r"), "relu" in tail)
    else:
        want = ort_unfused(model, feeds)[0]
    if precision == "f32":  # sums below 2**24: the integer sums, scaled and biased as ONNX Runtime does
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    else:  # f16 data quantizes on a slightly different scale, and each sum rounds to f16
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert records["conv"] == "ConvInteger" and not {"cast", "mul", "bias", "residual", "relu"} & set(records)
    if "relu" in tail:
        assert (got >= 0).all() and (got == 0).any()


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_dynamically_quantized_data_read_elsewhere_keeps_its_value(core: ov.Core, precision: str) -> None:
    weight = np.random.default_rng(29).integers(0, 256, (8, 16, 3, 3), dtype=np.uint8)
    model = _conv_integer_chain(weight, np.array(120, np.uint8))
    model.graph.output.append(helper.make_tensor_value_info("xq", TensorProto.UINT8, ["N", 16, 10, 10]))
    feeds = {"x": np.random.default_rng(30).standard_normal((2, 16, 10, 10)).astype(np.float32)}
    results = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})(feeds)
    got, data = np.asarray(results[0]), np.asarray(results[1])
    want = ort_unfused(model, feeds)
    largest = np.abs(want[0]).max()
    if precision == "f32":
        np.testing.assert_allclose(got, want[0], rtol=1e-6, atol=1e-6 * largest)
        np.testing.assert_array_equal(data, want[1])
    else:  # f16 data quantizes on a slightly different scale: a few values move by a step
        np.testing.assert_allclose(got, want[0], rtol=0, atol=1e-2 * largest)
        assert data.dtype == np.uint8 and np.abs(data.astype(int) - want[1]).max() <= 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("data_type", [TensorProto.UINT8, TensorProto.INT8])
def test_quantize_dequantize_pair_on_cuda_is_exact(data_type: int, precision: str) -> None:
    _check_pair_exact(ov.Core(), data_type, precision)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_static_qdq_cnn_on_cuda_matches_onnx_runtime(tmp_path: Any, precision: str) -> None:
    model = quantized(tmp_path, _cnn(), True, per_channel=True)
    feeds = _cnn_feeds(26)
    (want,) = ort_unfused(model, feeds)
    step = output_scale(model)
    config = {"INFERENCE_PRECISION_HINT": precision}
    compiled = ov.Core().compile_model(model, "GPU.0", config)  # not profiled: CUDA graphs replay the calls
    for _ in range(3):
        got = np.asarray(compiled(feeds)[0])
        # cuDNN sums in its own order (f16 besides rounds): intermediate values on a rounding
        # boundary move by a step, and the output by a step or two where two such moves meet
        np.testing.assert_allclose(got, want, rtol=0, atol=step * (2.01 if precision == "f32" else 3.01))
        assert np.abs(got - want).mean() < step / 2
    _check_cnn_fused(model, profiled(ov.Core(), model, feeds, config)[1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("tail", ["bias", "bias-relu", "relu", "bias-residual-relu"])
def test_conv_integer_chain_on_cuda_fuses_and_matches_onnx_runtime(precision: str, tail: str) -> None:
    _check_conv_integer_chain(ov.Core(), "tensor", precision, tail)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_dynamic_quantized_cnn_on_cuda_matches_onnx_runtime(tmp_path: Any, precision: str) -> None:
    model = quantized(tmp_path, _cnn(), False, reduce_range=True)
    feeds = _cnn_feeds(32)
    want = ort_unfused(model, feeds)[0]
    compiled = ov.Core().compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
    tolerance = (1e-5 if precision == "f32" else 2e-2) * np.abs(want).max()
    for _ in range(3):  # not profiled: CUDA graphs replay the calls
        np.testing.assert_allclose(np.asarray(compiled(feeds)[0]), want, rtol=0, atol=tolerance)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_conv_integer_on_cuda_sums_exactly() -> None:
    rng = np.random.default_rng(27)
    weight = rng.integers(0, 256, (16, 32, 3, 3), dtype=np.uint8)
    model = _conv_integer_model(weight)
    feeds = {"x": rng.integers(0, 256, (4, 32, 9, 9), dtype=np.uint8)}
    got = np.asarray(ov.Core().compile_model(model, "GPU.0")(feeds)[0])
    np.testing.assert_array_equal(got, ort_unfused(model, feeds)[0])


def test_weight_too_large_to_fold_is_dequantized_once_at_compile_time(core: ov.Core) -> None:
    # 4100 x 4100 int8 values: more than the analysis folds (2**24 elements); K = 4100 is no
    # multiple of 8, so no int8 matmul takes the weight either
    rng = np.random.default_rng(31)
    weight = rng.integers(-128, 128, (4100, 4100), dtype=np.int8)
    inits = [numpy_helper.from_array(weight, "wq"),
             numpy_helper.from_array(np.linspace(1e-3, 2e-3, 4100, dtype=np.float32), "sw")]
    nodes = [helper.make_node("DequantizeLinear", ["wq", "sw"], ["w"], name="dqw", axis=1),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    ports = [("x", TensorProto.FLOAT, ["N", 4100])], [("y", TensorProto.FLOAT, ["N", 4100])]
    model = make_model(nodes, *ports, inits, opset=13)
    feeds = {"x": rng.standard_normal((2, 4100)).astype(np.float32)}
    got, records = profiled(core, model, feeds)
    np.testing.assert_allclose(got, ort_unfused(model, feeds)[0], rtol=1e-4, atol=1e-4)
    assert records["mm"] == "MatMul" and "dqw" not in records
