"""The GPU device (ONNX lowered to torch) on torch's CPU device, through the public API.

Models are built here with random weights and exported with ``torch.onnx.export``
(the TorchScript exporter, ``dynamo=False``: the new one needs onnxscript), or
with ``onnx.helper``; the reference is raw ONNX Runtime.  f32 must match at
rtol 1e-4; f16 and bf16 within the bounds documented on each test.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov

torch = pytest.importorskip("torch")
nn = torch.nn


@pytest.fixture(scope="module")
def core() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "2")
        yield ov.Core()


def _export(module: Any, args: tuple[Any, ...], names: list[str], dynamic: dict[str, Any] | None = None,
            opset: int = 17) -> onnx.ModelProto:
    buffer = io.BytesIO()
    module.eval()
    torch.onnx.export(module, args, buffer, input_names=names, output_names=["y"], opset_version=opset,
                      dynamic_axes=dynamic, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2, ceil_mode=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=2), nn.BatchNorm2d(32), nn.Hardswish(),
            nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1), nn.LeakyReLU(0.1),
            nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False), nn.Upsample(scale_factor=2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10), nn.Softmax(-1))

    def forward(self, x: Any) -> Any:
        return self.features(x)


class SeqModel(nn.Module):
    """Embedding, Conv1d over time, GRU-free gating, LayerNorm, log-softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 32)
        self.conv = nn.Conv1d(32, 32, 5, padding=2)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 50)

    def forward(self, tokens: Any) -> Any:
        h = self.embed(tokens)
        g = self.conv(h.transpose(1, 2)).transpose(1, 2)
        h = self.norm(h + torch.sigmoid(g) * torch.tanh(g))
        return torch.log_softmax(self.head(nn.functional.gelu(h)), -1)


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block: multi-head self-attention and a GELU MLP."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(0.1), nn.Linear(2 * dim, dim))

    def forward(self, x: Any) -> Any:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, -1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def _encoder() -> tuple[Any, Any]:
    return EncoderBlock(), torch.randn(2, 10, 32)


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _cnn() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 17, 17)
    return _export(SmallCNN(), (x,), ["x"], {"x": {0: "N"}}), {"x": x.numpy()}


def test_small_cnn_matches_onnx_runtime(core: Any) -> None:
    model, feeds = _cnn()
    compiled = core.compile_model(model, "GPU.0")
    np.testing.assert_allclose(compiled(feeds)[0], _ort(model, feeds)[0], rtol=1e-4, atol=1e-6)


def test_transformer_encoder_dynamic_batch(core: Any) -> None:
    torch.manual_seed(0)
    layer, x = _encoder()
    model = _export(layer, (x,), ["x"], {"x": {0: "batch"}}, opset=17)
    compiled = core.compile_model(model, "GPU.0")
    for batch in (1, 3, 2):
        feeds = {"x": np.random.default_rng(batch).standard_normal((batch, 10, 32)).astype(np.float32)}
        np.testing.assert_allclose(compiled(feeds)[0], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_seq_model_matches_onnx_runtime(core: Any) -> None:
    torch.manual_seed(0)
    tokens = torch.randint(0, 50, (3, 12))
    model = _export(SeqModel(), (tokens,), ["tokens"], {"tokens": {0: "N", 1: "T"}})
    compiled = core.compile_model(model, "GPU.1")
    feeds = {"tokens": np.random.default_rng(1).integers(0, 50, (2, 7)).astype(np.int64)}
    np.testing.assert_allclose(compiled(feeds)[0], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("precision", "bound"), [("f16", 2e-2), ("bf16", 1e-1)])
def test_reduced_precision_within_bounds(core: Any, precision: str, bound: float) -> None:
    """f16: max abs error <= 2e-2, bf16 <= 1e-1 on softmax outputs in [0, 1]; dtype stays f32."""
    model, feeds = _cnn()
    compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
    out = compiled(feeds)[0]
    assert out.dtype == np.float32
    assert np.abs(out - _ort(model, feeds)[0]).max() <= bound


def test_profiling_records_ops_and_transfers(core: Any) -> None:
    model, feeds = _cnn()
    compiled = core.compile_model(model, "GPU.0", {"ENABLE_PROFILING": True})
    request = compiled.create_infer_request()
    request.infer(feeds)
    records = request.get_profiling_info()
    types = {r.node_type for r in records}
    assert {"Conv", "Relu", "Transfer"} <= types
    transfer = [r for r in records if r.node_type == "Transfer" and "CPU->" in r.node_name]
    assert transfer and transfer[0].bytes == feeds["x"].nbytes
    assert all(r.real_time.total_seconds() >= 0 for r in records)


def test_keep_on_device_returns_torch_tensors() -> None:
    import onnx_ir as ir

    from inferplex.devices.gpu.plugin import GpuPlugin

    model, feeds = _cnn()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "1")
        program = GpuPlugin().compile(ir.serde.deserialize_model(model), "GPU.0", {})
        out = program.run(feeds, keep_on_device={"y"})
        assert isinstance(out["y"], torch.Tensor) and program.tensor_kind == "torch"
        again = program.run({"x": torch.from_numpy(feeds["x"])})  # torch input, numpy output
        np.testing.assert_allclose(out["y"].numpy(), again["y"], rtol=1e-6)


def test_bad_inputs_raise_input_errors(core: Any) -> None:
    model, feeds = _cnn()
    compiled = core.compile_model(model, "GPU.0")
    with pytest.raises(ov.errors.InputError):
        compiled({"x": feeds["x"].astype(np.float64)})
    with pytest.raises(ov.errors.InputError):
        compiled({"x": feeds["x"][0]})


def test_unsupported_op_is_reported_by_query_and_compile(core: Any) -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])
    graph = helper.make_graph(
        [node, helper.make_node("Relu", ["y"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [1, 1, 5, 5])],
        [helper.make_tensor_value_info("z", TensorProto.INT32, [1, 1, 3, 3])],
        [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.int32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    assert len(core.query_model(model, "GPU.0")) == 1  # Relu yes, integer Conv no
    with pytest.raises(ov.errors.InferplexError, match="Conv"):
        core.compile_model(model, "GPU.0")


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_pool_and_conv_auto_pad_match_onnx_runtime(core: Any, auto_pad: str) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 2, 3, 2)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], auto_pad=auto_pad, strides=[2, 3]),
             helper.make_node("MaxPool", ["c"], ["m", "i"], kernel_shape=[2, 3], auto_pad=auto_pad, strides=[2, 1]),
             helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[3, 3], pads=[0, 1, 2, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 11, 13])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list("nchw")),
                               helper.make_tensor_value_info("i", TensorProto.INT64, list("nchw"))],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    feeds = {"x": rng.standard_normal((1, 2, 11, 13)).astype(np.float32)}
    got = core.compile_model(model, "GPU.0")(feeds)
    want = _ort(model, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])
