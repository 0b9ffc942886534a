"""ONNX Runtime's GroupQueryAttention (``com.microsoft``) on the GPU device, against ONNX Runtime.

Single-op models run prompt and decode steps as onnxruntime-genai drives them: the first prompt with
an empty past, then one token at a time, each step's past being the previous step's present, with
``seqlens_k`` (each entry's length minus one) and ``total_sequence_length`` (the longest) growing by
one.  Batches of two are right-padded to different lengths; the prompt's padding rows of the output
are unspecified in ONNX Runtime and are not compared.  Each step runs on an emulated GPU
(``INFERENCE_PRECISION_HINT`` f32) and on ONNX Runtime's CPU provider, whose kernel defines the op.
A tiny decoder (embedding, RMS norms, QKV projection, GQA, output projection) runs a prompt and three
decode steps the same way, on the emulated GPU, on the CPU device and (``gpu`` marker) on CUDA.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov

torch = pytest.importorskip("torch")

_F = TensorProto.FLOAT
_MS = "com.microsoft"
_HEAD = 16


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _gqa_model(heads: int, kv_heads: int, packed: bool, rotary: bool = False, bias: bool = False,
               sink: bool = False, **attrs: Any) -> onnx.ModelProto:
    """One GroupQueryAttention node with symbolic batch, sequence and past lengths, ir_version 10."""
    q_width = (heads + 2 * kv_heads) * _HEAD if packed else heads * _HEAD
    inputs = [helper.make_tensor_value_info("query", _F, ["batch", "seq", q_width])]
    names = ["query", "", ""]
    if not packed:
        names[1:3] = ["key", "value"]
        inputs += [helper.make_tensor_value_info(n, _F, ["batch", "seq", kv_heads * _HEAD])
                   for n in names[1:3]]
    names += ["past_key", "past_value", "seqlens_k", "total_sequence_length"]
    inputs += [helper.make_tensor_value_info(n, _F, ["batch", kv_heads, "past", _HEAD])
               for n in ("past_key", "past_value")]
    inputs += [helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch"]),
               helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])]
    inits = []
    if rotary:
        angles = np.arange(64)[:, None] * (1.0 / 10000 ** (np.arange(_HEAD // 2) / (_HEAD // 2)))[None]
        inits = [numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos"),
                 numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin")]
        names += ["cos", "sin"]
        attrs["do_rotary"] = 1
    if bias or sink:
        names += [""] * (12 - len(names))
    if bias:
        names[10] = "attention_bias"
        inputs.append(helper.make_tensor_value_info("attention_bias", _F, ["batch", heads, "seq", "total"]))
    if sink:
        names[11] = "head_sink"
        inits.append(numpy_helper.from_array(np.linspace(-1.0, 1.0, heads).astype(np.float32), "head_sink"))
    out_names = ["output", "present_key", "present_value"] + (["output_qk"] if attrs.get("qk_output") else [])
    node = helper.make_node("GroupQueryAttention", names, out_names, domain=_MS, num_heads=heads,
                            kv_num_heads=kv_heads, **attrs)
    outputs = [helper.make_tensor_value_info(n, _F, None) for n in out_names]
    graph = helper.make_graph([node], "gqa", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)])
    model.ir_version = 10
    return model


def _half(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its float inputs, outputs and initializers in float16."""
    for value in [*model.graph.input, *model.graph.output]:
        if value.type.tensor_type.elem_type == _F:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.data_type == _F:
            half = numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float16), tensor.name)
            model.graph.initializer[index].CopyFrom(half)
    return model


def _step_feeds(model: onnx.ModelProto, lengths: list[int], new: int, past: Sequence[np.ndarray],
                seed: int) -> dict[str, np.ndarray]:
    """One step's feeds: ``new`` tokens per entry, entry ``b`` reaching ``lengths[b]`` tokens."""
    rng = _rng(seed)
    batch = len(lengths)
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.name in ("query", "key", "value"):
            feeds[value.name] = rng.standard_normal((batch, new, dims[2])).astype(np.float32)
    feeds["past_key"], feeds["past_value"] = past
    feeds["seqlens_k"] = np.asarray(lengths, dtype=np.int32) - 1
    feeds["total_sequence_length"] = np.asarray(max(lengths), dtype=np.int32)
    if any(v.name == "attention_bias" for v in model.graph.input):
        heads = next(a.i for a in model.graph.node[0].attribute if a.name == "num_heads")
        feeds["attention_bias"] = rng.standard_normal((batch, heads, new, max(lengths))).astype(np.float32)
    return feeds


