"""OpenVINO's Unique, Eye, GridSample, bitwise ops, Multinomial and FakeConvert, Gather with batch
dims, ReverseSequence on any two axes and Interpolate's Pillow modes built with ``inferplex.opset``,
against OpenVINO's own CPU on the same graph built with ``openvino.opset13`` or against numpy
computing each op as OpenVINO's specification defines it; a few on the emulated GPU; and each read
from an OpenVINO IR."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex import opset, opset8
from inferplex.errors import InputError

openvino = pytest.importorskip("openvino")
ovops = pytest.importorskip("openvino.opset13")

RNG = np.random.default_rng(23)
F32 = np.float32


def _run(module: Any, build: Callable[..., Any], arrays: Sequence[np.ndarray], device: str = "CPU",
         core: Any = None, config: dict[str, Any] | None = None) -> list[np.ndarray]:
    """The outputs of ``build(module, *parameters)`` on ``arrays``: OpenVINO's own CPU (f32) where
    ``module`` is openvino's opset, else inferplex on ``device``."""
    params = [module.parameter(list(a.shape), a.dtype, name=f"in{i}") for i, a in enumerate(arrays)]
    node = build(module, *params)
    outputs = [node.output(i) for i in range(node.get_output_size())]
    if module is ovops:
        compiled = openvino.Core().compile_model(openvino.Model(outputs, params), "CPU",
                                                 {"INFERENCE_PRECISION_HINT": "f32"})
        results = compiled(list(arrays))
        return [results[i] for i in range(len(outputs))]
    compiled = (core or ov.Core()).compile_model(ov.Model(outputs, params, "op"), device, config or {})
    return list(compiled(list(arrays)).to_tuple())


def _ours(build: Callable[..., Any], *arrays: np.ndarray, **options: Any) -> list[np.ndarray]:
    return _run(opset, build, arrays, **options)


def _matches_openvino(build: Callable[..., Any], *arrays: np.ndarray, tol: float = 1e-5) -> list[np.ndarray]:
    """inferplex's outputs, checked against OpenVINO's CPU (shapes, element types, values)."""
    got, expected = _ours(build, *arrays), _run(ovops, build, arrays)
    assert len(got) == len(expected)
    for index, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        assert mine.shape == theirs.shape, index
        assert mine.dtype == theirs.dtype, index
        np.testing.assert_allclose(mine, theirs, rtol=tol, atol=tol, err_msg=str(index))
    return got


# --- Unique ------------------------------------------------------------------------------------


@pytest.mark.parametrize("sort", [True, False], ids=["sorted", "first-seen"])
@pytest.mark.parametrize(("axis", "shape", "dtype"), [
    (None, (3, 5), np.float32), (0, (6, 2), np.int32), (-1, (2, 7), np.float32), (1, (2, 6, 2), np.int64),
], ids=["flat", "rows", "last axis", "middle axis"])
def test_unique_matches_numpy(sort: bool, axis: int | None, shape: tuple[int, ...], dtype: Any) -> None:
    """Against numpy (OpenVINO's own CPU finds unique slices along a last axis wrongly at times), and
    against OpenVINO's CPU flat and along axis 0."""
    data = RNG.integers(0, 3, shape).astype(dtype)
    where = None if axis is None else np.int64(axis)
    build = lambda m, x: m.unique(x, where, sort)  # noqa: E731
    outputs = _matches_openvino(build, data) if axis in (None, 0) else _ours(build, data)
    values, first, inverse, counts = outputs
    assert [o.dtype for o in (first, inverse, counts)] == [np.int64] * 3
    flat = data.reshape(-1) if axis is None else data
    expected, expected_first, _, expected_counts = np.unique(flat, True, True, True, axis=axis)
    if sort:
        np.testing.assert_array_equal(values, expected)
        np.testing.assert_array_equal(first, expected_first)
        np.testing.assert_array_equal(counts, expected_counts)
    else:
        np.testing.assert_array_equal(first, np.sort(expected_first))  # the order they first occur in
    taken = np.take(values, inverse, axis=0 if axis is None else axis)
    np.testing.assert_array_equal(taken, flat)  # the inverse indices rebuild the input


def test_unique_index_and_count_types() -> None:
    data = np.array([3, 1, 3, 2, 1, 3], np.int32)
    outputs = _matches_openvino(lambda m, x: m.unique(x, None, True, "i32", "i32"), data)
    assert [o.dtype for o in outputs] == [np.int32] * 4
    np.testing.assert_array_equal(outputs[3], [2, 1, 3])
    with pytest.raises(InputError, match="index_element_type"):
        opset.unique(opset.parameter([3], np.float32), None, True, "f32")


