"""InferRequest's OpenVINO surface: tensors, inputs in every form, results, counters.

OpenVINO's ``test_infer_request.py`` is the specification; every numeric
result is compared with raw ONNX Runtime on the whole model.
"""

from __future__ import annotations

import datetime

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import InputError

from conftest import make_model, ort_run

FLOAT, INT32 = TensorProto.FLOAT, TensorProto.INT32


def _model(batch: int | str = 2) -> onnx.ModelProto:
    """x, y [batch,4] -> relu_out = Relu(x+y) [batch,4], tanh_out = Tanh((x+y) @ W) [batch,3]."""
    weights = numpy_helper.from_array((np.arange(12, dtype=np.float32).reshape(4, 3) - 6) / 10, "W")
    return make_model(
        [helper.make_node("Add", ["x", "y"], ["s"], name="add"),
         helper.make_node("Relu", ["s"], ["relu_out"], name="relu"),
         helper.make_node("MatMul", ["s", "W"], ["mm"], name="matmul"),
         helper.make_node("Tanh", ["mm"], ["tanh_out"], name="tanh")],
        [("x", FLOAT, [batch, 4]), ("y", FLOAT, [batch, 4])],
        [("relu_out", FLOAT, [batch, 4]), ("tanh_out", FLOAT, [batch, 3])], [weights])


STATIC, DYNAMIC = _model(), _model("N")


@pytest.fixture(scope="module")
def compiled(core: ov.Core) -> ov.CompiledModel:
    return core.compile_model(STATIC, "CPU")


def _feeds(seed: int, batch: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 4), dtype=np.float32),
            "y": rng.standard_normal((batch, 4), dtype=np.float32)}


