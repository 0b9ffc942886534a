"""The GPU device (ONNX lowered to torch) on torch's CPU device, through the public API.

Models are built here with random weights and exported with ``torch.onnx.export``
(the TorchScript exporter, ``dynamo=False``: the new one needs onnxscript), or
with ``onnx.helper``; the reference is raw ONNX Runtime.  f32 must match at
rtol 1e-4; f16 and bf16 within the bounds documented on each test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from torch_export import export_onnx

import inferplex as ov

torch = pytest.importorskip("torch")
nn = torch.nn


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2, ceil_mode=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=2),
            nn.BatchNorm2d(32),
            nn.Hardswish(),
            nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1),
            nn.LeakyReLU(0.1),
            nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False),
            nn.Upsample(scale_factor=2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(16, 10),
            nn.Softmax(-1),
        )

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

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )


def _cnn() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 17, 17)
    return export_onnx(SmallCNN(), (x,), ["x"], {"x": {0: "N"}}), {"x": x.numpy()}


def test_small_cnn_matches_onnx_runtime(core: Any) -> None:
    model, feeds = _cnn()
    compiled = core.compile_model(model, "GPU.0")
    np.testing.assert_allclose(compiled(feeds)[0], _ort(model, feeds)[0], rtol=1e-4, atol=1e-6)


def test_transformer_encoder_dynamic_batch(core: Any) -> None:
    torch.manual_seed(0)
    layer, x = _encoder()
    model = export_onnx(layer, (x,), ["x"], {"x": {0: "batch"}}, opset=17)
    compiled = core.compile_model(model, "GPU.0")
    for batch in (1, 3, 2):
        feeds = {"x": np.random.default_rng(batch).standard_normal((batch, 10, 32)).astype(np.float32)}
        np.testing.assert_allclose(compiled(feeds)[0], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_seq_model_matches_onnx_runtime(core: Any) -> None:
    torch.manual_seed(0)
    tokens = torch.randint(0, 50, (3, 12))
    model = export_onnx(SeqModel(), (tokens,), ["tokens"], {"tokens": {0: "N", 1: "T"}})
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


def test_node_whose_output_nothing_reads_does_not_run(core: Any) -> None:
    """A node whose output no node reads and the graph does not give runs no call (its profile has
    no record of it); the outputs are ONNX Runtime's."""
    nodes = [helper.make_node("Exp", ["x"], ["unused"], name="dead_exp"),
             helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Mul", ["r", "x"], ["y"], name="mul")]
    graph = helper.make_graph(nodes, "dead", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)}
    request = core.compile_model(model, "GPU.0", {"ENABLE_PROFILING": True}).create_infer_request()
    np.testing.assert_allclose(np.asarray(request.infer(feeds)[0]), _ort(model, feeds)[0], rtol=1e-6)
    names = {r.node_name for r in request.get_profiling_info()}
    assert {"relu", "mul"} <= names and "dead_exp" not in names


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
        compiled({"x": np.full(feeds["x"].shape, "text")})  # text for a number input
    with pytest.raises(ov.errors.InputError):
        compiled({"x": feeds["x"][0]})


def test_unsupported_op_is_reported_by_query_and_compile(core: Any) -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])
    graph = helper.make_graph(
        [node, helper.make_node("Relu", ["y"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [1, 1, 5, 5])],
        [helper.make_tensor_value_info("z", TensorProto.INT32, [1, 1, 3, 3])],
        [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.int32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    assert len(core.query_model(model, "GPU.0")) == 1  # Relu yes, integer Conv no
    with pytest.raises(ov.errors.InferplexError, match="Conv"):
        core.compile_model(model, "GPU.0")


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_pool_and_conv_auto_pad_match_onnx_runtime(core: Any, auto_pad: str) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 2, 3, 2)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], auto_pad=auto_pad, strides=[2, 3]),
        helper.make_node(
            "MaxPool", ["c"], ["m", "i"], kernel_shape=[2, 3], auto_pad=auto_pad, strides=[2, 1]
        ),
        helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[3, 3], pads=[0, 1, 2, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 11, 13])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, list("nchw")),
            helper.make_tensor_value_info("i", TensorProto.INT64, list("nchw")),
        ],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    feeds = {"x": rng.standard_normal((1, 2, 11, 13)).astype(np.float32)}
    got = core.compile_model(model, "GPU.0")(feeds)
    want = _ort(model, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])