def _run_steps(core: ov.Core, model: onnx.ModelProto, prompt: list[int], steps: int = 3,
               atol: float = 1e-4, dtype: type = np.float32) -> None:
    """Prompt (right-padded to the longest of ``prompt``) then ``steps`` decode steps, each step's past
    being ONNX Runtime's present of the step before; outputs of the valid rows and presents compared."""
    kv_heads = next(a.i for a in model.graph.node[0].attribute if a.name == "kv_num_heads")
    compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    batch, width = len(prompt), max(prompt)
    empty = np.zeros((batch, kv_heads, 0, _HEAD), dtype=dtype)
    past, lengths, new = (empty, empty), list(prompt), width
    for step in range(steps + 1):
        feeds = _step_feeds(model, lengths, new, past, seed=step)
        feeds = {n: a.astype(dtype) if a.dtype.kind == "f" else a for n, a in feeds.items()}
        want = session.run(None, feeds)
        got = compiled(feeds)
        assert [np.asarray(got[i]).dtype for i in range(len(want))] == [w.dtype for w in want]
        for b, length in enumerate(lengths):
            valid = length if step == 0 else new
            np.testing.assert_allclose(np.asarray(got[0])[b, :valid], want[0][b, :valid], rtol=1e-4,
                                       atol=atol, err_msg=f"output, step {step}, entry {b}")
        for index in range(1, len(want)):
            if index == 3:  # output_qk: the rows and columns past each entry's length are unspecified
                for b, length in enumerate(lengths):
                    rows = length if step == 0 else new
                    np.testing.assert_allclose(np.asarray(got[3])[b, :, :rows, :length],
                                               want[3][b, :, :rows, :length],
                                               rtol=1e-4, atol=atol,
                                               err_msg=f"output_qk, step {step}, entry {b}")
                continue
            np.testing.assert_allclose(np.asarray(got[index]), want[index], rtol=1e-4, atol=atol,
                                       err_msg=f"output {index}, step {step}")
        past, lengths, new = (want[1], want[2]), [n + 1 for n in lengths], 1


@pytest.mark.parametrize("packed", [False, True], ids=["separate", "packed"])
@pytest.mark.parametrize("rotary", [False, True], ids=["plain", "rotary"])
def test_prompt_and_decode_match_onnx_runtime(emulated_core: ov.Core, packed: bool, rotary: bool) -> None:
    model = _gqa_model(4, 2, packed, rotary)
    placed = emulated_core.query_model(emulated_core.read_model(model), "GPU")
    assert list(placed.values()) == ["GPU.0"]
    _run_steps(emulated_core, model, [5])


@pytest.mark.parametrize("packed", [False, True], ids=["separate", "packed"])
def test_batch_of_two_right_padded(emulated_core: ov.Core, packed: bool) -> None:
    _run_steps(emulated_core, _gqa_model(4, 1, packed, rotary=True), [6, 3])


def test_interleaved_rotary(emulated_core: ov.Core) -> None:
    _run_steps(emulated_core, _gqa_model(2, 2, False, rotary=True, rotary_interleaved=1), [4, 2])


def test_local_window(emulated_core: ov.Core) -> None:
    _run_steps(emulated_core, _gqa_model(4, 2, False, local_window_size=2), [6, 4])


def test_softcap_and_scale(emulated_core: ov.Core) -> None:
    _run_steps(emulated_core, _gqa_model(4, 2, True, rotary=True, softcap=1.5, scale=0.3), [5, 3])


def test_smooth_softmax(emulated_core: ov.Core) -> None:
    _run_steps(emulated_core, _gqa_model(4, 2, False, smooth_softmax=1), [4, 3])


def test_head_sink(emulated_core: ov.Core) -> None:
    _run_steps(emulated_core, _gqa_model(4, 2, False, sink=True), [4, 2])


def test_attention_bias(emulated_core: ov.Core) -> None:
    _run_steps(emulated_core, _gqa_model(4, 2, False, bias=True), [4, 2])


def test_float16(emulated_core: ov.Core) -> None:
    """A float16 model: the caches stay float16, the scores are computed as ONNX Runtime's."""
    model = _half(_gqa_model(4, 2, True, rotary=True, softcap=3.0))
    _run_steps(emulated_core, model, [5, 3], atol=3e-3, dtype=np.float16)
    _run_steps(emulated_core, _half(_gqa_model(4, 2, False, local_window_size=3)), [5], atol=3e-3,
               dtype=np.float16)


