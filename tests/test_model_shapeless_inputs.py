"""Graph inputs declared with an element type and no shape (an unknown rank), as exporters write them.

ONNX Runtime and OpenVINO read such models: OpenVINO gives the input a shape of
dynamic rank (``PartialShape.dynamic()``, ``[...]``), keeps it on the compiled
model's port, runs inputs of whatever rank the model's ops accept (the
outputs' shapes follow the actual inputs), and ``Model.reshape`` can make the
shape static before a compile.  Every device here gives ONNX Runtime's results
on the whole model.  (onnx's checker wants a shape on the main graph's inputs;
read_model's check leaves that rule out, as for outputs: see
``test_model_shapeless_outputs.py``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
import inferplex.opset8 as ops
from inferplex.errors import CompileError, InferenceError, InputError, ModelError, UnsupportedOpError

from conftest import ort_run

RANKS = [(), (4,), (2, 4), (2, 3, 4), (1, 2, 3, 4)]
"""Input shapes of every rank from 0 to 4 (the last dim 4 where there is one)."""


@pytest.fixture(scope="module")
def core() -> Iterator[ov.Core]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "2")
        yield ov.Core()


def _graph_model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[tuple[str, int, Any]],
                 outputs: Sequence[tuple[str, int]], weights: Sequence[onnx.TensorProto] = (),
                 opset: int = 17) -> onnx.ModelProto:
    """A model whose inputs have the given shapes (None: no shape field) and whose outputs have none."""
    graph = helper.make_graph(
        list(nodes), "shapeless_inputs",
        [helper.make_tensor_value_info(name, kind, shape) for name, kind, shape in inputs],
        [helper.make_tensor_value_info(name, kind, None) for name, kind in outputs], list(weights))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _elementwise() -> onnx.ModelProto:
    """y = relu(x) + x (any rank, rank 0 included) and s = ReduceSum(x) over every axis (a scalar)."""
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Add", ["h", "x"], ["y"], name="add"),
             helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0)]
    model = _graph_model(nodes, [("x", TensorProto.FLOAT, None)],
                         [("y", TensorProto.FLOAT), ("s", TensorProto.FLOAT)])
    assert not model.graph.input[0].type.tensor_type.HasField("shape")
    return model


def _weighted(weight_rows: int = 4) -> onnx.ModelProto:
    """y = softmax(relu(x @ w)) over the last axis, x of any rank >= 1 with a last dim of ``weight_rows``
    (OpenVINO's own CPU transformations cannot take this Softmax at an unknown rank)."""
    weight = np.random.default_rng(0).standard_normal((weight_rows, 5)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1)]
    return _graph_model(nodes, [("x", TensorProto.FLOAT, None)], [("y", TensorProto.FLOAT)],
                        [numpy_helper.from_array(weight, "w")])


def _array(shape: Sequence[int], seed: int = 1) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).standard_normal(shape), dtype=np.float32)


def _assert_as_onnx_runtime(results: Any, model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                            rtol: float = 1e-5) -> None:
    expected = ort_run(model, feeds)
    for index, reference in enumerate(expected):
        got = np.asarray(results[index])
        assert got.shape == reference.shape
        np.testing.assert_allclose(got, reference, rtol=rtol, atol=1e-5)


def _runs_every_rank(compiled: ov.CompiledModel, model: onnx.ModelProto,
                     shapes: Sequence[Sequence[int]], rtol: float = 1e-5) -> None:
    """One request runs inputs of each shape in turn, as ONNX Runtime does; its tensors follow them."""
    request = compiled.create_infer_request()
    for seed, shape in enumerate(shapes):
        x = _array(shape, seed)
        results = request.infer({"x": x})
        _assert_as_onnx_runtime(results, model, {"x": x}, rtol)
        assert tuple(request.get_input_tensor(0).shape) == tuple(shape)
        assert tuple(request.get_output_tensor(0).shape) == np.asarray(results[0]).shape


# --- read_model ---------------------------------------------------------------------------


