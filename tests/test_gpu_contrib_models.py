"""Transformer models fused by ONNX Runtime's transformer optimizer, on the GPU and CPU devices.

A small BERT (fused to Attention, or MultiHeadAttention with a raw key padding mask, with
EmbedLayerNormalization, SkipLayerNormalization and BiasGelu or FastGelu) and a small GPT-2
(SkipLayerNormalization, FastGelu; exported at opset 17 and at 14, where the optimizer's
LayerNormalization is ONNX Runtime's own): ``transformers`` configs with random weights, 2 layers, hidden
size 64, exported by ``torch.onnx.export`` and fused by ``optimize_model`` with its fusions on.  They
run whole on ``GPU.0`` (emulated here, CUDA under the ``gpu`` marker; no HETERO split) and on the CPU
device, against ONNX Runtime on the fused model.  The single ops are in
``test_gpu_contrib_transformer.py``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import inferplex as ov

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime.transformers.optimizer")

_MS = "com.microsoft"


@pytest.fixture
def core(emulated_or_cuda_core: ov.Core) -> ov.Core:
    return emulated_or_cuda_core


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


_VOCAB, _LENGTH = 100, 8


def _export(module: Any, args: tuple[Any, ...], names: list[str], opset: int = 17) -> onnx.ModelProto:
    buffer = io.BytesIO()
    module.eval()
    torch.onnx.export(module, args, buffer, input_names=names, output_names=["y"], opset_version=opset,
                      dynamic_axes={n: {0: "batch", 1: "length"} for n in names}, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())


def _optimized(folder: Path, model: onnx.ModelProto, model_type: str, **options: Any) -> onnx.ModelProto:
    """``model`` through ONNX Runtime's transformer optimizer; ``options`` set its FusionOptions."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    path = folder / f"{model_type}.onnx"
    onnx.save(model, path)
    fusion = FusionOptions(model_type)
    for key, value in options.items():
        setattr(fusion, key, value)
    fused = optimize_model(str(path), model_type=model_type, num_heads=4, hidden_size=64,
                           optimization_options=fusion).model
    fused.ir_version = 10
    return fused


def _jitter(module: Any) -> None:
    """Random LayerNorm weights too (a fresh model's are ones and zeros, which hide mistakes)."""
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)


class _Wrapped(torch.nn.Module):
    """A ``transformers`` model taking its inputs by position, returning its last hidden state."""

    def __init__(self, model: Any, names: Sequence[str], **options: Any) -> None:
        super().__init__()
        self.model, self.names, self.options = model, tuple(names), options

    def forward(self, *inputs: Any) -> Any:
        return self.model(**dict(zip(self.names, inputs, strict=True)), **self.options).last_hidden_state


@pytest.fixture(scope="module")
def bert_export(tmp_path_factory: Any) -> onnx.ModelProto:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=_VOCAB, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=128, max_position_embeddings=32,
                                     attn_implementation="eager")
    model = transformers.BertModel(config)
    _jitter(model)
    ids = torch.randint(0, _VOCAB, (2, _LENGTH))
    ones = torch.ones(2, _LENGTH, dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    return _export(_Wrapped(model, names), (ids, ones, ones * 0), names)


@pytest.fixture(scope="module")
def bert(tmp_path_factory: Any, bert_export: onnx.ModelProto) -> onnx.ModelProto:
    return _optimized(tmp_path_factory.mktemp("bert"), bert_export, "bert")


@pytest.fixture(scope="module")
def bert_mha(tmp_path_factory: Any, bert_export: onnx.ModelProto) -> onnx.ModelProto:
    """MultiHeadAttention with a raw 0/1 key padding mask and FastGelu in place of Attention and BiasGelu."""
    return _optimized(tmp_path_factory.mktemp("bert_mha"), bert_export, "bert", use_multi_head_attention=True,
                      enable_gelu_approximation=True, attention_mask_format=2)


@pytest.fixture(scope="module")
def gpt2_module() -> Any:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=_VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=32,
                                     attn_implementation="eager")
    model = transformers.GPT2Model(config)
    _jitter(model)
    return model