# --- Eye -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "columns", "diagonal", "batch"), [
    (3, 3, 0, None), (3, 5, 2, None), (5, 3, -1, None), (4, 4, 7, None), (2, 4, -3, [2, 3]),
], ids=["square", "above", "below", "outside", "batched"])
def test_eye_matches_numpy_and_openvino(rows: int, columns: int, diagonal: int,
                                       batch: list[int] | None) -> None:
    shape = [*(batch or []), rows, columns]
    zeros = np.zeros(shape, F32)
    batch_shape = None if batch is None else np.array(batch, np.int64)
    got = _matches_openvino(lambda m, x: m.add(x, m.eye(np.int64(rows), np.int32(columns), np.int64(diagonal),
                                                        "f32", batch_shape)), zeros)[0]
    np.testing.assert_array_equal(got, np.broadcast_to(np.eye(rows, columns, diagonal, F32), shape))


def test_eye_of_computed_sizes_and_integer_type() -> None:
    got = _ours(lambda m, n: m.eye(n, np.int64(4), np.int64(-1), "i32", np.array([2], np.int64)),
                np.array([3], np.int64))[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.broadcast_to(np.eye(3, 4, -1, np.int32), (2, 3, 4)))
    with pytest.raises(InputError, match="num_rows must not be negative"):
        opset.eye(np.int64(-2), np.int64(3), np.int64(0), "f32")


# --- GridSample ------------------------------------------------------------------------------------

IMAGE = RNG.standard_normal((2, 3, 5, 6)).astype(F32)
GRID = RNG.uniform(-1.3, 1.3, (2, 4, 7, 2)).astype(F32)


@pytest.mark.parametrize("align", [False, True], ids=["edges", "centres"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_grid_sample_matches_openvino(mode: str, padding: str, align: bool) -> None:
    attributes = {"mode": mode, "padding_mode": padding, "align_corners": align}
    got = _matches_openvino(lambda m, x, g: m.grid_sample(x, g, attributes), IMAGE, GRID, tol=1e-4)[0]
    assert got.shape == (2, 3, 4, 7)


def test_grid_sample_identity_grid_and_bad_attributes() -> None:
    ys, xs = np.meshgrid(np.linspace(-1, 1, 5), np.linspace(-1, 1, 6), indexing="ij")
    grid = np.broadcast_to(np.stack([xs, ys], -1), (2, 5, 6, 2)).astype(F32)
    got = _ours(lambda m, x, g: m.grid_sample(x, g, {"align_corners": True}), IMAGE, grid)[0]
    np.testing.assert_allclose(got, IMAGE, atol=1e-5)
    with pytest.raises(InputError, match=r"mode 'area'.*bilinear, bicubic, nearest"):
        opset.grid_sample(IMAGE, grid, {"mode": "area"})
    with pytest.raises(InputError, match="attributes \\['antialias'\\]"):
        opset.grid_sample(IMAGE, grid, {"antialias": True})


# --- bitwise ops -----------------------------------------------------------------------------------

_BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}


def _integers(dtype: Any, shape: tuple[int, ...], limit: int | None = None) -> np.ndarray:
    info = np.iinfo(dtype)
    low, high = (int(info.min), int(info.max)) if limit is None else (max(int(info.min), -limit), limit)
    values = RNG.integers(low, high, shape, dtype=dtype, endpoint=True)
    values.reshape(-1)[:2] = [low, high]
    return values


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16, np.int32, np.int64])
def test_bitwise_ops_match_numpy_and_openvino(dtype: Any) -> None:
    """8- and 16-bit integers over their whole range; wider ones of magnitude below 2 ** 24
    (OpenVINO's CPU engine divides 32-bit integers in f32, and computes 64-bit ones in 32 bits)."""
    limit = None if np.iinfo(dtype).bits <= 16 else (1 << 24) - 1
    left, right = _integers(dtype, (4, 6), limit), _integers(dtype, (6,), limit)
    for function, reference in _BITWISE.items():
        got = _matches_openvino(lambda m, a, b, f=function: getattr(m, f)(a, b), left, right)[0]
        np.testing.assert_array_equal(got, reference(left, right), err_msg=function)
    got = _matches_openvino(lambda m, a: m.bitwise_not(a), left)[0]
    np.testing.assert_array_equal(got, np.invert(left))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                   np.uint64])