# --- specialization, rewrites, layouts, transfers -------------------------------------


def _program(model: onnx.ModelProto, config: dict[str, Any] | None = None) -> Any:
    import onnx_ir as ir

    from inferplex.devices.gpu.plugin import GpuPlugin

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "1")
        return GpuPlugin().compile(ir.serde.deserialize_model(model), "GPU.0", config or {})


def _statistics(compiled: Any) -> Any:
    """What the compiled model's GPU program holds now (its GPU_PROGRAM_STATISTICS property)."""
    return compiled.get_property("GPU_PROGRAM_STATISTICS")


def test_dynamic_batch_is_specialized_per_signature_with_shared_weights(core: Any) -> None:
    torch.manual_seed(0)
    layer, x = _encoder()
    model = export_onnx(layer, (x,), ["x"], {"x": {0: "batch"}}, opset=17)
    compiled = core.compile_model(model, "GPU.0")
    assert "GPU_PROGRAM_STATISTICS" in compiled.get_property("SUPPORTED_PROPERTIES")
    assert not _statistics(compiled).capturable  # shape arithmetic on the dynamic batch
    for batch in (1, 3, 1):
        feeds = {"x": np.random.default_rng(batch).standard_normal((batch, 10, 32)).astype(np.float32)}
        np.testing.assert_allclose(compiled(feeds)["y"], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)
    stats = _statistics(compiled)
    # batch 1 again reused its lowering, which is now the most recently used
    assert [v.signature for v in stats.shape_variants] == [((3, 10, 32),), ((1, 10, 32),)]
    assert all(v.capturable for v in stats.shape_variants)
    weights = sum(t.nbytes for t in layer.state_dict().values() if t.numel() >= 32 * 32)
    assert stats.weight_bytes >= weights
    # every weight matrix is shared with the generic lowering: no variant holds one of its own
    assert all(v.own_constant_bytes < 32 * 32 * 4 for v in stats.shape_variants)
    compiled.release()


def test_specialization_can_be_turned_off(core: Any) -> None:
    torch.manual_seed(0)
    layer, x = _encoder()
    model = export_onnx(layer, (x,), ["x"], {"x": {0: "batch"}}, opset=17)
    compiled = core.compile_model(model, "GPU.0", {"SHAPE_SPECIALIZATION": False})
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 10, 32)).astype(np.float32)}
    np.testing.assert_allclose(compiled(feeds)["y"], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)
    assert _statistics(compiled).shape_variants == ()


def _conv_bn_model() -> onnx.ModelProto:
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1, bias=False, groups=2),
        nn.BatchNorm2d(8),
        nn.Flatten(),
        nn.Linear(8 * 9 * 9, 5),
    )
    for bn in (net[1], net[4]):  # statistics far from the identity, so folding is visible
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.05, 3)
        bn.weight.data.uniform_(0.5, 2)
        bn.bias.data.uniform_(-1, 1)
    return export_onnx(net, (torch.randn(2, 3, 9, 9),), ["x"], {"x": {0: "N"}})