def _gpt2(folder: Path, model: Any, opset: int) -> onnx.ModelProto:
    masking = pytest.importorskip("transformers.masking_utils")
    older = getattr(masking, "sdpa_mask_older_torch", None)
    if older is None:
        pytest.skip("this transformers has no mask builder torch.onnx.export's tracer can follow")
    ids = torch.randint(0, _VOCAB, (2, _LENGTH), generator=torch.Generator().manual_seed(1))
    with pytest.MonkeyPatch.context() as patch:
        # the mask builder of recent torch uses vmap, which torch.onnx.export's tracer cannot follow
        patch.setattr(masking, "sdpa_mask", older)
        names = ["input_ids", "attention_mask"]
        mask = torch.ones(2, _LENGTH, dtype=torch.int64)
        exported = _export(_Wrapped(model, names, use_cache=False), (ids, mask), names, opset)
    return _optimized(folder, exported, "gpt2")


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: Any, gpt2_module: Any) -> onnx.ModelProto:
    return _gpt2(tmp_path_factory.mktemp("gpt2"), gpt2_module, 17)


@pytest.fixture(scope="module")
def gpt2_opset14(tmp_path_factory: Any, gpt2_module: Any) -> onnx.ModelProto:
    """At opset 14 the optimizer's final LayerNormalization is ONNX Runtime's own, in the ONNX domain."""
    return _gpt2(tmp_path_factory.mktemp("gpt2_opset14"), gpt2_module, 14)


def _text_feeds(names: Sequence[str], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {"input_ids": rng.integers(0, _VOCAB, (3, _LENGTH)).astype(np.int64),
             "attention_mask": np.array([[1] * _LENGTH, [1] * 5 + [0] * 3, [1] * 2 + [0] * 6],
                                        dtype=np.int64),
             "token_type_ids": rng.integers(0, 2, (3, _LENGTH)).astype(np.int64)}
    return {n: feeds[n] for n in names}


_FUSED = {"bert": {"Attention", "EmbedLayerNormalization", "BiasGelu", "SkipLayerNormalization"},
          "bert_mha": {"MultiHeadAttention", "EmbedLayerNormalization", "FastGelu", "SkipLayerNormalization"},
          "gpt2": {"SkipLayerNormalization", "FastGelu"},
          "gpt2_opset14": {"SkipLayerNormalization", "FastGelu"}}
"""The contrib ops the optimizer writes in each model (the tests are about them)."""


@pytest.mark.parametrize("name", list(_FUSED))
def test_fused_transformer_runs_whole_on_the_gpu(core: ov.Core, name: str, request: Any) -> None:
    model: onnx.ModelProto = request.getfixturevalue(name)
    written = {n.op_type for n in model.graph.node if n.domain == _MS}
    if not _FUSED[name] <= written:  # the optimizer's fusions vary with the onnxruntime version
        pytest.skip(f"this onnxruntime's optimizer wrote {sorted(written)}, not {sorted(_FUSED[name])}")
    assert name != "gpt2_opset14" or "LayerNormalization" in {n.op_type for n in model.graph.node}
    placed = core.query_model(core.read_model(model), "GPU")
    assert len(placed) == len(model.graph.node) and set(placed.values()) == {"GPU.0"}
    compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    assert compiled.get_property("EXECUTION_DEVICES") == ["GPU.0"]
    for seed in (1, 2):
        feeds = _text_feeds([i.name for i in model.graph.input], seed)
        want = _ort(model, feeds)[0]
        np.testing.assert_allclose(np.asarray(compiled(feeds)[0]), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", list(_FUSED))
def test_fused_transformer_runs_on_the_cpu_device(name: str, request: Any) -> None:
    model: onnx.ModelProto = request.getfixturevalue(name)
    feeds = _text_feeds([i.name for i in model.graph.input], 3)
    got = ov.Core().compile_model(model, "CPU")(feeds)[0]
    np.testing.assert_allclose(np.asarray(got), _ort(model, feeds)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["bert", "bert_mha"])
def test_fused_transformer_under_f16_hint_stays_close(core: ov.Core, name: str, request: Any) -> None:
    # the masks' filter values (float32's lowest in the optimizer's BERT) become float16's lowest
    model: onnx.ModelProto = request.getfixturevalue(name)
    feeds = _text_feeds([i.name for i in model.graph.input], 4)
    got = np.asarray(core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f16"})(feeds)[0])
    want = _ort(model, feeds)[0]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=0.03)
    assert np.abs(got - want).mean() < 0.003