def test_bitwise_ops_over_the_whole_range_on_onnx_runtime(dtype: Any) -> None:
    left, right = _integers(dtype, (3, 8)), _integers(dtype, (8,))
    onnx_runtime = {"config": {"ENGINE": "ONNXRUNTIME"}}
    for function, reference in _BITWISE.items():
        got = _ours(lambda m, a, b, f=function: getattr(m, f)(a, b), left, right, **onnx_runtime)[0]
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, reference(left, right), err_msg=function)
    np.testing.assert_array_equal(_ours(lambda m, a: m.bitwise_not(a), left, **onnx_runtime)[0],
                                  np.invert(left))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_wide_bitwise_ops_are_exact_on_the_default_cpu_over_the_whole_range(dtype: Any) -> None:
    # OpenVINO's CPU engine would round them: the CPU leaves such models to ONNX Runtime
    left, right = _integers(dtype, (3, 8)), _integers(dtype, (8,))
    for function, reference in _BITWISE.items():
        got = _ours(lambda m, a, b, f=function: getattr(m, f)(a, b), left, right)[0]
        np.testing.assert_array_equal(got, reference(left, right), err_msg=function)
    np.testing.assert_array_equal(_ours(lambda m, a: m.bitwise_not(a), left)[0], np.invert(left))


def test_bitwise_ops_of_booleans_and_a_number() -> None:
    left, right = RNG.integers(0, 2, (3, 4)).astype(bool), RNG.integers(0, 2, (4,)).astype(bool)
    for function, reference in _BITWISE.items():
        got = _matches_openvino(lambda m, a, b, f=function: getattr(m, f)(a, b), left, right)[0]
        np.testing.assert_array_equal(got, reference(left, right))
    np.testing.assert_array_equal(_matches_openvino(lambda m, a: m.bitwise_not(a), left)[0], ~left)
    values = np.array([0, 5, -6, 12], np.int32)
    np.testing.assert_array_equal(_ours(lambda m, a: m.bitwise_and(a, 6), values)[0], values & 6)
    with pytest.raises(InputError, match="integers or booleans"):
        opset.bitwise_xor(opset.parameter([2], np.float32), opset.parameter([2], np.float32))


# --- Multinomial -----------------------------------------------------------------------------------

PROBS = np.array([[0.1, 0.2, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25]], F32)


@pytest.mark.parametrize("log_probs", [False, True], ids=["probabilities", "log probabilities"])
def test_multinomial_with_replacement_follows_the_probabilities(log_probs: bool) -> None:
    probs = np.log(PROBS + np.float32(1e-30)) if log_probs else PROBS * 3  # unnormalized either way
    count = 20000
    drawn = _ours(lambda m, p: m.multinomial(p, np.int64(count), "i32", True, log_probs, 7, 11), probs)[0]
    expected = _run(ovops, lambda m, p: m.multinomial(p, np.int64(count), "i32", True, log_probs, 7, 11),
                    [probs])[0]
    assert drawn.shape == expected.shape == (2, count)
    assert drawn.dtype == expected.dtype == np.int32
    for row in range(2):
        frequencies = np.bincount(drawn[row], minlength=4) / count
        np.testing.assert_allclose(frequencies, PROBS[row], atol=0.015)
    assert not (drawn[0] == 3).any()  # a class of probability 0 never comes


def test_multinomial_without_replacement_draws_distinct_classes() -> None:
    probs = np.tile(np.array([[0.05, 0.6, 0.05, 0.3]], F32), (500, 1))
    drawn = _ours(lambda m, p: m.multinomial(p, np.int32(3), "i64", False, False), probs)[0]
    assert drawn.shape == (500, 3) and drawn.dtype == np.int64
    assert all(len(set(row)) == 3 for row in drawn.tolist())
    first = np.bincount(drawn[:, 0], minlength=4) / 500
    assert first[1] > 0.5 and first[3] > 0.2  # the likeliest classes come first most often
    with pytest.raises(InputError, match="at most 4"):
        opset.multinomial(probs, np.int64(5), "i64", False, False)


# --- FakeConvert -----------------------------------------------------------------------------------


@pytest.mark.parametrize("destination", ["f8e4m3", "f8e5m2"])
@pytest.mark.parametrize(("scale", "shift"), [(1.5, None), (0.5, 0.25), (3.0, -1.0)],
                         ids=["scaled", "shifted", "shifted back"])