def test_read_from_every_source_gives_a_dynamic_rank(core: ov.Core, tmp_path: Path) -> None:
    model = _elementwise()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    for source in (model, model.SerializeToString(), str(path), path):
        read = core.read_model(source)
        shape = read.inputs[0].get_partial_shape()
        assert shape == ov.PartialShape.dynamic() and shape == ov.PartialShape("[...]")
        assert shape.is_dynamic and not shape.is_static and shape.rank.is_dynamic
        assert shape.rank == ov.Dimension.dynamic() and shape != ov.PartialShape([2, 4])
        assert str(shape) == "[...]"
        assert read.input("x").get_element_type() == ov.Type.f32
        assert read.outputs[0].get_partial_shape().rank.is_dynamic  # y = relu(x) + x: x's rank
        with pytest.raises(InputError, match=r"'x' has a dynamic shape \[\.\.\.\].*reshape"):
            read.inputs[0].get_shape()


def test_dims_without_value_or_name_are_dynamic(core: ov.Core) -> None:
    model = _graph_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [None, 3])],
                         [("y", TensorProto.FLOAT)])
    dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert not dim.HasField("dim_value") and not dim.HasField("dim_param")
    read = core.read_model(model)
    assert read.inputs[0].get_partial_shape() == ov.PartialShape("[?,3]")
    assert read.outputs[0].get_partial_shape() == ov.PartialShape("[?,3]")
    for device in ("CPU", "GPU.0"):
        compiled = core.compile_model(read, device)
        assert compiled.inputs[0].get_partial_shape() == ov.PartialShape("[?,3]")
        _runs_every_rank(compiled, model, [(2, 3), (5, 3)])


@pytest.mark.parametrize("case", ["elementwise", "weights", "dims", "Transpose without perm", "Resize"])
def test_port_shapes_are_openvinos(core: ov.Core, case: str) -> None:
    """The input and output shapes read_model gives are those OpenVINO's read_model gives."""
    openvino = pytest.importorskip("openvino")
    model = {"elementwise": _elementwise, "weights": _weighted, "Resize": _resize,
             "dims": lambda: _graph_model([helper.make_node("Relu", ["x"], ["y"])],
                                          [("x", TensorProto.FLOAT, [None, 3])], [("y", TensorProto.FLOAT)]),
             "Transpose without perm": RANK_DEPENDENT["Transpose without perm"][0]}[case]()
    reference = openvino.Core().read_model(model.SerializeToString(), b"")
    read = core.read_model(model)
    for ours, theirs in ((read.inputs, reference.inputs), (read.outputs, reference.outputs)):
        assert [str(port.get_partial_shape()) for port in ours] == \
            [str(port.get_partial_shape()) for port in theirs]
    assert read.inputs[0].get_partial_shape().rank.is_dynamic == \
        reference.inputs[0].get_partial_shape().rank.is_dynamic


def test_an_input_with_neither_type_nor_shape_is_still_refused(core: ov.Core) -> None:
    model = _elementwise()
    model.graph.input[0].ClearField("type")
    with pytest.raises(ModelError, match=r"malformed ONNX model.*type"):
        core.read_model(model)


def test_external_data_beside_a_shapeless_input(core: ov.Core, tmp_path: Path) -> None:
    """The checker's copy, not the file, is checked: external weights are read from the model's folder."""
    model = _weighted(weight_rows=128)  # a weight past the size the checker's copy leaves out
    saved = onnx.ModelProto()
    saved.CopyFrom(model)  # onnx.save moves the copy's weights out, in place
    path = tmp_path / "external.onnx"
    onnx.save(saved, str(path), save_as_external_data=True, location="external.bin", size_threshold=0)
    assert (tmp_path / "external.bin").is_file()
    read = core.read_model(path)
    assert read.inputs[0].get_partial_shape() == ov.PartialShape.dynamic()
    _runs_every_rank(core.compile_model(read, "CPU"), model, [(128,), (2, 3, 128)])


# --- compile and run ----------------------------------------------------------------------


DEVICES = ["CPU", "GPU.0", "HETERO:GPU.0,CPU", "MULTI:GPU.0,CPU", "AUTO"]


