"""Property: any valid affinity assignment over GPU.0, GPU.1 and CPU gives the whole model's
outputs (ONNX Runtime on the whole model is the reference); and the contrib-op fallback."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import numpy_helper

import inferplex as ov

from conftest import ONNX_BACKEND_DATA, ort_run
from hetero_plugins import LimitedPlugin, chain_model, contrib_model, diamond_model, glue_model, named

GPU_PLUGIN = importlib.util.find_spec("torch") is not None and \
    importlib.util.find_spec("inferplex.devices.gpu.plugin") is not None

BACKEND_MODELS = ["light/light_squeezenet.onnx", "pytorch-converted/test_PixelShuffle",
                  "pytorch-converted/test_Conv2d_groups", "pytorch-converted/test_Embedding",
                  "simple/test_expand_shape_model1"]
BUILT_MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "diamond": diamond_model, "glue": glue_model, "chain": lambda: chain_model(4, 16),
    "contrib": contrib_model}


def _backend_case(path: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    location = ONNX_BACKEND_DATA / path
    if location.suffix == ".onnx":
        model = _logits(onnx.load(location))
        rng = np.random.default_rng(0)
        weights = {t.name for t in model.graph.initializer}
        feeds = {i.name: rng.random([d.dim_value or 1 for d in i.type.tensor_type.shape.dim],
                                    dtype=np.float32) for i in model.graph.input
                 if i.name not in weights}
        return named(model), feeds
    model = onnx.load(location / "model.onnx")
    feeds = {}
    for info, file in zip(model.graph.input, sorted((location / "test_data_set_0").glob("input_*.pb")),
                          strict=False):
        tensor = onnx.TensorProto()
        tensor.ParseFromString(Path(file).read_bytes())
        feeds[info.name] = numpy_helper.to_array(tensor)
    return named(model), feeds


def _logits(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its final Softmax left out: the input of that Softmax is the output.

    The light zoo models fill each weight with one constant, so every class gets the same logit,
    about 1e10 for squeezenet: float32 rounding alone (one place of 1e10 is 1,024) decides their
    Softmax, which any other summation order turns from uniform into one-hot.  Their logits
    compare within rounding, as every other output does."""
    last = model.graph.node[-1]
    if last.op_type != "Softmax" or [o.name for o in model.graph.output] != list(last.output):
        return model
    output = onnx.helper.make_tensor_value_info(last.input[0], onnx.TensorProto.FLOAT, None)
    del model.graph.node[-1]
    del model.graph.output[:]
    model.graph.output.append(output)
    return model


def _built_case(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    model = named(BUILT_MODELS[name]())
    dims = [d.dim_value or 3 for d in model.graph.input[0].type.tensor_type.shape.dim]
    return model, {"x": np.random.default_rng(1).standard_normal(dims).astype(np.float32)}


@pytest.fixture(scope="module")
def hetero_core() -> tuple[ov.Core, list[str]]:
    """A Core with GPU.0, GPU.1 (emulated) and CPU; LIMITED.0/.1 stand in without torch."""
    mp = pytest.MonkeyPatch()
    mp.setenv("INFERPLEX_EMULATED_GPUS", "2")
    core = ov.Core()
    if GPU_PLUGIN:
        yield core, ["GPU.0", "GPU.1", "CPU"]
    else:
        core.register_plugin(LimitedPlugin())
        yield core, ["LIMITED.0", "LIMITED.1", "CPU"]
    mp.undo()


CASES = [("built", n) for n in BUILT_MODELS] + [("backend", p) for p in BACKEND_MODELS]


@pytest.mark.parametrize("source,name", CASES)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1))
def test_random_affinities_match_whole_model(hetero_core, source: str, name: str, seed: int) -> None:  # noqa: ANN001
    core, devices = hetero_core
    proto, feeds = _built_case(name) if source == "built" else _backend_case(name)
    expected = ort_run(proto, feeds)
    model = core.read_model(proto)
    supported = {d: set(core.query_model(model, d)) for d in devices}
    rng = np.random.default_rng(seed)
    for op in model.get_ops():
        able = [d for d in devices if op.get_friendly_name() in supported[d]] or devices[-1:]
        op.get_rt_info()["affinity"] = able[rng.integers(len(able))]
    compiled = core.compile_model(model, "HETERO:" + ",".join(devices))
    results = compiled.create_infer_request().infer(feeds)
    for index, reference in enumerate(expected):
        np.testing.assert_allclose(np.asarray(results[index]), reference, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not GPU_PLUGIN, reason="the GPU plugin (torch) is not installed")
def test_contrib_op_falls_back_gpu_cpu_gpu(hetero_core) -> None:  # noqa: ANN001
    core, _ = hetero_core
    proto, feeds = _built_case("contrib")
    compiled = core.compile_model(core.read_model(proto), "HETERO:GPU,CPU", {"ENABLE_PROFILING": True})
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    assert [s.device for s in plan.subgraphs] == ["GPU.0", "CPU", "GPU.0"]
    request = compiled.create_infer_request()
    request.infer(feeds)
    np.testing.assert_allclose(request.results["y"], ort_run(proto, feeds)[0], rtol=1e-5, atol=1e-5)
    names = [r.node_name for r in request.get_profiling_info()]
    assert any(n.startswith("subgraph1: ") for n in names)
    assert any("transfer" in n and "GPU.0->CPU" in n for n in names)