def test_conv_batchnorm_is_folded_and_exact(core: Any) -> None:
    model = _conv_bn_model()
    compiled = core.compile_model(model, "GPU.0")
    ops = _statistics(compiled).ops_run
    assert ops.count("Conv") == 2 and "BatchNormalization" not in ops  # each folded into its Conv
    feeds = {"x": np.random.default_rng(0).standard_normal((3, 3, 9, 9)).astype(np.float32)}
    np.testing.assert_allclose(compiled(feeds)["y"], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_matmul_bias_becomes_linear(core: Any) -> None:
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["b", "m"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    compiled = core.compile_model(model, "GPU.0")
    stats = _statistics(compiled)
    assert stats.ops_run == ("MatMul",) and stats.calls == ("linear", "cast_to")  # the Add is fused
    feeds = {"x": rng.standard_normal((3, 4, 16)).astype(np.float32)}
    np.testing.assert_allclose(compiled(feeds)["y"], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_channels_last_is_off_when_emulated_and_exact_when_forced() -> None:
    model, feeds = _cnn()
    default = _program(model)
    assert default.get_property("GPU_CHANNELS_LAST") is False
    forced = _program(model, {"GPU_CHANNELS_LAST": "YES"})
    assert forced.get_property("GPU_CHANNELS_LAST") is True
    assert _statistics(default).channels_last_weights == 0
    # the two Conv weights (folded with their BatchNormalization)
    assert _statistics(forced).channels_last_weights == 2
    want = _ort(model, feeds)[0]
    out = forced.run(feeds, keep_on_device={"y"})["y"]
    assert out.is_contiguous()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(forced.run(feeds)["y"], default.run(feeds)["y"], rtol=1e-5, atol=1e-6)
    with pytest.raises(ov.errors.PropertyError):
        _program(model, {"GPU_CHANNELS_LAST": "SOMETIMES"})


def test_queue_throttle_is_accepted_and_kept_when_emulated(core: Any) -> None:
    model, feeds = _cnn()
    compiled = core.compile_model(model, "GPU.0", {"GPU_QUEUE_THROTTLE": "low"})
    assert compiled.get_property("GPU_QUEUE_THROTTLE") == "LOW"
    assert core.compile_model(model, "GPU.0").get_property("GPU_QUEUE_THROTTLE") == "MEDIUM"
    np.testing.assert_allclose(compiled(feeds)[0], _ort(model, feeds)[0], rtol=1e-4, atol=1e-6)
    with pytest.raises(ov.errors.PropertyError, match="GPU_QUEUE_THROTTLE"):
        core.compile_model(model, "GPU.0", {"GPU_QUEUE_THROTTLE": "fast"})
    # Through MULTI's per-device properties: it reaches the GPU member, and a bad value is refused.
    low = {"DEVICE_PROPERTIES": {"GPU": {"GPU_QUEUE_THROTTLE": "LOW"}}}
    multi = core.compile_model(model, "MULTI:GPU.0,CPU", low)
    try:
        assert multi.get_property("GPU_QUEUE_THROTTLE") == "LOW"  # read from its GPU member
        np.testing.assert_allclose(multi(feeds)[0], _ort(model, feeds)[0], rtol=1e-4, atol=1e-6)
    finally:
        multi.release()
    bad = {"DEVICE_PROPERTIES": {"GPU": {"GPU_QUEUE_THROTTLE": 3}}}
    with pytest.raises(ov.errors.PropertyError, match=r"GPU_QUEUE_THROTTLE.*LOW, MEDIUM, HIGH"):
        core.compile_model(model, "MULTI:GPU.0,CPU", bad)


def test_to_host_and_to_native_round_trip() -> None:
    model, feeds = _cnn()
    program = _program(model)
    x = feeds["x"]
    native = program.to_native(x)
    assert isinstance(native, torch.Tensor) and native.device == torch.device("cpu")
    np.testing.assert_array_equal(program.to_host(native), x)
    frozen = x.copy()
    frozen.flags.writeable = False
    np.testing.assert_array_equal(program.to_host(program.to_native(frozen)), x)
    out = program.run({"x": native}, keep_on_device={"y"})["y"]
    np.testing.assert_array_equal(program.to_host(out), program.run(feeds)["y"])


def test_run_into_writes_outputs_into_the_callers_arrays() -> None:
    """``run_into`` (a worker process's shared buffer): outputs land in the given arrays, equal to run's."""
    model, feeds = _cnn()
    program = _program(model)
    expected = _ort(model, feeds)[0]
    given: dict[str, np.ndarray] = {}

    def host_outputs(name: str, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        given[name] = np.full(shape, np.nan, dtype)
        return given[name]

    out = program.run_into(feeds, 0, host_outputs)["y"]
    assert out is given["y"]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)
    declined = program.run_into(feeds, 0, lambda name, dtype, shape: None)["y"]  # the program makes its own
    np.testing.assert_allclose(declined, expected, rtol=1e-4, atol=1e-6)
    wrong = np.zeros((1, 1), np.float32)
    with pytest.raises(ov.errors.InferenceError, match="expected a writable float32 array of shape"):
        program.run_into(feeds, 0, lambda name, dtype, shape: wrong)


def test_run_into_hands_its_worker_on_exactly_once() -> None:
    """``queued`` (a worker process's slot gives the worker back): called once per run, before it
    returns, also when the run fails; the results are still right."""
    model, feeds = _cnn()
    program = _program(model)
    expected = _ort(model, feeds)[0]
    calls: list[str] = []

    def own(name: str, dtype: Any, shape: tuple[int, ...]) -> None:
        return None  # the program makes its own arrays

    out = program.run_into(feeds, 0, own, lambda: calls.append("ok"))["y"]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)
    with pytest.raises(ov.errors.InputError):
        program.run_into({"nope": feeds["x"]}, 0, own, lambda: calls.append("bad"))
    with pytest.raises(ov.errors.InferenceError):
        program.run_into(feeds, 99, own, lambda: calls.append("no worker"))
    assert calls == ["ok", "bad", "no worker"]


class BertLike(nn.Module):
    """BERT's embedding front end (sliced position ids, expanded token types, a mask of ones) and a block."""

    def __init__(self) -> None:
        super().__init__()
        self.word, self.pos, self.types = nn.Embedding(100, 32), nn.Embedding(64, 32), nn.Embedding(2, 32)
        self.register_buffer("position_ids", torch.arange(64).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros(1, 64, dtype=torch.long))
        self.block = EncoderBlock()

    def forward(self, ids: Any) -> Any:
        b, t = ids.size()
        mask = (1.0 - torch.ones((b, t))[:, :, None]) * -10000.0
        types = self.token_type_ids[:, :t].expand(b, t)
        h = self.word(ids) + self.pos(self.position_ids[:, :t]) + self.types(types)
        return self.block(h + mask)


def test_bert_like_front_end_specializes_to_a_capturable_graph(core: Any) -> None:
    torch.manual_seed(0)
    model = export_onnx(BertLike(), (torch.randint(0, 100, (2, 16)),), ["ids"],
                        {"ids": {0: "batch", 1: "seq"}})
    compiled = core.compile_model(model, "GPU.0")
    for batch, seq in ((1, 16), (3, 9), (1, 16)):
        feeds = {"ids": np.random.default_rng(batch).integers(0, 100, (batch, seq)).astype(np.int64)}
        np.testing.assert_allclose(compiled(feeds)["y"], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)
    stats = _statistics(compiled)
    assert not stats.capturable
    assert sorted(v.signature for v in stats.shape_variants) == [((1, 16),), ((3, 9),)]
    assert all(v.capturable for v in stats.shape_variants)  # no op reads device data on the host


def test_the_capture_thread_runs_work_in_turn_and_hands_back_results_and_errors() -> None:
    """Every CUDA-graph capture goes through one thread (cuDNN autotunes once per thread)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from inferplex.devices.gpu.graphs import CaptureThread

    captures = CaptureThread()
    release = captures.lease()
    seen: list[str] = []
    inside = threading.Lock()

    def work(index: int) -> int:
        assert inside.acquire(blocking=False), "two works ran at once"
        try:
            seen.append(threading.current_thread().name)
            return captures.call(lambda: index * 10)  # a nested call runs inline, no deadlock
        finally:
            inside.release()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: captures.call(lambda: work(i)), range(32)))
    assert results == [i * 10 for i in range(32)]
    assert seen == ["inferplex-capture"] * 32

    def fail() -> None:
        raise RuntimeError("capture failed")

    with pytest.raises(RuntimeError, match="capture failed"):
        captures.call(fail)
    assert captures.call(lambda: "still serving") == "still serving"
    release()
    assert not captures.running


def test_capture_graph_warms_up_then_captures_on_the_capture_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control flow of a capture, with torch's CUDA calls stood in for (CUDA runs it for real
    in test_gpu_cuda.py): one warm-up call, one captured call on its own copies of the inputs,
    on the capture thread; a capture that raises gives None (the signature then runs eagerly)."""
    import contextlib
    import threading

    import torch

    from inferplex.devices.gpu import graphs

    events: list[tuple[str, str]] = []

    class Stream:
        def synchronize(self) -> None:
            events.append(("sync", threading.current_thread().name))

    @contextlib.contextmanager
    def fake_graph(graph: object, **kwargs: object):  # type: ignore[no-untyped-def]
        events.append(("capture", threading.current_thread().name))
        if kwargs.get("pool") == "broken":
            raise RuntimeError("operation not permitted when stream is capturing")
        yield

    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "graph", fake_graph)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: "graph")
    calls: list[torch.Tensor] = []

    def forward(x: torch.Tensor) -> tuple[torch.Tensor]:
        calls.append(x)
        return (x * 2,)

    given = torch.arange(4.0)
    captured = graphs.capture_graph(forward, [given], Stream(), "pool", owner="variant")  # type: ignore[arg-type]
    assert captured is not None and captured.owner == "variant" and captured.graph == "graph"
    assert len(calls) == 2 and all(c is not given for c in calls)  # the graph's own inputs
    assert captured.inputs[0] is calls[1] and torch.equal(captured.inputs[0], given)
    assert torch.equal(captured.outputs[0], given * 2)
    assert events == [("sync", "inferplex-capture"), ("capture", "inferplex-capture")]
    events.clear()
    broken = graphs.capture_graph(forward, [given], Stream(), "broken", owner=None,  # type: ignore[arg-type]
                                  on_capture_thread=False)
    assert broken is None
    assert [name for name, _ in events] == ["sync", "capture", "sync"]
    assert all(thread == threading.current_thread().name for _, thread in events)


