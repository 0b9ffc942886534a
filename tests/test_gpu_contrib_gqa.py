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
        inputs += [helper.make_tensor_value_info(n, _F, ["batch", "seq", kv_heads * _HEAD]) for n in names[1:3]]
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
    node = helper.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"],
                            domain=_MS, num_heads=heads, kv_num_heads=kv_heads, **attrs)
    outputs = [helper.make_tensor_value_info(n, _F, None) for n in ("output", "present_key", "present_value")]
    graph = helper.make_graph([node], "gqa", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)])
    model.ir_version = 10
    return model


def _step_feeds(model: onnx.ModelProto, lengths: list[int], new: int, past: tuple[np.ndarray, np.ndarray],
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
               atol: float = 1e-4) -> None:
    """Prompt (right-padded to the longest of ``prompt``) then ``steps`` decode steps, each step's past
    being ONNX Runtime's present of the step before; outputs of the valid rows and presents compared."""
    kv_heads = next(a.i for a in model.graph.node[0].attribute if a.name == "kv_num_heads")
    compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    batch, width = len(prompt), max(prompt)
    empty = np.zeros((batch, kv_heads, 0, _HEAD), dtype=np.float32)
    past, lengths, new = (empty, empty), list(prompt), width
    for step in range(steps + 1):
        feeds = _step_feeds(model, lengths, new, past, seed=step)
        want = session.run(None, feeds)
        got = compiled(feeds)
        for b, length in enumerate(lengths):
            valid = length if step == 0 else new
            np.testing.assert_allclose(np.asarray(got[0])[b, :valid], want[0][b, :valid], rtol=1e-4, atol=atol,
                                       err_msg=f"output, step {step}, entry {b}")
        for index in (1, 2):
            np.testing.assert_allclose(np.asarray(got[index]), want[index], rtol=1e-4, atol=atol,
                                       err_msg=f"present {index}, step {step}")
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


def test_attention_bias_with_softcap(emulated_core: ov.Core) -> None:
    _run_steps(emulated_core, _gqa_model(4, 2, False, bias=True, softcap=2.0), [4])