def test_fake_convert_matches_openvino(destination: str, scale: float, shift: float | None) -> None:
    magnitudes = np.array([[1e-2], [1], [30], [1e3], [1e5]], F32)
    data = (RNG.standard_normal((5, 400)).astype(F32) * magnitudes).astype(F32)
    data[0, :4] = [0, 448, -1e6, 57344]
    shift_value = None if shift is None else np.float32(shift)
    got = _matches_openvino(lambda m, x: m.fake_convert(x, np.float32(scale), shift_value, destination),
                            data, tol=1e-6)[0]
    assert len(np.unique(got[1])) < 0.5 * got.shape[1]  # rounded to few values


# --- Gather with batch dims ------------------------------------------------------------------------

DATA = RNG.standard_normal((2, 3, 4, 5)).astype(F32)


def _gather_reference(data: np.ndarray, indices: np.ndarray, axis: int, batch: int) -> np.ndarray:
    batch = batch % indices.ndim if batch < 0 else batch
    axis %= data.ndim
    lead = data.shape[:batch]
    out = []
    for where in np.ndindex(*lead):
        out.append(np.take(data[where], indices[where], axis=axis - batch))
    return np.stack(out).reshape(*lead, *out[0].shape)


@pytest.mark.parametrize(("axis", "batch", "index_shape"), [
    (2, 1, (2, 6)), (2, 2, (2, 3, 6)), (2, -1, (2, 3, 6)), (1, 1, (2, 2, 3)), (-1, 1, (2, 7)),
    (1, 1, (2,)), (3, 2, (2, 3, 2, 2)),
], ids=["axis after the batch", "two batch dims", "negative batch dims", "axis next to it", "last axis",
        "one index per batch", "index matrix"])
def test_gather_with_batch_dims(axis: int, batch: int, index_shape: tuple[int, ...]) -> None:
    length = DATA.shape[axis]
    indices = RNG.integers(-length, length, index_shape).astype(np.int32)
    got = _matches_openvino(lambda m, x, i: m.gather(x, i, np.int64(axis), batch), DATA, indices)[0]
    np.testing.assert_allclose(got, _gather_reference(DATA, indices, axis, batch))


def test_gather_refuses_batch_dims_past_the_axis() -> None:
    with pytest.raises(InputError, match="batch_dims <= axis"):
        opset.gather(opset.parameter([2, 3, 4], F32), opset.parameter([2, 3], np.int64), np.int64(1), 2)


# --- ReverseSequence on any axes -------------------------------------------------------------------


def _reversed(data: np.ndarray, lengths: np.ndarray, batch: int, time: int) -> np.ndarray:
    moved = np.moveaxis(data, [batch, time], [0, 1]).copy()
    for b, length in enumerate(lengths):
        moved[b, :length] = moved[b, :length][::-1]
    return np.moveaxis(moved, [0, 1], [batch, time])


@pytest.mark.parametrize(("batch", "time"), [(0, 1), (1, 0), (0, 2), (2, 0), (1, 3), (3, 1), (-1, -2)])
def test_reverse_sequence_on_any_two_axes(batch: int, time: int) -> None:
    data = RNG.standard_normal((3, 4, 5, 2)).astype(F32)
    lengths = RNG.integers(1, data.shape[time] + 1, data.shape[batch]).astype(np.int32)
    got = _matches_openvino(lambda m, x: m.reverse_sequence(x, lengths, batch, time), data)[0]
    np.testing.assert_array_equal(got, _reversed(data, lengths, batch % 4, time % 4))
    with pytest.raises(InputError, match="must differ"):
        opset.reverse_sequence(data, lengths, batch, batch)


# --- Interpolate's Pillow modes --------------------------------------------------------------------

PICTURE = RNG.standard_normal((1, 2, 7, 9)).astype(F32)


@pytest.mark.parametrize("mode", ["bilinear_pillow", "bicubic_pillow"])
@pytest.mark.parametrize(("target", "by", "axes", "pads"), [
    ([4, 13], "sizes", [2, 3], None), ([0.6, 1.7], "scales", [2, 3], None), ([3], "sizes", [3], None),
    ([1, 2, 3, 20], "sizes", None, ([0, 0, 1, 0], [0, 0, 1, 2])),
], ids=["sizes", "scales", "one axis", "padded"])
def test_pillow_interpolation_matches_openvino(mode: str, target: list[float], by: str,
                                               axes: list[int] | None, pads: Any) -> None:
    values = np.array(target, F32 if by == "scales" else np.int64)
    where = None if axes is None else np.array(axes, np.int64)
    begin, end = pads or (None, None)
    _matches_openvino(lambda m, x: m.interpolate(x, values, mode, by, begin, end, axes=where,
                                                 cube_coeff=-0.75), PICTURE)