@pytest.mark.parametrize("device", DEVICES)
def test_every_device_runs_inputs_of_every_rank(core: ov.Core, device: str) -> None:
    model = _elementwise()
    compiled = core.compile_model(core.read_model(model), device)
    assert compiled.input().get_partial_shape() == ov.PartialShape.dynamic()
    assert compiled.input("x").get_partial_shape().rank.is_dynamic
    assert compiled.outputs[0].get_partial_shape().rank.is_dynamic
    _runs_every_rank(compiled, model, RANKS)


@pytest.mark.parametrize("device", DEVICES)
def test_weights_and_a_softmax_on_every_device(core: ov.Core, device: str) -> None:
    model = _weighted()
    compiled = core.compile_model(core.read_model(model), device)
    assert compiled.input().get_partial_shape().rank.is_dynamic
    _runs_every_rank(compiled, model, RANKS[1:])


@pytest.mark.parametrize("device", ["CPU", "GPU.0"])
def test_a_rank_the_ops_refuse_fails_that_request_only(core: ov.Core, device: str) -> None:
    """MatMul takes no scalar: the engine's refusal is the request's InferenceError, and the next
    request with an input of another rank runs."""
    model = _weighted()
    compiled = core.compile_model(core.read_model(model), device)
    request = compiled.create_infer_request()
    with pytest.raises(InferenceError, match=f"inference failed on {device}"):
        request.infer({"x": np.asarray(np.float32(1.0))})
    x = _array((2, 3, 4))
    _assert_as_onnx_runtime(request.infer({"x": x}), model, {"x": x})


def test_the_cpu_runs_them_on_onnx_runtime(core: ov.Core, caplog: pytest.LogCaptureFixture) -> None:
    """OpenVINO's CPU plugin compiles no Parameter of dynamic rank: the default engine leaves the
    model to ONNX Runtime and says why; ENGINE=OPENVINO refuses, naming the engine that runs it."""
    model = _elementwise()
    for config in ({}, {"ENGINE": "ONNXRUNTIME"}):
        with caplog.at_level("INFO", logger="inferplex"):
            compiled = core.compile_model(core.read_model(model), "CPU", config)
        assert compiled.input().get_partial_shape() == ov.PartialShape.dynamic()
        _runs_every_rank(compiled, model, RANKS)
    assert "dynamic rank (the model's 'x')" in caplog.text
    with pytest.raises(CompileError, match=r"OpenVINO cannot run the model on CPU.*ENGINE=ONNXRUNTIME"):
        core.compile_model(core.read_model(model), "CPU", {"ENGINE": "OPENVINO"})
    reshaped = core.read_model(model)
    reshaped.reshape({"x": [2, 4]})  # a static shape: OpenVINO compiles it
    _runs_every_rank(core.compile_model(reshaped, "CPU", {"ENGINE": "OPENVINO"}), model, [(2, 4)])


def test_the_cpu_answers_queries_where_openvino_cannot_transform_the_model(core: ov.Core) -> None:
    """The CPU reports every op (ONNX Runtime runs the model), so HETERO places them."""
    read = core.read_model(_weighted())
    names = {op.get_friendly_name() for op in read.get_ops() if op.get_type_name() in
             ("MatMul", "Relu", "Softmax")}
    assert names == {"matmul", "relu", "softmax"}
    assert {name: device for name, device in core.query_model(read, "CPU").items() if name in names} == \
        dict.fromkeys(names, "CPU")
    _runs_every_rank(core.compile_model(read, "HETERO:CPU,GPU.0"), _weighted(), RANKS[1:3])
    # OpenVINO's own query fails on this model (its Softmax transformation wants the rank): the
    # OpenVINO engine, which cannot compile it either, reports no op rather than an error.
    assert core.query_model(read, "CPU", {"ENGINE": "OPENVINO"}) == {}