def _matches(results: ov.InferResults, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    for got, want in zip(results.to_tuple(), ort_run(model, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --- preallocated request tensors -----------------------------------------------------------------


def test_writing_into_the_request_input_tensors_is_what_infer_runs(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    first = request.get_input_tensor(0)
    assert isinstance(first, ov.Tensor)
    assert first.shape == ov.Shape([2, 4]) and first.element_type == ov.Type.f32
    feeds = _feeds(1)
    request.get_input_tensor(0).data[:] = feeds["x"]
    request.get_tensor("y").data[:] = feeds["y"]
    _matches(request.infer(), STATIC, feeds)
    # the tensor handed out first is the request's own: writing into it counts too
    first.data[:] = feeds["y"]
    _matches(request.infer(), STATIC, {"x": feeds["y"], "y": feeds["y"]})


def test_input_tensors_show_the_inputs_of_the_last_run(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    before = request.get_input_tensor(1)
    for share in (False, True):
        feeds = _feeds(2 + share)
        request.infer([feeds["x"], feeds["y"]], share_inputs=share)
        for tensor, given in zip(request.input_tensors, (feeds["x"], feeds["y"]), strict=True):
            np.testing.assert_array_equal(tensor.data, given)
            assert np.shares_memory(tensor.data, given) == share
        if not share:  # copied into the tensor the request already had
            np.testing.assert_array_equal(before.data, feeds["y"])


def test_mismatched_or_read_only_arrays_are_copied_even_when_shared(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    feeds = _feeds(4)
    as_f64 = feeds["x"].astype(np.float64)
    read_only = feeds["y"].copy()
    read_only.setflags(write=False)
    results = request.infer({"x": as_f64, "y": read_only}, share_inputs=True)
    _matches(results, STATIC, feeds)
    assert not np.shares_memory(np.asarray(request.get_input_tensor(0)), as_f64)
    assert not np.shares_memory(np.asarray(request.get_input_tensor(1)), read_only)


def test_every_tensor_accessor_gives_an_ov_tensor_of_the_ports_type_and_shape(
        compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    feeds = _feeds(4)
    for run in (False, True):  # before any run (allocated) and after one
        if run:
            request.infer(feeds)
        tensors = [request.get_tensor("x"), request.get_tensor(compiled.inputs[1]),
                   request.get_input_tensor(1), *request.input_tensors,
                   request.get_tensor("relu_out"), request.get_output_tensor(1), *request.output_tensors]
        ports = [*compiled.inputs, compiled.inputs[1], *compiled.inputs, compiled.outputs[0],
                 *compiled.outputs[1:], *compiled.outputs]
        for tensor, port in zip(tensors, ports, strict=True):
            assert isinstance(tensor, ov.Tensor)
            assert tensor.element_type == port.element_type and tensor.shape == port.shape
    np.testing.assert_array_equal(request.get_tensor("x").data, feeds["x"])


def test_output_tensors_after_a_run_and_a_kept_one_follows_later_runs(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    assert list(request.get_output_tensor(1).shape) == [2, 3]  # allocated before any run
    feeds = _feeds(5)
    results = request.infer(feeds)
    kept = request.get_output_tensor(1)
    assert isinstance(kept, ov.Tensor)
    for by in (request.get_tensor("tanh_out"), request.get_tensor(compiled.outputs[1]),
               request.output_tensors[1], kept):
        np.testing.assert_array_equal(by.data, results["tanh_out"])
    later = _feeds(6)
    request.infer(later)
    np.testing.assert_allclose(kept.data, ort_run(STATIC, later)[1], rtol=1e-5, atol=1e-6)


def test_share_outputs(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    feeds = _feeds(7)
    copied = request.infer(feeds)
    assert copied[0].flags["OWNDATA"]
    assert not np.shares_memory(copied[0], np.asarray(request.get_output_tensor(0)))
    shared = request.infer(feeds, share_outputs=True)
    assert np.shares_memory(shared[0], np.asarray(request.get_output_tensor(0)))
    _matches(shared, STATIC, feeds)
    _matches(compiled(feeds, True, True), STATIC, feeds)  # positional share_inputs, share_outputs



@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
def test_infer_results_are_the_callers_own(core: ov.Core, engine: str) -> None:
    """OpenVINO's infer() returns copies: writing into them changes neither the request's
    output tensors nor its ``results``, nor the results of another run."""
    request = core.compile_model(STATIC, "CPU", {"ENGINE": engine}).create_infer_request()
    first = request.infer(_feeds(8))
    expected = [np.array(value) for value in first.to_tuple()]
    first[0][...] = 123.0
    np.testing.assert_array_equal(request.get_output_tensor(0).data, expected[0])
    np.testing.assert_array_equal(request.results[0], expected[0])
    assert not np.shares_memory(first[1], request.get_output_tensor(1).data)
    second = request.infer(_feeds(9))
    assert not np.shares_memory(first[0], second[0])
    assert (first[0] == 123.0).all()
    _matches(second, STATIC, _feeds(9))

# --- setting tensors ------------------------------------------------------------------------------


def test_set_tensor_by_name_index_and_port(compiled: ov.CompiledModel) -> None:
    feeds, other = _feeds(8), _feeds(9)
    model_port = ov.Core().read_model(STATIC).inputs[1]
    request = compiled.create_infer_request()
    x, y = ov.Tensor(feeds["x"]), ov.Tensor(feeds["y"])
    request.set_tensor("x", x)
    request.set_tensor(model_port, y)
    _matches(request.infer(), STATIC, feeds)
    np.testing.assert_array_equal(request.get_tensor(compiled.inputs[0]).data, feeds["x"])
    y.data[:] = other["y"]  # the request reads the tensor it was given
    _matches(request.infer(), STATIC, {"x": feeds["x"], "y": other["y"]})
    request.set_input_tensor(0, ov.Tensor(other["x"]))
    _matches(request.infer(), STATIC, other)
    request.set_input_tensors({0: ov.Tensor(feeds["x"]), "y": ov.Tensor(feeds["y"])})
    _matches(request.infer(), STATIC, feeds)
    request.set_tensors({"x": ov.Tensor(other["x"]), compiled.inputs[1]: ov.Tensor(other["y"])})
    _matches(request.infer(), STATIC, other)
    request.infer({"x": feeds["x"]})  # copied into the tensor set on "x", as OpenVINO does
    np.testing.assert_array_equal(request.get_tensor("x").data, feeds["x"])


def test_set_output_tensor_receives_the_results(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    tanh, relu = ov.Tensor(ov.Type.f32, [2, 3]), ov.Tensor(ov.Type.f32, [2, 4])
    request.set_output_tensor(1, tanh)
    request.set_output_tensors({0: relu})
    feeds = _feeds(10)
    expected = ort_run(STATIC, feeds)
    request.infer(feeds)
    np.testing.assert_allclose(relu.data, expected[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tanh.data, expected[1], rtol=1e-5, atol=1e-6)


def test_a_tensor_of_another_element_type_is_refused(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    wrong = ov.Tensor(np.ones((2, 4), np.int32))
    with pytest.raises(InputError, match=r"(?s)'x'.*i32.*f32"):
        request.set_tensor("x", wrong)
    with pytest.raises(InputError, match=r"(?s)'x'.*i32.*f32"):
        request.infer({"x": wrong, "y": np.ones((2, 4), np.float32)})


def test_a_batch_of_tensors_is_gathered_at_each_run(core: ov.Core) -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                       [("x", FLOAT, [4, 2, 2])], [("y", FLOAT, [4, 2, 2])])
    request = core.compile_model(model, "CPU").create_infer_request()
    parts = [ov.Tensor(np.zeros((1, 2, 2), np.float32)) for _ in range(4)]
    request.set_input_tensors(parts)
    with pytest.raises(InputError, match="batch of tensors"):
        request.get_tensor("x")
    for round_ in range(2):
        for index, part in enumerate(parts):
            part.data[:] = index - round_ * 3
        whole = np.concatenate([p.data for p in parts])
        np.testing.assert_array_equal(request.infer()[0], ort_run(model, {"x": whole})[0])
    with pytest.raises(InputError, match="batch 4"):
        request.set_input_tensors(parts[:3])


def test_unknown_tensor_names_list_inputs_and_outputs(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    with pytest.raises(InputError, match=r"(?s)'nope'.*x, y.*relu_out, tanh_out"):
        request.get_tensor("nope")
    with pytest.raises(InputError, match="2 inputs"):
        request.get_input_tensor()  # no index on a two-input model
    with pytest.raises(InputError, match="out of range"):
        request.get_output_tensor(2)


# --- inputs in every form -------------------------------------------------------------------------


def _int_model() -> onnx.ModelProto:
    return make_model([helper.make_node("Mul", ["a", "b"], ["c"], name="mul")],
                      [("a", INT32, [3]), ("b", INT32, [3])], [("c", INT32, [3])])


def test_numbers_of_another_dtype_are_converted_as_numpy_converts(core: ov.Core) -> None:
    model = _int_model()
    request = core.compile_model(model, "CPU").create_infer_request()
    a = np.array([3, -2, 2**33 + 5], np.int64)  # the last wraps to 5, as astype(int32) does
    b = [1.0, 2.9, -3.0]  # a list of floats: truncated by the cast
    results = request.infer({"a": a, "b": b})
    expected = ort_run(model, {"a": a.astype(np.int32), "b": np.asarray(b).astype(np.int32)})[0]
    assert results[0].dtype == np.int32
    np.testing.assert_array_equal(results[0], expected)
    feeds = _feeds(11)
    f64 = {k: v.astype(np.float64) for k, v in feeds.items()}
    _matches(core.compile_model(STATIC, "CPU").create_infer_request().infer(f64), STATIC, feeds)


@pytest.mark.parametrize("share", [False, True])
@pytest.mark.parametrize("value", [1.5, -2, np.float32(-1.0), np.int32(4), np.array(2.5),
                                   np.array(3, np.int64)])
def test_scalar_inputs(core: ov.Core, value: object, share: bool) -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu"),
                        helper.make_node("Add", ["y", "v"], ["z"], name="add")],
                       [("x", FLOAT, []), ("v", FLOAT, [2])], [("z", FLOAT, [2])])
    request = core.compile_model(model, "CPU").create_infer_request()
    vector = np.array([1.0, -1.0], np.float32)
    results = request.infer({0: value, "v": vector}, share_inputs=share)
    expected = ort_run(model, {"x": np.asarray(value, np.float32), "v": vector})[0]
    np.testing.assert_allclose(results[0], expected)
    if not isinstance(value, (np.ndarray, np.generic)) or np.asarray(value).dtype != np.float32:
        single = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                            [("x", FLOAT, [])], [("y", FLOAT, [])])
        alone = core.compile_model(single, "CPU").create_infer_request().infer(value, share_inputs=share)
        assert alone[0] == max(float(np.asarray(value)), 0.0)


def test_array_likes_lists_and_results_as_inputs(compiled: ov.CompiledModel) -> None:
    class ArrayLike:
        def __init__(self, array: np.ndarray) -> None:
            self.array = array

        def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
            return self.array

    feeds = _feeds(12)
    request = compiled.create_infer_request()
    _matches(request.infer({"x": ArrayLike(feeds["x"]), "y": feeds["y"].tolist()}), STATIC, feeds)
    _matches(request.infer((feeds["x"], feeds["y"])), STATIC, feeds)
    chained = compiled.create_infer_request().infer(request.infer(feeds).to_tuple()[:1] * 2)
    relu = np.maximum(feeds["x"] + feeds["y"], 0)
    _matches(chained, STATIC, {"x": relu, "y": relu})


def test_inputs_are_not_changed_by_infer(compiled: ov.CompiledModel) -> None:
    feeds = _feeds(13)
    given = {0: feeds["x"], 1: feeds["y"]}
    before = {k: v.copy() for k, v in given.items()}
    for share in (False, True):
        compiled.create_infer_request().infer(given, share_inputs=share)
        assert given.keys() == before.keys()
        for key, value in given.items():
            np.testing.assert_array_equal(value, before[key])


def test_dynamic_inputs_take_each_run_shape_and_must_be_given(core: ov.Core) -> None:
    request = core.compile_model(DYNAMIC, "CPU").create_infer_request()
    assert tuple(np.shape(request.get_input_tensor(0))) == (0, 4)  # OpenVINO's empty tensor
    with pytest.raises(InputError, match="missing input 'x', 'y'"):
        request.infer()
    for batch in (1, 5):
        feeds = _feeds(14 + batch, batch)
        _matches(request.infer(feeds), DYNAMIC, feeds)
        assert tuple(np.shape(request.get_input_tensor(0))) == (batch, 4)
    _matches(request.infer(), DYNAMIC, feeds)  # the inputs it holds now


def test_text_for_a_number_input_is_refused_and_nothing_changes(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    feeds = _feeds(16)
    request.infer(feeds)
    with pytest.raises(InputError, match=r"(?s)'x'.*cannot convert.*'y' has rank 1"):
        request.infer({"x": np.full((2, 4), "a"), "y": np.ones(4, np.float32)})
    _matches(request.infer(), STATIC, feeds)


# --- results, counters, the rest ------------------------------------------------------------------


def test_results_behave_as_openvinos_ovdict(compiled: ov.CompiledModel) -> None:
    feeds = _feeds(17)
    results = compiled.create_infer_request().infer(feeds)
    expected = ort_run(STATIC, feeds)
    assert list(results.keys()) == compiled.outputs and len(results) == 2
    assert results.names() == ({"relu_out"}, {"tanh_out"})
    for (port, value), want, index in zip(results.items(), expected, range(2), strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6)
        for key in (port, index, port.any_name):
            assert key in results
            np.testing.assert_array_equal(results[key], value)
    assert list(results.to_dict()) == compiled.outputs
    assert [v.shape for v in results.values()] == [(2, 4), (2, 3)]
    _, out2 = results.to_tuple()
    np.testing.assert_array_equal(out2, results["tanh_out"])
    with pytest.raises(KeyError):
        results["x"]


def test_profiling_info_is_openvinos(core: ov.Core) -> None:
    compiled = core.compile_model(STATIC, "CPU", {"PERF_COUNT": True})
    request = compiled.create_infer_request()
    request.infer(_feeds(18))
    assert request.latency > 0
    records = request.profiling_info
    assert records and all(isinstance(r, ov.ProfilingInfo) for r in records)
    assert request.get_profiling_info() == records
    assert all(isinstance(r.status, ov.ProfilingInfo.Status) for r in records)
    ran = [r for r in records if r.status == ov.ProfilingInfo.Status.EXECUTED]
    assert ran and sum((r.real_time for r in ran), datetime.timedelta(0)) > datetime.timedelta(0)
    for record in records:  # the engine's own counters: names and kernels are its own
        assert isinstance(record.real_time, datetime.timedelta)
        assert isinstance(record.cpu_time, datetime.timedelta)
        assert isinstance(record.exec_type, str) and isinstance(record.node_name, str)


def test_profiling_info_status_takes_openvinos_names() -> None:
    record = ov.ProfilingInfo("conv", "Conv", "jit", datetime.timedelta(0), datetime.timedelta(0), "NOT_RUN")
    assert record.status is ov.ProfilingInfo.Status.NOT_RUN
    assert {s.name for s in ov.ProfilingInfo.Status} == {"NOT_RUN", "OPTIMIZED_OUT", "EXECUTED"}
    with pytest.raises(ValueError, match="EXECUTED"):
        ov.ProfilingInfo(status="DONE")


def test_compiled_model_latency_and_userdata(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    assert request.get_compiled_model() is compiled
    feeds = _feeds(19)
    seen: list[object] = []
    request.set_callback(seen.append, None)
    request.start_async(feeds, userdata={"frame": 7})
    request.wait()
    assert request.userdata == {"frame": 7} == seen[0] and request.latency > 0
    _matches(request.results, STATIC, feeds)
    again = request.get_compiled_model().create_infer_request().infer(feeds)
    _matches(again, STATIC, feeds)