def test_pillow_interpolation_needs_known_sizes() -> None:
    image = opset.parameter([1, 2, -1, 9], F32)
    with pytest.raises(InputError, match="static input dims"):
        opset.interpolate(image, np.array([4, 5], np.int64), "bilinear_pillow", "sizes",
                          axes=np.array([2, 3], np.int64))
    flat = np.ones((1, 1, 4, 4), F32)
    smooth = _ours(lambda m, x: m.interpolate(x, np.array([2, 6], np.int64), "bicubic_pillow", "sizes",
                                              axes=np.array([2, 3], np.int64)), flat)[0]
    np.testing.assert_allclose(smooth, np.ones((1, 1, 2, 6)), rtol=1e-6)  # the weights sum to one


# --- opset modules ---------------------------------------------------------------------------------


def test_the_new_functions_belong_to_later_opsets() -> None:
    added = {"unique": 10, "eye": 9, "grid_sample": 9, "bitwise_and": 13, "bitwise_or": 13, "bitwise_xor": 13,
             "bitwise_not": 13, "multinomial": 13, "fake_convert": 13}
    for function, since in added.items():
        assert opset.SINCE_OPSET[function] == since
        assert callable(getattr(opset, function)) and function in opset.__all__
        assert not hasattr(opset8, function)


# --- the emulated GPU ------------------------------------------------------------------------------


def test_new_ops_on_the_emulated_gpu(emulated_core: ov.Core) -> None:
    gpu = {"device": "GPU.0", "core": emulated_core}
    attributes = {"mode": "bicubic", "padding_mode": "reflection", "align_corners": False}
    np.testing.assert_allclose(_ours(lambda m, x, g: m.grid_sample(x, g, attributes), IMAGE, GRID, **gpu)[0],
                               _run(ovops, lambda m, x, g: m.grid_sample(x, g, attributes), [IMAGE, GRID])[0],
                               rtol=1e-4, atol=1e-4)
    indices = RNG.integers(-4, 4, (2, 3, 6)).astype(np.int64)
    np.testing.assert_allclose(_ours(lambda m, x, i: m.gather(x, i, np.int64(2), 2), DATA, indices, **gpu)[0],
                               _gather_reference(DATA, indices, 2, 2))
    lengths = np.array([2, 5, 1], np.int32)
    sequence = RNG.standard_normal((3, 4, 5)).astype(F32)
    np.testing.assert_array_equal(
        _ours(lambda m, x: m.reverse_sequence(x, lengths, 0, 2), sequence, **gpu)[0],
        _reversed(sequence, lengths, 0, 2))
    left, right = _integers(np.int32, (3, 5)), _integers(np.int32, (5,))
    np.testing.assert_array_equal(_ours(lambda m, a, b: m.bitwise_xor(a, b), left, right, **gpu)[0],
                                  left ^ right)
    data = np.array([[3, 1, 3], [2, 1, 2]], np.int32)
    values, _, inverse, counts = _ours(lambda m, x: m.unique(x, None, True, "i32", "i32"), data, **gpu)
    np.testing.assert_array_equal(values, [1, 2, 3])
    np.testing.assert_array_equal(counts, [2, 2, 2])
    np.testing.assert_array_equal(values[inverse], data.reshape(-1))
    np.testing.assert_allclose(
        _ours(lambda m, x: m.interpolate(x, np.array([4, 5], np.int64), "bilinear_pillow", "sizes",
                                         axes=np.array([2, 3], np.int64)), PICTURE, **gpu)[0],
        _run(ovops, lambda m, x: m.interpolate(x, np.array([4, 5], np.int64), "bilinear_pillow", "sizes",
                                               axes=np.array([2, 3], np.int64)), [PICTURE])[0],
        rtol=1e-5, atol=1e-5)


# --- read from an OpenVINO IR ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ir")