def test_bidirectional(emulated_core: ov.Core) -> None:
    _run_steps(emulated_core, _gqa_model(4, 2, True, rotary=True, causal=0), [5, 3])


@pytest.mark.parametrize("mode", [1, 2], ids=["scores", "probabilities"])
def test_output_qk(emulated_core: ov.Core, mode: int) -> None:
    model = _gqa_model(4, 2, False, bias=True, local_window_size=3, qk_output=mode, softcap=1.0)
    _run_steps(emulated_core, model, [5, 3])


def test_attention_bias_with_softcap(emulated_core: ov.Core) -> None:
    _run_steps(emulated_core, _gqa_model(4, 2, False, bias=True, softcap=2.0), [4])


def test_past_buffer_longer_than_needed(emulated_core: ov.Core) -> None:
    """A past longer than the lengths need (a cache of its maximal length): the present has its
    length, each entry's valid past rows and new row, zeros after them."""
    model = _gqa_model(4, 2, False, rotary=True)
    compiled = emulated_core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    rng = _rng(3)
    past = tuple(rng.standard_normal((2, 2, 8, _HEAD)).astype(np.float32) for _ in range(2))
    feeds = _step_feeds(model, [5, 3], 1, past, seed=4)
    want = _ort(model, feeds)
    got = compiled(feeds)
    assert np.asarray(got[1]).shape == want[1].shape == (2, 2, 8, _HEAD)
    for index, expected in enumerate(want):
        np.testing.assert_allclose(np.asarray(got[index]), expected, rtol=1e-4, atol=1e-4, err_msg=str(index))


def test_later_prompt_chunk_after_a_past(emulated_core: ov.Core) -> None:
    """Batch 1, three new tokens after four cached ones (a prompt fed in chunks)."""
    model = _gqa_model(4, 2, True, rotary=True)
    compiled = emulated_core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    past = tuple(_rng(5).standard_normal((1, 2, 4, _HEAD)).astype(np.float32) for _ in range(2))
    feeds = _step_feeds(model, [7], 3, past, seed=6)
    want = _ort(model, feeds)
    got = compiled(feeds)
    for index, expected in enumerate(want):
        np.testing.assert_allclose(np.asarray(got[index]), expected, rtol=1e-4, atol=1e-4, err_msg=str(index))


def test_position_ids(emulated_core: ov.Core) -> None:
    """Rotary at given positions (decode: each entry's own; prompt: the first one as the start)."""
    model = _gqa_model(4, 2, False, rotary=True)
    node = model.graph.node[0]
    node.input.extend([""] * (10 - len(node.input)))
    node.input[9] = "position_ids"
    ids = helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"])
    model.graph.input.append(ids)
    compiled = emulated_core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    empty = np.zeros((2, 2, 0, _HEAD), dtype=np.float32)
    prompt = _step_feeds(model, [4, 4], 4, (empty, empty), seed=7)
    prompt["position_ids"] = np.asarray([[3, 4, 5, 6], [3, 4, 5, 6]], dtype=np.int64)
    want = _ort(model, prompt)
    for index, expected in enumerate(want):
        np.testing.assert_allclose(np.asarray(compiled(prompt)[index]), expected, rtol=1e-4, atol=1e-4)
    decode = _step_feeds(model, [5, 5], 1, (want[1], want[2]), seed=8)
    decode["position_ids"] = np.asarray([[9], [2]], dtype=np.int64)
    for index, expected in enumerate(_ort(model, decode)):
        np.testing.assert_allclose(np.asarray(compiled(decode)[index]), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("attrs", "reason"), [
    ({"causal": 0, "local_window_size": 2}, "causal=0"),
    ({"sliding_window_cache": 1, "local_window_size": 4}, "sliding_window_cache"),
    ({"k_quant_type": "PER_TENSOR"}, "k_quant_type"),
])
def test_refused_forms_are_left_to_other_devices(emulated_core: ov.Core, attrs: dict[str, Any],
                                                 reason: str) -> None:
    """Forms the lowering does not compute: the GPU claims no node, and compiling on it names why."""
    model = _gqa_model(4, 2, False, **attrs)
    assert emulated_core.query_model(emulated_core.read_model(model), "GPU") == {}
    with pytest.raises(ov.errors.UnsupportedOpError, match=reason):
        emulated_core.compile_model(model, "GPU.0")


