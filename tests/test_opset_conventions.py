"""Op builders take what OpenVINO programs pass them, and give what OpenVINO gives: numpy arrays as
attribute lists, ``rounding_type="ceil_torch"`` pools, repeats shorter or longer than the data's rank,
``squeeze``'s ``allow_axis_skip`` (opset 15), 32- and 8-bit integer shapes and indices, ``swish``'s
type, ``one_hot``'s ``ignore_negative`` and ``OVAny``'s item access.

Each op is built with ``inferplex.opsetN`` and ``openvino.opsetN`` from the same arguments; the
output shapes and types are compared, and the values where both run (OpenVINO's CPU at f32).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import inferplex
from inferplex.errors import InputError

openvino = pytest.importorskip("openvino")


def _both(build: Callable[[Any], Any], feeds: list[np.ndarray]) -> tuple[Any, Any]:
    """``build(opset15)`` of each library, checked for the same output shapes and types and, where the
    built node takes parameters, the same values on ``feeds``."""
    ours, theirs = build(inferplex.opset15), build(openvino.opset15)
    for index in range(theirs.get_output_size()):
        assert str(ours.get_output_partial_shape(index)) == str(theirs.get_output_partial_shape(index))
        assert ours.get_output_element_type(index).get_type_name() == \
            theirs.get_output_element_type(index).get_type_name()
    if feeds:
        got = _run(inferplex, ours, feeds)
        want = _run(openvino, theirs, feeds)
        for mine, reference in zip(got, want, strict=True):
            np.testing.assert_allclose(mine, reference, rtol=1e-6, atol=1e-6)
    return ours, theirs


def _run(lib: Any, node: Any, feeds: list[np.ndarray]) -> list[np.ndarray]:
    parameters = [op for op in _parameters(node)]
    model = lib.Model(node.outputs(), parameters)
    compiled = lib.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled(feeds)
    return [np.asarray(results[index]) for index in range(node.get_output_size())]


def _parameters(node: Any) -> list[Any]:
    """The Parameter nodes ``node`` reads (directly or through other ops), in the order built."""
    found: dict[str, Any] = {}
    stack = [node]
    while stack:
        current = stack.pop()
        for port in current.inputs():
            source = port.get_source_output().get_node()
            if source.get_type_name() == "Parameter":
                found.setdefault(source.get_friendly_name(), source)
            else:
                stack.append(source)
    return [found[name] for name in sorted(found)]


IMAGE = np.arange(2 * 3 * 9 * 9, dtype=np.float32).reshape(2, 3, 9, 9) % 13 - 6


def test_numpy_arrays_are_taken_as_attribute_lists() -> None:
    def build(ops: Any) -> Any:
        x = ops.parameter([2, 3, 9, 9], np.float32, name="x")
        filters = ops.constant(np.ones((4, 3, 3, 3), np.float32))
        return ops.convolution(x, filters, np.array([2, 2]), np.array([1, 1]), np.array([1, 1]),
                               np.array([1, 1]))
    _both(build, [IMAGE])

    def sliced(ops: Any) -> Any:
        x = ops.parameter([2, 3, 9, 9], np.float32, name="x")
        zeros = np.zeros(4, np.int32)
        return ops.strided_slice(x, np.array([0, 1, 2, 0], np.int32), np.array([2, 3, 8, 9], np.int32),
                                 np.array([1, 1, 2, 3], np.int32), zeros, zeros, zeros, zeros, zeros)
    _both(sliced, [IMAGE])


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize(("pads_end", "rounding"), [([1, 1], "ceil_torch"), ([2, 2], "ceil_torch"),
                                                    ([0, 0], "ceil_torch"), ([0, 0], "ceil")])
def test_ceil_torch_pools_drop_a_last_window_that_starts_in_the_padding(pool: str, pads_end: list[int],
                                                                         rounding: str) -> None:
    def build(ops: Any) -> Any:
        x = ops.parameter([2, 3, 9, 9], np.float32, name="x")
        if pool == "max":
            return ops.max_pool(x, [2, 2], [1, 1], [1, 1], pads_end, [2, 2], rounding)
        return ops.avg_pool(x, [2, 2], [1, 1], pads_end, [2, 2], False, rounding)
    ours, _ = _both(build, [IMAGE])
    assert ours.get_type_name() == ("MaxPool" if pool == "max" else "AvgPool")


@pytest.mark.parametrize(("shape", "repeats"), [((2, 1, 3), [2, 1]), ((2, 3), [2, 1, 2]), ((2, 3), [3, 2])])
def test_tile_repeats_of_another_length_than_the_rank(shape: tuple[int, ...], repeats: list[int]) -> None:
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)

    def build(ops: Any) -> Any:
        return ops.tile(ops.parameter(list(shape), np.float32, name="x"), np.array(repeats, np.int32))
    ours, _ = _both(build, [data])
    assert ours.get_type_name() == "Tile"


@pytest.mark.parametrize(("shape", "axes", "skip"), [([1, 2, 1, 3, 1, 1], [1, 2, 4], True),
                                                     ([1, 2, 1, 3, 1, 1], [2, 4], False),
                                                     ([2, -1, 3], [1], True)])
def test_squeeze_allow_axis_skip_keeps_dims_that_are_not_one(shape: list[int], axes: list[int],
                                                             skip: bool) -> None:
    def build(ops: Any) -> Any:
        return ops.squeeze(ops.parameter(shape, np.float32, name="x"), axes, skip)
    ours, _ = _both(build, [])
    assert ours.get_type_name() == "Squeeze"
    if -1 in shape:  # the rank is known when the model runs: OpenVINO's CPU runs no such model
        model = inferplex.Model([ours], _parameters(ours))
        compiled = inferplex.Core().compile_model(model, "CPU")
        assert np.asarray(compiled(np.ones((2, 1, 3), np.float32))[0]).shape == (2, 3)
        assert np.asarray(compiled(np.ones((2, 4, 3), np.float32))[0]).shape == (2, 4, 3)
    else:
        got = _run(inferplex, ours, [np.ones([abs(d) for d in shape], np.float32)])[0]
        assert list(got.shape) == list(ours.get_output_partial_shape(0).to_shape())


def test_integer_shapes_and_indices_of_narrower_types() -> None:
    def reshaped(ops: Any) -> Any:
        x = ops.parameter([2, 3, 4], np.float32, name="x")
        return ops.reshape(x, ops.constant(np.array([4, -1], np.int32)), False)
    _both(reshaped, [np.arange(24, dtype=np.float32).reshape(2, 3, 4)])

    def scattered(ops: Any) -> Any:
        x = ops.parameter([3, 3], np.float32, name="x")
        indices = ops.constant(np.array([[2, 0, 1]], np.int8))
        updates = ops.constant(np.array([[10.0, 20.0, 30.0]], np.float32))
        return ops.scatter_elements_update(x, indices, updates, 0)
    _both(scattered, [np.zeros((3, 3), np.float32)])


def test_swish_is_reported_as_swish() -> None:
    def build(ops: Any) -> Any:
        return ops.swish(ops.parameter([5], np.float32, name="x"), ops.constant(np.float32(1.5)))
    ours, _ = _both(build, [np.linspace(-3, 3, 5).astype(np.float32)])
    assert ours.get_type_name() == "Swish"


@pytest.mark.parametrize("mode", ["ignore_negative", "IGNORE-NEGATIVE", "normalize"])
def test_one_hot_takes_the_negative_index_modes_in_either_spelling(mode: str) -> None:
    def build(ops: Any) -> Any:
        indices = ops.parameter([4], np.int64, name="x")
        if ops is inferplex.opset15:
            return inferplex.opset16.one_hot(indices, np.int64(3), np.float32(1), np.float32(0), -1, mode)
        spelled = mode.lower().replace("-", "_")  # OpenVINO's own builder takes this spelling
        return openvino.opset16.one_hot(indices, np.int64(3), np.float32(1), np.float32(0), -1, spelled)
    _both(build, [np.array([0, -1, 2, 5], np.int64)])
    with pytest.raises(InputError, match="accepted: ignore-negative, normalize"):
        inferplex.opset16.one_hot(inferplex.opset16.parameter([4], np.int64), np.int64(3), np.float32(1),
                                  np.float32(0), -1, "wrap")


def test_ovany_reads_items_and_takes_a_new_value() -> None:
    for values in ([1, 2], ["a", "b"], {"key": 3}):
        ours, theirs = inferplex.OVAny(values), openvino.OVAny(values)
        key = next(iter(values)) if isinstance(values, dict) else 0
        assert ours[key] == theirs[key] and len(ours) == len(theirs.value)
    value = inferplex.OVAny("text")
    value.set(2.5)
    assert value == 2.5 and value.value == 2.5


F32 = np.float32


def _image(o: Any) -> Any:
    return o.parameter([1, 3, 8, 8], F32)


def _rows(o: Any) -> Any:
    return o.parameter([2, 6], F32)


ATTRIBUTE_CASES: dict[str, Callable[[Any], Any]] = {
    "convolution": lambda o: o.convolution(_image(o), np.ones((4, 3, 3, 3), F32), [2, 2], [1, 1], [1, 1],
                                           [1, 1]),
    "group_convolution": lambda o: o.group_convolution(_image(o), np.ones((3, 1, 1, 3, 3), F32), [1, 1],
                                                       [1, 0], [1, 0], [1, 1]),
    "max_pool": lambda o: o.max_pool(_image(o), [2, 2], [1, 1], [0, 0], [0, 0], [2, 2]),
    "avg_pool": lambda o: o.avg_pool(_image(o), [2, 2], [0, 0], [0, 0], [2, 2], True),
    "topk": lambda o: o.topk(o.parameter([2, 10], F32), 3, 1, "max", "value"),
    "convert": lambda o: o.convert(_rows(o), np.int32),
    "softmax": lambda o: o.softmax(_rows(o), 1),
    "split": lambda o: o.split(_rows(o), 1, 2),
    "matmul": lambda o: o.matmul(_rows(o), _rows(o), False, True),
    "clamp": lambda o: o.clamp(_rows(o), -1.0, 1.0),
    "broadcast": lambda o: o.broadcast(_rows(o), np.array([3, 2, 6], np.int64)),
    "depth_to_space": lambda o: o.depth_to_space(o.parameter([1, 4, 2, 2], F32), "blocks_first", 2),
    "convert_promote_types": lambda o: o.convert_promote_types(o.parameter([2], F32),
                                                               o.parameter([2], np.int8), True),
}


@pytest.mark.parametrize("function", sorted(ATTRIBUTE_CASES))
def test_get_attributes_of_built_ops_are_openvinos(function: str) -> None:
    ours, theirs = (ATTRIBUTE_CASES[function](lib.opset15) for lib in (inferplex, openvino))
    assert ours.get_attributes() == theirs.get_attributes()


def test_a_models_view_of_a_built_op_keeps_its_attributes(tmp_path: Any) -> None:
    x = inferplex.opset15.parameter([2, 10], np.float32, name="x")
    model = inferplex.Model([inferplex.opset15.topk(x, 3, 1, "min", "value").output(0)], [x])
    (view,) = [op for op in model.get_ordered_ops() if op.get_type_name() == "TopK"]
    want = {"axis": 1, "mode": "min", "sort": "value", "index_element_type": "i32", "stable": False}
    assert view.get_attributes() == want
    inferplex.save_model(model, str(tmp_path / "topk.onnx"))
    again = inferplex.Core().read_model(str(tmp_path / "topk.onnx"))
    assert [op.get_attributes() for op in again.get_ordered_ops() if op.get_type_name() == "TopK"] == [want]


@pytest.mark.parametrize("side", [5, 6, 9])
def test_ceil_torch_pools_of_dims_known_only_when_run_match_openvino(side: int) -> None:
    """The pooled sizes come from the input's shape at run time."""
    image = np.arange(side * side, dtype=np.float32).reshape(1, 1, side, side)
    results = []
    for lib in (inferplex, openvino):
        ops = lib.opset14
        x = ops.parameter([1, 1, -1, -1], np.float32, name="x")
        pooled = ops.max_pool(x, [2, 2], [1, 1], [1, 1], [1, 1], [2, 2], "ceil_torch")
        averaged = ops.avg_pool(x, [2, 2], [1, 1], [2, 2], [2, 2], False, "ceil_torch")
        model = lib.Model([pooled.output(0), pooled.output(1), averaged.output(0)], [x])
        compiled = lib.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        outputs = compiled(image)
        results.append([np.asarray(outputs[index]) for index in range(3)])
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_squeeze_axes_outside_the_rank_are_refused() -> None:
    refusal = r"squeeze axes \[3\] are outside the data's rank 3; accepted: -3 to 2"
    with pytest.raises(InputError, match=refusal):
        inferplex.opset15.squeeze(inferplex.opset15.parameter([2, -1, 3], np.float32), [3], True)