def _read_matches_openvino(model: Any, xml: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``model`` saved as an IR at ``xml``, read by inferplex, gives OpenVINO's CPU results."""
    openvino.save_model(model, str(xml), compress_to_fp16=False)
    core = ov.Core()
    results = core.compile_model(core.read_model(xml), "CPU")(feeds)
    compiled = openvino.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    expected = compiled(feeds)
    got = []
    for index in range(len(compiled.outputs)):
        assert results[index].shape == expected[index].shape, index
        assert results[index].dtype == expected[index].dtype, index
        np.testing.assert_allclose(results[index], expected[index], rtol=1e-5, atol=1e-5, err_msg=str(index))
        got.append(results[index])
    return got


def test_new_ops_read_from_ir(folder: Path) -> None:
    image = ovops.parameter([2, 3, 5, 6], F32, name="image")
    grid = ovops.parameter([2, 4, 7, 2], F32, name="grid")
    ints = ovops.parameter([4, 6], np.int32, name="ints")
    small = ovops.parameter([6], np.int32, name="small")
    nodes = [
        ovops.unique(ints, np.int64(1), False, "i32", "i64"),
        ovops.unique(ints),
        ovops.eye(np.int32(3), np.int64(4), np.int64(1), "f32", np.array([2], np.int64)),
        ovops.grid_sample(image, grid, {"mode": "bicubic", "padding_mode": "border", "align_corners": True}),
        ovops.grid_sample(image, grid, {"mode": "nearest", "padding_mode": "reflection"}),
        ovops.bitwise_and(ints, small), ovops.bitwise_or(ints, small), ovops.bitwise_xor(ints, small),
        ovops.bitwise_not(ints),
        ovops.fake_convert(image, np.float32(2.0), np.float32(0.5), "f8e4m3"),
        ovops.fake_convert(image, np.float32(4.0)),
        ovops.gather(image, ovops.constant(np.array([[2, -1], [0, 4]], np.int64)), np.int64(3), 1),
        ovops.reverse_sequence(image, np.array([3, 5], np.int32), 0, 3),
        ovops.interpolate(image, np.array([3, 8], np.int64), "bicubic_pillow", "sizes",
                          axes=np.array([2, 3], np.int64)),
        ovops.interpolate(image, np.array([0.5, 0.5], F32), "bilinear_pillow", "scales",
                          axes=np.array([2, 3], np.int64)),
    ]
    outputs = [n.output(i) for n in nodes for i in range(n.get_output_size())]
    model = openvino.Model(outputs, [image, grid, ints, small], "new ops")
    feeds = {"image": RNG.standard_normal((2, 3, 5, 6)).astype(F32),
             "grid": RNG.uniform(-1.2, 1.2, (2, 4, 7, 2)).astype(F32),
             "ints": RNG.integers(-1000, 1000, (4, 6)).astype(np.int32),
             "small": RNG.integers(-50, 50, (6,)).astype(np.int32)}
    feeds["ints"][:, 3] = feeds["ints"][:, 1]  # a repeated column for Unique along axis 1
    got = _read_matches_openvino(model, folder / "new_ops.xml", feeds)
    assert len(got) == 4 + 4 + 13
    np.testing.assert_array_equal(got[8], np.broadcast_to(np.eye(3, 4, 1, F32), (2, 3, 4)))
    assert got[0].shape == (4, 5)  # one of six columns repeated


def test_multinomial_read_from_ir(folder: Path) -> None:
    probs = ovops.parameter([2, 4], F32, name="probs")
    node = ovops.multinomial(probs, np.int64(3000), "i32", True, False, 1, 2)
    xml = folder / "multinomial.xml"
    openvino.save_model(openvino.Model([node], [probs], "draws"), str(xml))
    core = ov.Core()
    drawn = core.compile_model(core.read_model(xml), "CPU")({"probs": PROBS})[0]
    assert drawn.shape == (2, 3000) and drawn.dtype == np.int32
    np.testing.assert_allclose(np.bincount(drawn[0], minlength=4) / 3000, PROBS[0], atol=0.03)


# --- DetectionOutput and DeformableConvolution (org.openvinotoolkit ops) ---------------------------

ov_opset1 = pytest.importorskip("openvino.opset1")
ov_opset8 = pytest.importorskip("openvino.opset8")


def _priors(count: int) -> np.ndarray:
    corners = RNG.uniform(0, 0.6, (count, 2))
    boxes = np.concatenate([corners, corners + RNG.uniform(0.1, 0.4, (count, 2))], 1).reshape(-1)
    return np.stack([boxes, np.full(count * 4, 0.1)])[None].astype(F32)


BATCH, PRIORS, CLASSES = 2, 6, 3
BOXES = (RNG.standard_normal((BATCH, PRIORS * 4)) * 0.1).astype(F32)
SCORES = RNG.uniform(0, 1, (BATCH, PRIORS * CLASSES)).astype(F32)
PRIOR_BOXES = _priors(PRIORS)


def _both_opsets(theirs: Any, ours: Any, build: Callable[..., Any],
                 arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Output 0 of ``build`` made with OpenVINO's ``theirs`` (run on its CPU) and inferplex's ``ours``."""
    params = [theirs.parameter(list(a.shape), a.dtype) for a in arrays]
    compiled = openvino.Core().compile_model(openvino.Model([build(theirs, *params)], params), "CPU",
                                             {"INFERENCE_PRECISION_HINT": "f32"})
    expected = compiled(list(arrays))[0]
    mine = [ours.parameter(list(a.shape), a.dtype) for a in arrays]
    node = build(ours, *mine)
    got = ov.Core().compile_model(ov.Model([node], mine), "CPU")(list(arrays)).to_tuple()[0]
    return got, expected


@pytest.mark.parametrize("attrs", [
    {"keep_top_k": [5], "nms_threshold": 0.5, "normalized": True},
    {"keep_top_k": [-1], "top_k": 4, "nms_threshold": 0.4, "normalized": True, "confidence_threshold": 0.1},
    {"keep_top_k": [-1], "nms_threshold": 0.4, "normalized": True, "share_location": True,
     "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "clip_before_nms": True},
    {"keep_top_k": [8], "nms_threshold": 0.45, "normalized": True, "background_label_id": 1,
     "clip_after_nms": True},
], ids=["keep top k", "top k", "centre size", "background 1"])
@pytest.mark.parametrize("version", [1, 8])
def test_detection_output_matches_openvino(attrs: dict[str, Any], version: int) -> None:
    from inferplex import opset1

    theirs, ours = (ov_opset1, opset1) if version == 1 else (ov_opset8, opset)
    options = {**attrs, "num_classes": CLASSES} if version == 1 else attrs
    got, expected = _both_opsets(theirs, ours, lambda m, b, c, p: m.detection_output(b, c, p, options),
                                 [BOXES, SCORES, PRIOR_BOXES])
    assert got.shape == expected.shape and got.shape[:2] == (1, 1) and got.shape[3] == 7
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert (got[0, 0, :, 0] >= 0).any()  # some boxes kept


def test_detection_output_with_auxiliary_predictions() -> None:
    attrs = {"keep_top_k": [6], "nms_threshold": 0.5, "normalized": True, "objectness_score": 0.4}
    objectness = RNG.uniform(0, 1, (BATCH, PRIORS * 2)).astype(F32)
    refined = (RNG.standard_normal((BATCH, PRIORS * 4)) * 0.1).astype(F32)
    got, expected = _both_opsets(
        ov_opset8, opset, lambda m, b, c, p, a, r: m.detection_output(b, c, p, attrs, a, r),
        [BOXES, SCORES, PRIOR_BOXES, objectness, refined])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match="together"):
        opset.detection_output(BOXES, SCORES, PRIOR_BOXES, attrs, objectness)
    with pytest.raises(InputError, match="num_classes 4: the inputs have 3"):
        opset.detection_output(BOXES, SCORES, PRIOR_BOXES, {**attrs, "num_classes": 4})


DEFORMABLE_DATA = RNG.standard_normal((1, 4, 6, 7)).astype(F32)
DEFORMABLE_FILTERS = RNG.standard_normal((6, 2, 3, 3)).astype(F32)


@pytest.mark.parametrize("masked", [False, True], ids=["offsets", "offsets and mask"])
@pytest.mark.parametrize(("strides", "pads", "auto_pad", "out"), [
    ([1, 2], [1, 1], "explicit", (6, 4)), ([1, 1], [0, 0], "valid", (4, 5)),
    ([2, 1], [0, 0], "same_upper", (3, 7)),
], ids=["explicit", "valid", "same upper"])
def test_deformable_convolution_matches_openvino(masked: bool, strides: list[int], pads: list[int],
                                                 auto_pad: str, out: tuple[int, int]) -> None:
    offsets = (RNG.standard_normal((1, 2 * 2 * 9, *out)) * 0.7).astype(F32)
    mask = RNG.uniform(0, 1, (1, 2 * 9, *out)).astype(F32)
    arrays = [DEFORMABLE_DATA, offsets, mask] if masked else [DEFORMABLE_DATA, offsets]

    def build(m: Any, x: Any, o: Any, k: Any = None) -> Any:
        return m.deformable_convolution(x, o, DEFORMABLE_FILTERS, strides, pads, pads, [1, 1], k, auto_pad,
                                        2, 2)

    got, expected = _both_opsets(ov_opset8, opset, build, arrays)
    assert got.shape == expected.shape == (1, 6, *out)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_deformable_convolution_refuses_interpolation_padding() -> None:
    with pytest.raises(InputError, match="bilinear_interpolation_pad"):
        opset.deformable_convolution(DEFORMABLE_DATA, np.zeros((1, 36, 6, 4), F32), DEFORMABLE_FILTERS,
                                     [1, 2], [1, 1], [1, 1], [1, 1], None, "explicit", 2, 2, True)
    assert opset.SINCE_OPSET["deformable_convolution"] == 8 and hasattr(opset8, "deformable_convolution")


def test_openvino_domain_ops_shapes_follow_a_reshape() -> None:
    boxes = opset.parameter([-1, PRIORS * 4], F32, name="boxes")
    scores = opset.parameter([-1, PRIORS * CLASSES], F32, name="scores")
    priors = opset.parameter(list(PRIOR_BOXES.shape), F32, name="priors")
    data = opset.parameter([-1, 4, 6, 7], F32, name="data")
    offsets = opset.parameter([-1, 36, 6, 4], F32, name="offsets")
    common = {"nms_threshold": 0.5, "normalized": True}
    nodes = [opset.detection_output(boxes, scores, priors, {**common, "keep_top_k": [5]}),
             opset.detection_output(boxes, scores, priors, {**common, "keep_top_k": [-1], "top_k": 2}),
             opset.detection_output(boxes, scores, priors, {**common, "keep_top_k": [-1]}),
             opset.deformable_convolution(data, offsets, DEFORMABLE_FILTERS, [1, 2], [1, 1], [1, 1], [1, 1],
                                          None, "explicit", 2, 2)]
    model = ov.Model(nodes, [boxes, scores, priors, data, offsets], "toolkit ops")
    assert [str(o.get_partial_shape()) for o in model.outputs] == ["[1,1,?,7]"] * 3 + ["[?,6,6,4]"]
    model.reshape({"boxes": [3, PRIORS * 4], "scores": [3, PRIORS * CLASSES], "data": [2, 4, 6, 7],
                   "offsets": [2, 36, 6, 4]})
    assert [str(o.get_partial_shape()) for o in model.outputs] == [
        "[1,1,15,7]", f"[1,1,{3 * 2 * CLASSES},7]", f"[1,1,{3 * PRIORS * CLASSES},7]", "[2,6,6,4]"]
    feeds = [np.tile(BOXES[:1], (3, 1)), np.tile(SCORES[:1], (3, 1)), PRIOR_BOXES,
             np.tile(DEFORMABLE_DATA, (2, 1, 1, 1)), np.zeros((2, 36, 6, 4), F32)]
    results = ov.Core().compile_model(model, "CPU")(feeds).to_tuple()
    assert [r.shape for r in results] == [(1, 1, 15, 7), (1, 1, 18, 7), (1, 1, 54, 7), (2, 6, 6, 4)]


def test_openvino_domain_ops_read_from_ir(folder: Path) -> None:
    boxes = ovops.parameter(list(BOXES.shape), F32, name="boxes")
    scores = ovops.parameter(list(SCORES.shape), F32, name="scores")
    priors = ovops.parameter(list(PRIOR_BOXES.shape), F32, name="priors")
    data = ovops.parameter(list(DEFORMABLE_DATA.shape), F32, name="data")
    offsets = ovops.parameter([1, 36, 6, 4], F32, name="offsets")
    mask = ovops.parameter([1, 18, 6, 4], F32, name="mask")
    attrs = {"keep_top_k": [5], "nms_threshold": 0.5, "normalized": True}
    filters = ovops.constant(DEFORMABLE_FILTERS)
    nodes = [ov_opset1.detection_output(boxes, scores, priors, {**attrs, "num_classes": CLASSES}),
             ov_opset8.detection_output(boxes, scores, priors, {**attrs, "top_k": 3, "keep_top_k": [-1]}),
             ov_opset1.deformable_convolution(data, offsets, filters, [1, 2], [1, 1], [1, 1], [1, 1],
                                              "explicit", 2, 2),
             ov_opset8.deformable_convolution(data, offsets, filters, [1, 2], [1, 1], [1, 1], [1, 1], mask,
                                              "explicit", 2, 2)]
    model = openvino.Model(nodes, [boxes, scores, priors, data, offsets, mask], "toolkit ops")
    feeds = {"boxes": BOXES, "scores": SCORES, "priors": PRIOR_BOXES, "data": DEFORMABLE_DATA,
             "offsets": (RNG.standard_normal((1, 36, 6, 4)) * 0.5).astype(F32),
             "mask": RNG.uniform(0, 1, (1, 18, 6, 4)).astype(F32)}
    got = _read_matches_openvino(model, folder / "toolkit_ops.xml", feeds)
    assert [g.shape for g in got] == [(1, 1, 10, 7), (1, 1, 18, 7), (1, 6, 6, 4), (1, 6, 6, 4)]