def test_padded_query_chunks_run_on_the_cpu_under_hetero(emulated_core: ov.Core) -> None:
    """``query_seqlens`` (right-padded chunks) is refused by the GPU: HETERO places the node on the CPU,
    which computes it as ONNX Runtime does."""
    model = _gqa_model(4, 2, False)
    node = model.graph.node[0]
    node.input.extend([""] * (17 - len(node.input)))
    node.input[16] = "query_seqlens"
    model.graph.input.append(helper.make_tensor_value_info("query_seqlens", TensorProto.INT32, ["batch"]))
    assert emulated_core.query_model(emulated_core.read_model(model), "HETERO:GPU,CPU") == {
        "GroupQueryAttention_0": "CPU"}
    past = [_rng(9).standard_normal((2, 2, 3, _HEAD)).astype(np.float32) for _ in range(2)]
    feeds = _step_feeds(model, [6, 5], 3, past, seed=10)
    feeds["query_seqlens"] = np.asarray([3, 2], dtype=np.int32)
    feeds["total_sequence_length"] = np.asarray(8, dtype=np.int32)
    want = _ort(model, feeds)
    got = emulated_core.compile_model(model, "HETERO:GPU,CPU")(feeds)
    for b, valid in enumerate((3, 2)):  # rows past query_seqlens[b] are unspecified
        np.testing.assert_allclose(np.asarray(got[0])[b, :valid], want[0][b, :valid], rtol=1e-4, atol=1e-4)
    for index in (1, 2):
        np.testing.assert_allclose(np.asarray(got[index]), want[index], rtol=1e-4, atol=1e-4)


_VOCAB, _HIDDEN, _HEADS, _KV_HEADS = 32, 64, 4, 2


