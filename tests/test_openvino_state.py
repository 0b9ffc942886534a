"""Stateful models as OpenVINO runs them: ``read_value``/``assign``, a model's sinks and variables,
and each request's state (``query_state``, ``reset_state``, ``VariableState``).

The expected values are OpenVINO's documented semantics, computed here in numpy: a variable
reads its initial value (or zeros) until an Assign writes it, each request holds its own
variables, and a reset makes the next inference read the initial value again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex import errors
from inferplex import opset13 as ops
from inferplex.op.util import Variable, VariableInfo

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def counter(init_from_input: bool = True) -> ov.Model:
    """out = state + x; state <- out.  The initial value is x itself (or zeros)."""
    x = ops.parameter([2, 3], np.float32, name="x")
    read = (
        ops.read_value(x, "acc", np.float32, [2, 3])
        if init_from_input
        else ops.read_value("acc", np.float32, [2, 3])
    )
    total = ops.add(read, x, name="total")
    write = ops.assign(total, "acc")
    return ov.Model([ops.result(total, "out")], [write], [x], "counter")


def expected_counter(runs: int, init_from_input: bool = True) -> list[np.ndarray]:
    state = X.copy() if init_from_input else np.zeros_like(X)
    outs = []
    for _ in range(runs):
        out = state + X
        outs.append(out)
        state = out
    return outs


@pytest.fixture(scope="module")
def emulated() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "1")
        yield


DEVICES = ["CPU", "AUTO", "MULTI:CPU", "HETERO:CPU", "GPU.0", "HETERO:GPU.0,CPU"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("init_from_input", [True, False], ids=["initial-value", "zeros"])
def test_a_variable_carries_values_from_one_inference_to_the_next(
    device: str, init_from_input: bool, emulated: None
) -> None:
    compiled = ov.Core().compile_model(counter(init_from_input), device)
    request = compiled.create_infer_request()
    got = [request.infer({"x": X})["out"] for _ in range(4)]
    for value, want in zip(got, expected_counter(4, init_from_input), strict=True):
        np.testing.assert_allclose(value, want)
    np.testing.assert_allclose(request.query_state()[0].state.data, got[-1])


def test_the_gpu_device_runs_a_growing_state(emulated_or_cuda_core: ov.Core) -> None:
    """On the emulated GPU and (``gpu`` marker) on CUDA: the counter and a cache grown by a Concat."""
    request = emulated_or_cuda_core.compile_model(counter(), "GPU.0").create_infer_request()
    for want in expected_counter(3):
        np.testing.assert_allclose(request.infer({"x": X})["out"], want)
    x = ops.parameter([-1, 3], np.float32, name="x")
    grown = ops.concat([ops.read_value("cache", np.float32, [-1, 3]), x], 0)
    model = ov.Model(
        [ops.result(ops.reduce_sum(grown, [0], False), "sum")], [ops.assign(grown, "cache")], [x]
    )
    request = emulated_or_cuda_core.compile_model(model, "GPU.0").create_infer_request()
    for step in range(1, 4):
        np.testing.assert_allclose(request.infer({"x": np.ones([1, 3], np.float32)})["sum"], [step] * 3)


def test_the_onnx_runtime_engine_runs_the_same_state(emulated: None) -> None:
    compiled = ov.Core().compile_model(counter(), "CPU", {"ENGINE": "ONNXRUNTIME"})
    request = compiled.create_infer_request()
    got = [request.infer({"x": X})["out"] for _ in range(3)]
    for value, want in zip(got, expected_counter(3), strict=True):
        np.testing.assert_allclose(value, want)


def test_query_state_before_the_first_inference_reads_zeros_of_the_variable() -> None:
    request = ov.Core().compile_model(counter(), "CPU").create_infer_request()
    states = request.query_state()
    assert [s.name for s in states] == ["acc"]
    state = states[0].state
    assert state.element_type == ov.Type.f32
    assert list(state.shape) == [2, 3]
    assert not state.data.any()


def test_reset_state_makes_the_next_inference_read_the_initial_value_again() -> None:
    request = ov.Core().compile_model(counter(), "CPU").create_infer_request()
    for _ in range(3):
        request.infer({"x": X})
    request.reset_state()
    np.testing.assert_allclose(request.infer({"x": X})["out"], 2 * X)
    np.testing.assert_allclose(request.infer({"x": X})["out"], 3 * X)


def test_a_state_set_by_the_caller_is_what_the_next_inference_reads() -> None:
    request = ov.Core().compile_model(counter(), "CPU").create_infer_request()
    state = request.query_state()[0]
    state.state = ov.Tensor(np.full([2, 3], 5, np.float32))
    np.testing.assert_allclose(request.infer({"x": X})["out"], X + 5)
    state.reset()
    np.testing.assert_allclose(request.infer({"x": X})["out"], 2 * X)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (ov.Tensor(np.zeros([2, 3], np.int32)), "holds f32 values"),
        (ov.Tensor(np.zeros([3, 3], np.float32)), "has shape [2,3]"),
        ([1.0, 2.0], "ov.Tensor or a numpy array"),
    ],
)
def test_a_state_of_another_type_or_shape_is_refused_and_changes_nothing(value: Any, words: str) -> None:
    request = ov.Core().compile_model(counter(), "CPU").create_infer_request()
    request.infer({"x": X})
    state = request.query_state()[0]
    with pytest.raises(errors.InferplexError, match=words.replace("[", r"\[").replace("]", r"\]")):
        state.state = value
    np.testing.assert_allclose(request.infer({"x": X})["out"], 3 * X)


def test_each_request_holds_its_own_variables() -> None:
    compiled = ov.Core().compile_model(counter(), "CPU")
    first, second = compiled.create_infer_request(), compiled.create_infer_request()
    for _ in range(3):
        first.infer({"x": X})
    np.testing.assert_allclose(second.infer({"x": X})["out"], 2 * X)
    np.testing.assert_allclose(first.query_state()[0].state.data, 4 * X)


def test_the_compiled_models_own_request_keeps_state_across_calls() -> None:
    compiled = ov.Core().compile_model(counter(), "CPU")
    compiled({"x": X})
    out = compiled({"x": X})
    np.testing.assert_allclose(out["out"], 3 * X)
    np.testing.assert_allclose(compiled.query_state()[0].state.data, 3 * X)
    compiled.reset_state()
    np.testing.assert_allclose(compiled({"x": X})["out"], 2 * X)


def test_async_runs_update_the_state_before_their_callback() -> None:
    compiled = ov.Core().compile_model(counter(), "CPU")
    request = compiled.create_infer_request()
    seen: list[np.ndarray] = []
    request.set_callback(lambda _: seen.append(request.query_state()[0].state.data.copy()))
    for _ in range(3):
        request.start_async({"x": X})
        request.wait()
    for value, want in zip(seen, expected_counter(3), strict=True):
        np.testing.assert_allclose(value, want)
    queue = ov.AsyncInferQueue(compiled, 2)
    for _ in range(4):
        queue.start_async({"x": X})
    queue.wait_all()
    assert sorted(float(queue[i].query_state()[0].state.data[0, 1]) for i in range(2)) != [0.0, 0.0]


def test_a_variable_whose_shape_grows_is_fed_back_whole() -> None:
    """A cache that grows by one row an inference (a decoder's key-value cache, in small)."""
    x = ops.parameter([-1, 3], np.float32, name="x")
    cache = ops.read_value("cache", np.float32, [-1, 3])
    grown = ops.concat([cache, x], 0)
    model = ov.Model(
        [ops.result(ops.reduce_sum(grown, [0], False), "sum")], [ops.assign(grown, "cache")], [x]
    )
    request = ov.Core().compile_model(model, "CPU").create_infer_request()
    assert list(request.query_state()[0].state.shape) == [0, 3]
    rows = [np.full([1, 3], i, np.float32) for i in range(1, 4)]
    for step, row in enumerate(rows, start=1):
        out = request.infer({"x": row})["sum"]
        np.testing.assert_allclose(out, np.concatenate(rows[:step]).sum(0))
    assert list(request.query_state()[0].state.shape) == [3, 3]


def test_a_read_value_without_assign_always_reads_its_initial_value() -> None:
    x = ops.parameter([1, 4], np.float32, name="x")
    model = ov.Model(ops.relu(ops.read_value(x, "never_assigned", ov.Type.f32, [1, 4])), [x])
    request = ov.Core().compile_model(model, "CPU").create_infer_request()
    data = np.array([[-1, 2, -3, 4]], np.float32)
    for _ in range(2):
        np.testing.assert_allclose(request.infer([data])[0], np.maximum(data, 0))


def test_a_model_without_state_has_no_variables() -> None:
    x = ops.parameter([2], np.float32, name="x")
    model = ov.Model(ops.relu(x), [x])
    compiled = ov.Core().compile_model(model, "CPU")
    assert compiled.create_infer_request().query_state() == []
    assert model.get_variables() == [] and model.get_sinks() == []


# --- the Model's sinks and variables ---------------------------------------------------------


def test_model_lists_its_sinks_and_variables_and_read_value_ops() -> None:
    model = counter()
    assert [sink.get_type_name() for sink in model.get_sinks()] == ["Assign"]
    assert list(model.sinks[0].get_output_shape(0)) == [2, 3]
    assert [v.get_info().variable_id for v in model.get_variables()] == ["acc"]
    assert {op.get_type_name() for op in model.get_ops()} >= {"ReadValue", "Assign", "Add"}
    assert {
        op.get_variable_id() for op in model.get_ops() if op.get_type_name() in ("ReadValue", "Assign")
    } == {"acc"}
    assert ops.read_value("v", np.float32, [1]).get_variable_id() == "v"
    info = model.get_variable_by_id("acc").info
    assert info.data_type == ov.Type.f32 and info.data_shape == ov.PartialShape([2, 3])
    with pytest.raises(errors.InputError, match="no variable 'nope'"):
        model.get_variable_by_id("nope")


@pytest.mark.parametrize("form", ["positional", "keywords", "ports", "with variables"])
def test_model_takes_sinks_in_each_constructor_form(form: str) -> None:
    info = VariableInfo()
    info.variable_id, info.data_type, info.data_shape = "v", ov.Type.f32, ov.PartialShape([2])
    variable = Variable(info)
    x = ops.parameter([2], np.float32, name="x")
    read = ops.read_value(variable)
    total = ops.add(read, x)
    write = ops.assign(total, variable)
    out = ops.result(total, "out")
    if form == "positional":
        model = ov.Model([out], [write], [x], "m")
    elif form == "keywords":
        model = ov.Model(results=[out], sinks=[write], parameters=[x], name="m")
    elif form == "ports":
        model = ov.Model(results=[out.output(0)], sinks=[write.output(0)], parameters=[x], name="m")
    else:
        model = ov.Model([out], [write.output(0)], [x], [variable], "m")
    assert model.get_friendly_name() == "m"
    request = ov.Core().compile_model(model, "CPU").create_infer_request()
    ones = np.ones(2, np.float32)
    assert [float(request.infer([ones])[0][0]) for _ in range(3)] == [1.0, 2.0, 3.0]


def test_sinks_are_added_found_and_removed() -> None:
    x = ops.parameter([2], np.float32, name="x")
    relu = ops.relu(x)
    model = ov.Model(relu, [x])
    model.add_sinks([ops.assign(relu, "a"), ops.assign(relu, "b")])
    sinks = model.sinks
    assert model.get_sink_index(sinks[1]) == 1
    assert model.get_sink_index(relu) == -1
    with pytest.raises(TypeError, match="Sink node is expected"):
        model.get_sink_index(0)
    model.remove_sink(sinks[0])
    assert [s.get_friendly_name() for s in model.sinks] == [sinks[1].get_friendly_name()]


def test_variables_are_declared_and_removed() -> None:
    model = counter()
    info = VariableInfo()
    info.variable_id, info.data_type, info.data_shape = "extra", ov.Type.i32, ov.PartialShape([4])
    model.add_variables([Variable(info)])
    assert [v.info.variable_id for v in model.get_variables()] == ["acc", "extra"]
    assert model.get_variable_by_id("extra").info.data_type == ov.Type.i32
    model.remove_variable(Variable(info))
    assert [v.info.variable_id for v in model.variables] == ["acc"]


def test_a_saved_stateful_model_reads_back_and_runs_the_same(tmp_path: Any) -> None:
    path = tmp_path / "counter.onnx"
    ov.save_model(counter(), path)
    model = ov.Core().read_model(path)
    assert [v.info.variable_id for v in model.get_variables()] == ["acc"]
    request = ov.Core().compile_model(model, "CPU").create_infer_request()
    for want in expected_counter(3):
        np.testing.assert_allclose(request.infer({"x": X})["out"], want)


def test_an_exported_stateful_model_imports_with_its_state() -> None:
    compiled = ov.Core().compile_model(counter(), "CPU")
    imported = ov.Core().import_model(compiled.export_model(), "CPU")
    request = imported.create_infer_request()
    assert [s.name for s in request.query_state()] == ["acc"]
    for want in expected_counter(3):
        np.testing.assert_allclose(request.infer({"x": X})["out"], want)


def test_reshape_gives_variables_their_new_shapes() -> None:
    x = ops.parameter([1, 4], np.float32, name="x")
    read = ops.read_value(x, "v", ov.Type.f32, [1, 4])
    total = ops.add(read, x)
    model = ov.Model([ops.result(total, "out")], [ops.assign(total, "v")], [x])
    model.reshape({"x": [3, 4]}, {"v": [3, 4]})
    assert model.input().partial_shape == ov.PartialShape([3, 4])
    assert model.get_variable_by_id("v").info.data_shape == ov.PartialShape([3, 4])
    request = ov.Core().compile_model(model, "CPU").create_infer_request()
    data = np.ones([3, 4], np.float32)
    np.testing.assert_allclose(request.infer([data])[0], 2 * data)
    np.testing.assert_allclose(request.infer([data])[0], 3 * data)


@pytest.mark.parametrize(
    ("variables", "error", "words"),
    [
        ({0: [1, 4]}, TypeError, "Incorrect key type"),
        ({"v": range(3)}, TypeError, "Incorrect value type"),
        ({"w": [1, 4]}, errors.InputError, "no variable 'w'"),
    ],
)
def test_reshape_refuses_variable_shapes_it_cannot_take(variables: Any, error: type, words: str) -> None:
    x = ops.parameter([1, 4], np.float32, name="x")
    model = ov.Model(ops.relu(ops.read_value(x, "v", ov.Type.f32, [1, 4])), [x])
    with pytest.raises(error, match=words):
        model.reshape([1, 4], variables)
    assert model.get_variable_by_id("v").info.data_shape == ov.PartialShape([1, 4])


# --- errors ------------------------------------------------------------------------------------


def test_read_value_refuses_an_initial_value_its_variable_cannot_take() -> None:
    x = ops.parameter([2], np.float32, name="x")
    with pytest.raises(errors.InputError, match=r"shape \[3\]"):
        ops.read_value(x, "v", np.float32, [3])
    with pytest.raises(errors.InputError, match="is i32 but its initial value is f32"):
        ops.read_value(x, "v", np.int32, [2])
    with pytest.raises(TypeError, match="id \\(str\\) or a Variable"):
        ops.read_value(x, 5)


def test_a_variable_assigned_twice_is_refused_at_compile() -> None:
    x = ops.parameter([2], np.float32, name="x")
    read = ops.read_value(x, "v", np.float32, [2])
    model = ov.Model([ops.result(read)], [ops.assign(ops.relu(read), "v"), ops.assign(read, "v")], [x])
    with pytest.raises(errors.ModelError, match="assigned by two Assign nodes"):
        ov.Core().compile_model(model, "CPU")


def test_an_assign_with_no_value_is_refused_at_compile() -> None:
    x = ops.parameter([2], np.float32, name="x")
    model = ov.Model(ops.relu(x), [x])
    model.add_sinks([ops.assign()])
    assert [s.get_type_name() for s in model.sinks] == ["Assign"]
    with pytest.raises(errors.ModelError, match="no value to assign"):
        ov.Core().compile_model(model, "CPU")


def test_a_variable_with_no_type_is_refused_at_compile() -> None:
    x = ops.parameter([2], np.float32, name="x")
    model = ov.Model([ops.result(ops.read_value("untyped")), ops.result(ops.relu(x))], [x])
    with pytest.raises(errors.ModelError, match="'untyped' has no element type"):
        ov.Core().compile_model(model, "CPU")


def test_a_failed_inference_leaves_the_variables_as_they_were() -> None:
    """The run fails at a Reshape the given shape does not fit; the Assign's value is not kept."""
    x = ops.parameter([2, 3], np.float32, name="x")
    shape = ops.parameter([2], np.int64, name="shape")
    total = ops.add(ops.read_value(x, "acc", np.float32, [2, 3]), x)
    out = ops.result(ops.reshape(total, shape, False), "out")
    model = ov.Model([out], [ops.assign(total, "acc")], [x, shape])
    request = ov.Core().compile_model(model, "CPU").create_infer_request()
    good, bad = np.array([3, 2], np.int64), np.array([4, 4], np.int64)
    np.testing.assert_allclose(request.infer({"x": X, "shape": good})["out"], (2 * X).reshape(3, 2))
    with pytest.raises(errors.InferplexError):
        request.infer({"x": X, "shape": bad})
    np.testing.assert_allclose(request.query_state()[0].state.data, 2 * X)
    np.testing.assert_allclose(request.infer({"x": X, "shape": good})["out"], (3 * X).reshape(3, 2))


# --- LowLatency2 -------------------------------------------------------------------------------


def _recurrent(package: Any, kind: str) -> tuple[Any, str]:
    """``h = tanh(h + x_t)`` over two time steps in a TensorIterator or a Loop, ``h`` a merged input
    starting from the model's ``h0``, ``x_t`` sliced (TensorIterator) or ``x`` invariant (Loop)."""
    opset = package.opset13
    x = opset.parameter([1, 2, 3], np.float32, name="x")
    h0 = opset.parameter([1, 3], np.float32, name="h0")
    if kind == "TensorIterator":
        step = opset.parameter([1, 1, 3], np.float32, name="step")
        h = opset.parameter([1, 3], np.float32, name="h")
        new_h = opset.tanh(opset.add(h, opset.squeeze(step, opset.constant(np.array([1], np.int64)))))
        result = opset.result(new_h)
        looped = opset.tensor_iterator()
        looped.set_function(package.Model([result], [step, h], "body"))
        looped.set_sliced_input(step, x.output(0), 0, 1, 1, -1, 1)
    else:
        whole = opset.parameter([1, 2, 3], np.float32, name="whole")
        h = opset.parameter([1, 3], np.float32, name="h")
        new_h = opset.tanh(opset.add(h, opset.reduce_sum(whole, opset.constant(np.array([1], np.int64)))))
        result = opset.result(new_h)
        keep_going = opset.result(opset.constant(np.array(True)))
        looped = opset.loop(opset.constant(np.array(2, np.int64)), opset.constant(np.array(True)))
        looped.set_function(package.Model([result, keep_going], [whole, h], "body"))
        looped.set_special_body_ports([-1, 1])
        looped.set_invariant_input(whole, x.output(0))
    looped.set_merged_input(h, h0.output(0), result.output(0))
    model = package.Model([opset.relu(looped.get_iter_value(result.output(0), -1))], [x, h0], "recurrent")
    return model, looped.get_friendly_name()


@pytest.mark.parametrize("use_const_initializer", [True, False])
@pytest.mark.parametrize("kind", ["TensorIterator", "Loop"])
def test_low_latency2_carries_a_loops_state_across_inferences_as_openvino(kind: str,
                                                                        use_const_initializer: bool) -> None:
    real = pytest.importorskip("openvino")
    pytest.importorskip("openvino.passes")  # the submodules, imported: package.passes below
    import inferplex.passes  # noqa: F401

    feeds = {"x": np.full((1, 2, 3), 0.25, np.float32), "h0": np.full((1, 3), 0.5, np.float32)}
    runs = {}
    for package in (ov, real):
        model, loop_name = _recurrent(package, kind)
        manager = package.passes.Manager()
        manager.register_pass(package.passes.LowLatency2(use_const_initializer))
        manager.run_passes(model)
        request = package.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}) \
            .create_infer_request()
        names = [state.name for state in request.query_state()]
        assert names == [f"{loop_name}/h/variable_1"]  # OpenVINO's name: loop, body Parameter, loop input
        outputs = [request.infer(feeds)[0].copy() for _ in range(3)]
        request.reset_state()
        outputs.append(request.infer(feeds)[0].copy())
        runs[package.__name__] = outputs
    for ours, theirs in zip(runs["inferplex"], runs["openvino"], strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not np.allclose(runs["inferplex"][0], runs["inferplex"][1])  # the state moved on
    np.testing.assert_allclose(runs["inferplex"][3], runs["inferplex"][0])  # reset starts again


def test_low_latency2_leaves_a_model_without_merged_inputs_as_it_is() -> None:
    x = ops.parameter([1, 2, 3], np.float32, name="x")
    step = ops.parameter([1, 1, 3], np.float32, name="step")
    result = ops.result(ops.relu(step))
    looped = ops.tensor_iterator()
    looped.set_function(ov.Model([result], [step], "body"))
    looped.set_sliced_input(step, x.output(0), 0, 1, 1, -1, 1)
    model = ov.Model([looped.get_concatenated_slices(result.output(0), 0, 1, 1, -1, 1)], [x], "sliced")
    from inferplex.passes import LowLatency2

    assert LowLatency2().run_on_model(model) is False
    assert ov.Core().compile_model(model, "CPU").create_infer_request().query_state() == []