def _compiled_gpu_program(model: onnx.ModelProto) -> tuple[Any, Any]:
    """A GpuProgram on emulated GPU.0 with two workers, and its lowering."""
    import onnx_ir as ir

    from inferplex.devices.gpu._program_lowering import lower_generic
    from inferplex.devices.gpu.plugin import GpuPlugin

    plugin = GpuPlugin()
    program = plugin.compile(ir.serde.deserialize_model(model), "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT"})
    lowered, _ = lower_generic(ir.serde.deserialize_model(model), plugin.torch_device("GPU.0"), "f32",
                               False, False)
    return program, lowered


def test_warm_up_runs_every_worker_once_on_zeros_of_the_static_shapes(core: ov.Core) -> None:
    """What compiling on CUDA does before it returns (there each run captures the worker's graph)."""
    from inferplex.devices.gpu.graphs import warm_up

    from conftest import ort_run

    rng = np.random.default_rng(5)
    weights = rng.standard_normal((6, 3), dtype=np.float32)
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Gather", ["m", "i"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(weights, "w")]), opset_imports=[helper.make_opsetid("", 17)])
    program, lowered = _compiled_gpu_program(model)
    seen: list[tuple[int, dict[str, Any]]] = []
    run = program.run
    program.run = lambda inputs, worker=0, keep_on_device=(): (
        seen.append((worker, {n: (tuple(v.shape), v.dtype, bool(v.any())) for n, v in inputs.items()})),
        run(inputs, worker, keep_on_device))[1]
    assert program.num_workers == 2
    assert warm_up(program, lowered) is True
    assert [w for w, _ in seen] == [0, 1]
    assert all(s == {"x": ((4, 6), torch.float32, False), "i": ((2,), torch.int64, False)} for _, s in seen)
    feeds = {"x": rng.standard_normal((4, 6), dtype=np.float32), "i": np.array([3, 1], np.int64)}
    for worker in range(2):  # the warmed-up workers give the right results for real inputs
        np.testing.assert_allclose(run(feeds, worker)["y"], ort_run(model, feeds)[0], rtol=1e-5, atol=1e-6)
    program.close()


def test_warm_up_skips_dynamic_shapes_and_survives_a_failing_run(core: ov.Core,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    from inferplex.devices.gpu.graphs import warm_up

    dynamic = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])]),
        opset_imports=[helper.make_opsetid("", 17)])
    program, lowered = _compiled_gpu_program(dynamic)
    calls: list[int] = []
    program.run = lambda inputs, worker=0, keep_on_device=(): calls.append(worker)
    assert warm_up(program, lowered) is False and calls == []  # which N will come is unknown

    static = dynamic.SerializeToString()
    fixed = onnx.load_from_string(static)
    for value in (fixed.graph.input[0], fixed.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_value = 2
    program, lowered = _compiled_gpu_program(fixed)

    def fail(inputs: Any, worker: int = 0, keep_on_device: Any = ()) -> Any:
        calls.append(worker)
        raise ov.errors.InferenceError("no zeros here")

    program.run = fail
    with caplog.at_level("INFO", logger="inferplex"):
        assert warm_up(program, lowered) is True
    assert calls == [0]  # the first failure stops the warm-up: requests capture instead
    assert "warming up worker 0 on zeros failed" in caplog.text and "no zeros here" in caplog.text