def test_split_across_devices(core: ov.Core) -> None:
    """Tensors of unknown rank cross HETERO's subgraph boundaries, by affinity and by pipeline."""
    model = _weighted()
    read = core.read_model(model)
    for op in read.get_ops():
        if op.get_type_name() in ("MatMul", "Softmax"):
            op.get_rt_info()["affinity"] = "GPU.0"
        elif op.get_type_name() == "Relu":
            op.get_rt_info()["affinity"] = "CPU"
    _runs_every_rank(core.compile_model(read, "HETERO:GPU.0,CPU"), model, RANKS[1:])
    config = {"MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL"}
    _runs_every_rank(core.compile_model(core.read_model(model), "HETERO:GPU.0,GPU.1", config), model,
                     RANKS[1:])


def _with_weight(op: str, weight_shape: tuple[int, ...], **attributes: Any) -> onnx.ModelProto:
    weight = np.random.default_rng(2).standard_normal(weight_shape).astype(np.float32)
    return _graph_model([helper.make_node(op, ["x", "w"], ["y"], **attributes)],
                        [("x", TensorProto.FLOAT, None)], [("y", TensorProto.FLOAT)],
                        [numpy_helper.from_array(weight, "w")])


def _one_op(op: str, opset: int = 17, **attributes: Any) -> onnx.ModelProto:
    return _graph_model([helper.make_node(op, ["x"], ["y"], **attributes)], [("x", TensorProto.FLOAT, None)],
                        [("y", TensorProto.FLOAT)], opset=opset)


RANK_DEPENDENT: dict[str, tuple[Callable[[], onnx.ModelProto], list[tuple[int, ...]]]] = {
    "Flatten": (lambda: _one_op("Flatten", axis=1), [(2, 3, 4), (2, 3), (5, 1, 2, 2)]),
    "Transpose without perm": (lambda: _one_op("Transpose"), [(2, 3, 4), (2, 3)]),
    "Squeeze without axes": (lambda: _one_op("Squeeze"), [(1, 3, 1, 4), (2, 1)]),
    "Softmax at opset 11": (lambda: _one_op("Softmax", opset=11), [(2, 3, 4), (2, 3)]),
    "ReduceMean of all axes": (lambda: _one_op("ReduceMean"), [(3, 4), (2, 3, 4)]),
    "GlobalAveragePool": (lambda: _one_op("GlobalAveragePool"), [(1, 3, 5, 5), (2, 3, 4), (1, 2, 3, 2, 2)]),
    "GlobalMaxPool": (lambda: _one_op("GlobalMaxPool"), [(1, 3, 5, 5), (2, 3, 4)]),
    "GlobalLpPool": (lambda: _one_op("GlobalLpPool"), [(1, 3, 5, 5), (2, 3, 4)]),
    "Conv without kernel_shape": (lambda: _with_weight("Conv", (2, 3, 3, 3), pads=[1, 1, 1, 1]),
                                  [(1, 3, 5, 5), (2, 3, 4, 6)]),
    "Conv 1-D": (lambda: _with_weight("Conv", (2, 3, 3), strides=[2]), [(1, 3, 7)]),
    "ConvTranspose": (lambda: _with_weight("ConvTranspose", (3, 2, 2, 2)), [(1, 3, 4, 4)]),
}
"""Ops whose work depends on the input's rank, each with input shapes ONNX Runtime accepts."""


@pytest.mark.parametrize("device", ["CPU", "GPU.0"])
@pytest.mark.parametrize("case", list(RANK_DEPENDENT))
def test_ops_that_depend_on_the_rank(core: ov.Core, case: str, device: str) -> None:
    build, shapes = RANK_DEPENDENT[case]
    model = build()
    compiled = core.compile_model(core.read_model(model), device)
    assert compiled.input().get_partial_shape() == ov.PartialShape.dynamic()
    _runs_every_rank(compiled, model, shapes)