def _decoder() -> onnx.ModelProto:
    """One decoder layer as onnxruntime-genai's model builder writes it: embedding, RMS norm, packed QKV
    projection, GroupQueryAttention with rotary (seqlens_k and total_sequence_length from the attention
    mask), output projection, SkipSimplifiedLayerNormalization of the residual, LM head."""
    rng = _rng(11)

    def weight(name: str, *shape: int, scale: float = 0.2) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    angles = np.arange(64)[:, None] * (1.0 / 10000 ** (np.arange(_HEAD // 2) / (_HEAD // 2)))[None]
    qkv = (_HEADS + 2 * _KV_HEADS) * _HEAD
    inits = [weight("embed", _VOCAB, _HIDDEN, scale=1.0), weight("qkv_w", _HIDDEN, qkv),
             weight("o_w", _HEADS * _HEAD, _HIDDEN), weight("head_w", _HIDDEN, _VOCAB),
             numpy_helper.from_array((1.0 + rng.standard_normal(_HIDDEN) * 0.1).astype(np.float32), "norm1"),
             numpy_helper.from_array((1.0 + rng.standard_normal(_HIDDEN) * 0.1).astype(np.float32), "norm2"),
             numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos"),
             numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin"),
             numpy_helper.from_array(np.asarray([1], dtype=np.int64), "one_axis"),
             numpy_helper.from_array(np.asarray(1, dtype=np.int64), "one"),
             numpy_helper.from_array(np.asarray(1, dtype=np.int64), "index1")]
    nodes = [
        helper.make_node("Gather", ["embed", "input_ids"], ["embedded"]),
        helper.make_node("SimplifiedLayerNormalization", ["embedded", "norm1"], ["normed"], epsilon=1e-5),
        helper.make_node("MatMul", ["normed", "qkv_w"], ["qkv"]),
        helper.make_node("ReduceSum", ["attention_mask", "one_axis"], ["mask_sum"], keepdims=0),
        helper.make_node("Sub", ["mask_sum", "one"], ["seqlens64"]),
        helper.make_node("Cast", ["seqlens64"], ["seqlens_k"], to=TensorProto.INT32),
        helper.make_node("Shape", ["attention_mask"], ["mask_shape"]),
        helper.make_node("Gather", ["mask_shape", "index1"], ["total64"], axis=0),
        helper.make_node("Cast", ["total64"], ["total"], to=TensorProto.INT32),
        helper.make_node("GroupQueryAttention",
                         ["qkv", "", "", "past_key_values.0.key", "past_key_values.0.value", "seqlens_k",
                          "total", "cos", "sin"], ["attn", "present.0.key", "present.0.value"], domain=_MS,
                         num_heads=_HEADS, kv_num_heads=_KV_HEADS, do_rotary=1),
        helper.make_node("MatMul", ["attn", "o_w"], ["attn_out"]),
        helper.make_node("SkipSimplifiedLayerNormalization", ["attn_out", "embedded", "norm2"],
                         ["normed2", "", "", "residual"], domain=_MS, epsilon=1e-5),
        helper.make_node("MatMul", ["normed2", "head_w"], ["logits"]),
    ]
    past = [helper.make_tensor_value_info(f"past_key_values.0.{n}", _F, ["batch", _KV_HEADS, "past", _HEAD])
            for n in ("key", "value")]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"]), *past]
    outputs = [helper.make_tensor_value_info("logits", _F, None),
               helper.make_tensor_value_info("present.0.key", _F, None),
               helper.make_tensor_value_info("present.0.value", _F, None)]
    graph = helper.make_graph(nodes, "decoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)])
    model.ir_version = 10
    return model


def _generate(run: Any, lengths: list[int], steps: int = 3) -> list[list[np.ndarray]]:
    """A right-padded prompt then ``steps`` decode steps through ``run(feeds) -> outputs``, each step's
    past being its own present; the valid logits rows of every step, per entry."""
    rng = _rng(13)
    batch, width = len(lengths), max(lengths)
    ids = rng.integers(0, _VOCAB, (batch, width)).astype(np.int64)
    mask = (np.arange(width)[None] < np.asarray(lengths)[:, None]).astype(np.int64)
    past = [np.zeros((batch, _KV_HEADS, 0, _HEAD), dtype=np.float32)] * 2
    seen: list[list[np.ndarray]] = []
    for step in range(steps + 1):
        out = run({"input_ids": ids, "attention_mask": mask, "past_key_values.0.key": past[0],
                   "past_key_values.0.value": past[1]})
        logits = np.asarray(out[0])
        seen.append([logits[b, : (lengths[b] if step == 0 else 1)] for b in range(batch)])
        past = [np.asarray(out[1]), np.asarray(out[2])]
        ids = rng.integers(0, _VOCAB, (batch, 1)).astype(np.int64)
        # the new token follows each entry's own tokens: one more 1 in its mask row
        lengths = [n + 1 for n in lengths]
        mask = (np.arange(max(lengths))[None] < np.asarray(lengths)[:, None]).astype(np.int64)
    return seen


def _check_decoder(core: ov.Core, device: str, config: dict[str, Any] | None = None,
                   atol: float = 1e-4) -> None:
    model = _decoder()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = _generate(lambda feeds: session.run(None, feeds), [5, 3])
    compiled = core.compile_model(model, device, config or {})
    got = _generate(lambda feeds: compiled(feeds), [5, 3])
    for step, (got_step, want_step) in enumerate(zip(got, want, strict=True)):
        for b, (actual, expected) in enumerate(zip(got_step, want_step, strict=True)):
            np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=atol,
                                       err_msg=f"step {step}, entry {b}")


def test_decoder_prompt_and_decode_on_emulated_gpu(emulated_core: ov.Core) -> None:
    model = _decoder()
    placed = emulated_core.query_model(emulated_core.read_model(model), "GPU")
    assert placed.get("GroupQueryAttention_9") == "GPU.0", placed
    _check_decoder(emulated_core, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})


def test_decoder_on_the_cpu_device() -> None:
    """OpenVINO reads GroupQueryAttention only for batches of one: the CPU device runs it on ONNX
    Runtime, and says why."""
    core = ov.Core()
    compiled = core.compile_model(_decoder(), "CPU")
    assert compiled.get_property("ENGINE") == "ONNXRUNTIME"
    assert "GroupQueryAttention" in compiled.get_property("ENGINE_FALLBACK_REASON")
    _check_decoder(core, "CPU")


@pytest.mark.parametrize(("hint", "atol"), [("f32", 1e-4), (None, 5e-2)], ids=["f32", "default-precision"])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_decoder_on_cuda(hint: str | None, atol: float) -> None:
    _check_decoder(ov.Core(), "GPU.0", {"INFERENCE_PRECISION_HINT": hint} if hint else {}, atol)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_forms_on_cuda() -> None:
    """The SDPA forms (grouped heads, bias) and the float32 ones (softcap, sink, output_qk) on CUDA."""
    core = ov.Core()
    _run_steps(core, _gqa_model(4, 1, True, rotary=True), [6, 3])
    _run_steps(core, _gqa_model(4, 2, False, bias=True, local_window_size=3), [5, 3])
    _run_steps(core, _gqa_model(4, 2, False, sink=True, softcap=2.0, qk_output=2), [5, 3])
    _run_steps(core, _half(_gqa_model(4, 2, True, rotary=True)), [5, 3], atol=3e-3, dtype=np.float16)


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)