def _resize() -> onnx.ModelProto:
    """Resize by scales: the GPU's lowering needs the input's rank, which nothing in the model tells."""
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales")
    return _graph_model([helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")],
                        [("x", TensorProto.FLOAT, None)], [("y", TensorProto.FLOAT)], [scales])


def test_a_gpu_refusal_for_want_of_a_rank_says_to_reshape(core: ov.Core) -> None:
    """The GPU names the input and the reshape that lets it run the model; virtual devices place
    the model where it runs, and after the reshape the GPU runs it."""
    model = _resize()
    with pytest.raises(UnsupportedOpError, match=r"Resize needs the input rank.*HETERO:GPU,CPU.*"
                                                 r"\('x', declared without a shape\).*model\.reshape"):
        core.compile_model(core.read_model(model), "GPU.0")
    for device in ("HETERO:GPU.0,CPU", "MULTI:GPU.0,CPU", "AUTO"):
        compiled = core.compile_model(core.read_model(model), device)
        assert compiled.get_property("EXECUTION_DEVICES") == ["CPU"]
        _runs_every_rank(compiled, model, [(1, 1, 2, 3)])
    with pytest.raises(CompileError,
                       match=r"GPU\.0.*Resize.*'x' are declared without a shape.*model\.reshape"):
        core.compile_model(core.read_model(model), "AUTO:GPU.0")
    reshaped = core.read_model(model)
    reshaped.reshape({"x": [1, 1, 2, 3]})
    _runs_every_rank(core.compile_model(reshaped, "GPU.0"), model, [(1, 1, 2, 3)])


@pytest.mark.parametrize("device", ["CPU", "GPU.0"])
def test_shapes_read_from_inputs_of_unknown_length(core: ov.Core, device: str) -> None:
    """Reshape to a shape input of unknown length; Expand to an input's Shape (a 1-D output [?])."""
    nodes = [helper.make_node("Reshape", ["x", "target"], ["y"]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Expand", ["x", "s"], ["e"])]
    model = _graph_model(nodes, [("x", TensorProto.FLOAT, None), ("target", TensorProto.INT64, None)],
                         [("y", TensorProto.FLOAT), ("s", TensorProto.INT64), ("e", TensorProto.FLOAT)])
    read = core.read_model(model)
    assert [port.get_partial_shape().rank.is_dynamic for port in read.inputs] == [True, True]
    assert read.outputs[1].get_partial_shape() == ov.PartialShape("[?]")
    compiled = core.compile_model(read, device)
    for target in ([3, -1], [2, 3, 2], [12]):
        feeds = {"x": _array((2, 6)), "target": np.array(target, dtype=np.int64)}
        _assert_as_onnx_runtime(compiled(feeds), model, feeds)


def test_a_model_built_with_a_parameter_of_dynamic_rank(core: ov.Core) -> None:
    parameter = ops.parameter(ov.PartialShape.dynamic(), np.float32, name="data")
    model = ov.Model(ops.relu(parameter), [parameter], "relu")
    assert model.input().get_partial_shape() == ov.PartialShape.dynamic()
    for device in ("CPU", "GPU.0"):
        compiled = core.compile_model(model, device)
        assert compiled.input().get_partial_shape().rank.is_dynamic
        for shape in RANKS:
            x = _array(shape)
            np.testing.assert_array_equal(compiled({"data": x})[0], np.maximum(x, 0))


# --- reshape ------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["CPU", "GPU.0"])
def test_reshape_to_a_static_shape_then_compile(core: ov.Core, device: str) -> None:
    model = _weighted()
    read = core.read_model(model)
    read.reshape({"x": [2, 3, 4]})
    assert read.inputs[0].get_partial_shape() == ov.PartialShape([2, 3, 4])
    assert read.outputs[0].get_partial_shape() == ov.PartialShape([2, 3, 5])
    compiled = core.compile_model(read, device)
    assert list(compiled.input().get_shape()) == [2, 3, 4]
    _runs_every_rank(compiled, model, [(2, 3, 4)])
    with pytest.raises(InputError, match=r"'x' has rank 2.*takes rank 3"):
        compiled({"x": _array((2, 4))})


def test_reshape_forms_and_back_to_dynamic_rank(core: ov.Core) -> None:
    read = core.read_model(_elementwise())
    read.reshape([2, 3])  # a list reshapes the only input
    assert read.inputs[0].get_partial_shape() == ov.PartialShape([2, 3])
    read.reshape({"x": ov.PartialShape([-1, 4])})
    assert read.inputs[0].get_partial_shape() == ov.PartialShape("[?,4]")
    assert read.outputs[0].get_partial_shape() == ov.PartialShape("[?,4]")
    read.reshape({"x": ov.PartialShape.dynamic()})
    assert read.inputs[0].get_partial_shape() == ov.PartialShape.dynamic()
    _runs_every_rank(core.compile_model(read, "CPU"), _elementwise(), RANKS[:3])


# --- requests, queues, caches -------------------------------------------------------------


@pytest.mark.parametrize("device", ["CPU", "GPU.0"])
def test_request_tensors_and_queues_of_several_ranks(core: ov.Core, device: str) -> None:
    model = _elementwise()
    compiled = core.compile_model(core.read_model(model), device)
    request = compiled.create_infer_request()
    for shape in ((2, 2, 2), (3,)):
        x = _array(shape)
        request.set_input_tensor(ov.Tensor(x))
        request.infer()
        (expected, _) = ort_run(model, {"x": x})
        np.testing.assert_allclose(request.get_output_tensor(0).data, expected, rtol=1e-6)
        assert list(request.get_input_tensor().get_shape()) == list(shape)
    queue = ov.AsyncInferQueue(compiled, 3)
    shapes = [(1,), (2, 2), (3, 3, 3)]
    for job, shape in enumerate(shapes):
        queue.start_async({"x": _array(shape, job)}, job)
    queue.wait_all()
    assert sorted(tuple(r.get_output_tensor(0).shape) for r in queue) == sorted(shapes)


@pytest.mark.parametrize("device", ["CPU", "GPU.0"])
def test_cache_and_export_keep_the_dynamic_rank(core: ov.Core, device: str, tmp_path: Path) -> None:
    model = _elementwise()
    config = {"CACHE_DIR": str(tmp_path)}
    core.compile_model(core.read_model(model), device, config)
    assert any(tmp_path.iterdir())
    cached = core.compile_model(core.read_model(model), device, config)
    assert cached.input().get_partial_shape() == ov.PartialShape.dynamic()
    _runs_every_rank(cached, model, RANKS[:3])
    imported = core.import_model(core.compile_model(core.read_model(model), device).export_model(), device)
    assert imported.input().get_partial_shape() == ov.PartialShape.dynamic()
    _runs_every_rank(imported, model, RANKS[2:])


def test_save_model_keeps_the_dynamic_rank(core: ov.Core, tmp_path: Path) -> None:
    path = tmp_path / "saved.onnx"
    ov.save_model(core.read_model(_elementwise()), str(path))
    again = core.read_model(path)
    assert again.inputs[0].get_partial_shape() == ov.PartialShape.dynamic()
    _runs_every_rank(core.compile_model(again, "CPU"), _elementwise(), RANKS[:2])


# --- CUDA (run on the GPU machine: pytest -m gpu) -----------------------------------------


CUDA_CASES: dict[str, tuple[Callable[[], onnx.ModelProto], list[tuple[int, ...]]]] = {
    "weights and a softmax": (_weighted, RANKS[1:]),
    "elementwise": (_elementwise, RANKS),
    "Conv without kernel_shape": RANK_DEPENDENT["Conv without kernel_shape"],
    "GlobalAveragePool": RANK_DEPENDENT["GlobalAveragePool"],
}


@pytest.mark.gpu
@pytest.mark.parametrize("torch_compile", ["NO", "YES"])
@pytest.mark.parametrize("case", list(CUDA_CASES))
def test_cuda_runs_inputs_of_every_rank(case: str, torch_compile: str) -> None:
    """On a CUDA GPU (eager with its CUDA graphs per input shape, and torch.compile) as ONNX Runtime."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    build, shapes = CUDA_CASES[case]
    model = build()
    cuda_core = ov.Core()
    compiled = cuda_core.compile_model(cuda_core.read_model(model), "GPU.0", {"TORCH_COMPILE": torch_compile})
    assert compiled.input().get_partial_shape() == ov.PartialShape.dynamic()
    for _ in range(2):  # the second pass replays what the first made (graphs, compiled code)
        _runs_every_rank(compiled, model, shapes, rtol=1e-4)
