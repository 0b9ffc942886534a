"""The functions OpenVINO's opsets 14 to 16 added (inverse, stft, istft, search_sorted, slice_scatter,
col2im, embedding_bag_offsets, embedding_bag_packed, segment_max, the bitwise shifts,
convert_promote_types) and opset 1's deformable_convolution, built with inferplex's opset modules,
each against OpenVINO's CPU at f32 on the same graph built with ``openvino.opset14``/``15``/``16``/``1``:
shapes, element types and values, on both of the CPU device's engines; the same ops read from an IR
OpenVINO saved; and an emulated GPU."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex import opset, opset1
from inferplex.errors import InputError

from conftest import same_on_the_gpu

openvino = pytest.importorskip("openvino")
ov_opset1 = pytest.importorskip("openvino.opset1")
ov_opset14 = pytest.importorskip("openvino.opset14")
ov_opset15 = pytest.importorskip("openvino.opset15")
ov_opset16 = pytest.importorskip("openvino.opset16")

F32 = np.float32
RNG = np.random.default_rng(0)
F32_HINT = {"INFERENCE_PRECISION_HINT": "f32"}


def _graph(lib: Any, module: Any, build: Callable[..., Any], feeds: list[np.ndarray]) -> Any:
    params = [module.parameter(list(feed.shape), feed.dtype) for feed in feeds]
    node = build(module, *params)
    return lib.Model([node.output(i) for i in range(node.get_output_size())], params, "op")


def _results(compiled: Any, feeds: list[np.ndarray], count: int) -> list[np.ndarray]:
    results = compiled(feeds)
    return [np.asarray(results[i]) for i in range(count)]


def _check(got: list[np.ndarray], want: list[np.ndarray], tolerance: float) -> None:
    assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
    for have, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(have, expected, rtol=tolerance, atol=tolerance)


def _signal() -> list[np.ndarray]:
    return [RNG.standard_normal((2, 64)).astype(F32), np.hanning(12).astype(F32)]


def _sorted() -> list[np.ndarray]:
    ordered = np.sort(RNG.integers(0, 10, (3, 8)).astype(F32), axis=-1)
    return [ordered, RNG.integers(-1, 11, (3, 5)).astype(F32)]


CASES: dict[str, tuple[Any, Callable[..., Any], list[np.ndarray], float]] = {
    "inverse": (ov_opset14, lambda m, x: m.inverse(x), [RNG.standard_normal((3, 5, 5)).astype(F32)], 1e-3),
    "inverse_adjoint": (ov_opset14, lambda m, x: m.inverse(x, True),
                        [RNG.standard_normal((4, 4)).astype(F32)], 1e-3),
    "stft": (ov_opset15, lambda m, s, w: m.stft(s, w, m.constant(np.int64(16)), m.constant(np.int64(4)),
                                                 False), _signal(), 1e-5),
    "stft_transposed": (ov_opset15, lambda m, s, w: m.stft(s, w, m.constant(np.int64(16)),
                                                          m.constant(np.int64(5)), True), _signal(), 1e-5),
    "istft": (ov_opset16, lambda m, s, w: m.istft(
        s, w, m.constant(np.int64(16)), m.constant(np.int64(4)), False, True),
        [RNG.standard_normal((2, 9, 13, 2)).astype(F32), np.hanning(16).astype(F32)], 1e-5),
    "istft_centered_to_a_length": (ov_opset16, lambda m, s, w: m.istft(
        s, w, m.constant(np.int64(16)), m.constant(np.int64(5)), True, False, m.constant(np.int64(40))),
        [RNG.standard_normal((9, 11, 2)).astype(F32), np.hanning(12).astype(F32)], 1e-5),
    "search_sorted": (ov_opset15, lambda m, a, b: m.search_sorted(a, b), _sorted(), 0),
    "search_sorted_right": (ov_opset15, lambda m, a, b: m.search_sorted(a, b, True), _sorted(), 0),
    "slice_scatter": (ov_opset15, lambda m, d, u: m.slice_scatter(
        d, u, m.constant(np.array([-1, 5])), m.constant(np.array([-5, 0])), m.constant(np.array([-2, -2])),
        m.constant(np.array([0, 1]))), [RNG.standard_normal((4, 6, 5)).astype(F32),
                                        RNG.standard_normal((2, 3, 5)).astype(F32)], 0),
    "col2im": (ov_opset15, lambda m, d: m.col2im(
        d, m.constant(np.array([5, 7])), m.constant(np.array([2, 3])), [1, 2], [2, 1], [1, 1], [0, 1]),
               [RNG.standard_normal((2, 18, 16)).astype(F32)], 1e-5),
    "embedding_bag_offsets_mean": (ov_opset15, lambda m, t, i, o: m.embedding_bag_offsets(
        t, i, o, m.constant(np.int64(0)), reduction="mean"),
        [RNG.standard_normal((10, 3)).astype(F32), np.array([1, 2, 3, 4, 5, 6, 7]), np.array([0, 2, 2, 5])],
        1e-6),
    "embedding_bag_packed_mean": (ov_opset15, lambda m, t, i: m.embedding_bag_packed(t, i, reduction="mean"),
                                  [RNG.standard_normal((10, 3)).astype(F32),
                                   np.array([[1, 2, 3], [4, 4, 0]])], 1e-6),
    "segment_max": (ov_opset16, lambda m, d, i: m.segment_max(d, i, fill_mode="ZERO"),
                    [RNG.standard_normal((7, 3)).astype(F32), np.array([0, 0, 2, 2, 2, 4, 4])], 0),
    "segment_max_lowest": (ov_opset16, lambda m, d, i: m.segment_max(d, i, m.constant(np.int64(7)),
                                                                    fill_mode="LOWEST"),
                           [RNG.standard_normal((7, 3)).astype(F32), np.array([0, 0, 2, 2, 2, 4, 4])], 0),
    "deformable_convolution_1": (ov_opset1, lambda m, x, o: m.deformable_convolution(
        x, o, m.constant(np.linspace(-1, 1, 5 * 4 * 9, dtype=F32).reshape(5, 4, 3, 3)), [1, 1], [0, 0],
        [0, 0], [1, 1]), [RNG.standard_normal((1, 4, 6, 6)).astype(F32),
                  (RNG.standard_normal((1, 18, 4, 4)) * 0.5).astype(F32)], 1e-5),
}


def _ours(module: Any) -> Any:
    return opset1 if module is ov_opset1 else opset


@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_openvinos_cpu(case: str, engine: str) -> None:
    module, build, feeds, tolerance = CASES[case]
    if engine == "ONNXRUNTIME" and case == "deformable_convolution_1":
        pytest.skip("DeformableConvolution is OpenVINO's own ONNX-domain op: the OpenVINO engine runs it")
    reference = _graph(openvino, module, build, feeds)
    want = _results(openvino.Core().compile_model(reference, "CPU", F32_HINT), feeds, len(reference.outputs))
    ours = _graph(ov, _ours(module), build, feeds)
    got = _results(ov.Core().compile_model(ours, "CPU", {**F32_HINT, "ENGINE": engine}), feeds, len(want))
    _check(got, want, tolerance)


def test_ops_read_from_an_ir(tmp_path: Path) -> None:
    for case in sorted(CASES):
        module, build, feeds, tolerance = CASES[case]
        reference = _graph(openvino, module, build, feeds)
        compiled = openvino.Core().compile_model(reference, "CPU", F32_HINT)
        want = _results(compiled, feeds, len(reference.outputs))
        path = tmp_path / f"{case}.xml"
        openvino.save_model(reference, str(path), compress_to_fp16=False)
        compiled = ov.Core().compile_model(str(path), "CPU", F32_HINT)
        _check(_results(compiled, feeds, len(want)), want, tolerance)


@pytest.mark.parametrize("case", ["col2im", "inverse", "istft", "search_sorted", "segment_max",
                                  "slice_scatter", "stft"])
def test_op_runs_on_an_emulated_gpu(emulated_core: ov.Core, case: str) -> None:
    module, build, feeds, tolerance = CASES[case]
    same_on_the_gpu(emulated_core, _graph(ov, _ours(module), build, feeds), feeds, max(tolerance, 1e-5))


@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
def test_inverse_of_matrices_whose_size_is_known_only_when_run(tmp_path: Path, engine: str) -> None:
    """Dynamic dims (as ``convert_model`` leaves ``torch.linalg.inv``): a Loop over the columns, here
    and read from OpenVINO's IR, against numpy."""
    matrices = RNG.standard_normal((3, 6, 6)).astype(F32)
    ours = opset.parameter([-1, -1, -1], F32)
    compiled = ov.Core().compile_model(ov.Model([opset.inverse(ours)], [ours]), "CPU", {"ENGINE": engine})
    got = np.asarray(compiled([matrices])[0])
    np.testing.assert_allclose(got, np.linalg.inv(matrices), rtol=1e-3, atol=1e-4)
    theirs = ov_opset14.parameter([-1, -1, -1], F32)
    path = tmp_path / "inverse.xml"
    openvino.save_model(openvino.Model([ov_opset14.inverse(theirs, True)], [theirs]), str(path))
    read = ov.Core().compile_model(str(path), "CPU", {"ENGINE": engine})
    want = np.linalg.inv(np.swapaxes(matrices, -1, -2))
    np.testing.assert_allclose(np.asarray(read([matrices])[0]), want, rtol=1e-3, atol=1e-4)

def test_refusals() -> None:
    x = opset.parameter([2, 3, 4], F32)
    with pytest.raises(InputError, match=r"square matrices"):
        opset.inverse(opset.parameter([4], F32))
    with pytest.raises(InputError, match=r"stft takes data of rank 1 or 2"):
        opset.stft(x, opset.parameter([4], F32), np.int64(4), np.int64(2), False)
    with pytest.raises(InputError, match=r"fill_mode 'max'.*zero, lowest"):
        opset.segment_max(x, opset.parameter([2], np.int64), fill_mode="max")
    with pytest.raises(InputError, match=r"reduction 'max'.*sum, mean"):
        opset.embedding_bag_packed(x, opset.parameter([2, 2], np.int64), reduction="max")
    with pytest.raises(InputError, match=r"per_sample_weights with reduction 'sum' only"):
        opset.embedding_bag_packed(opset.parameter([5, 3], F32), opset.parameter([2, 2], np.int64),
                                   opset.parameter([2, 2], F32), reduction="mean")
    with pytest.raises(InputError, match=r"not a multiple of kernel_size 2 x 2"):
        opset.col2im(x, np.array([4, 4]), np.array([2, 2]))
    with pytest.raises(InputError, match=r"makes 16 blocks; the data has 12"):
        opset.col2im(opset.parameter([2, 18, 12], F32), np.array([5, 7]), np.array([2, 3]), [1, 2], [2, 1],
                     [1, 1], [0, 1])
    with pytest.raises(InputError, match=r"floating-point matrices.*int32"):
        opset.inverse(opset.parameter([3, 3], np.int32))
    with pytest.raises(InputError, match=r"window of rank 1"):
        opset.stft(opset.parameter([2, 64], F32), opset.parameter([4, 4], F32), np.int64(16), np.int64(4),
                   False)
    with pytest.raises(InputError, match=r"same leading dims"):
        opset.search_sorted(opset.parameter([3, 8], F32), opset.parameter([4, 5], F32))
    with pytest.raises(InputError, match=r"updates of the data's rank 3"):
        opset.slice_scatter(opset.parameter([4, 6, 5], F32), opset.parameter([4, 5], F32), np.array([1]),
                            np.array([5]), np.array([2]), np.array([1]))
    with pytest.raises(InputError, match=r"one per row of data"):
        opset.segment_max(opset.parameter([7, 3], F32), opset.parameter([5], np.int64))
    with pytest.raises(InputError, match=r"integers of one element type"):
        opset.bitwise_left_shift(opset.parameter([3], F32), opset.parameter([3], F32))
    assert {"inverse", "stft", "segment_max"} <= set(opset.__all__)
    assert "stft" not in ov.opset8.__all__ and "deformable_convolution" in opset1.__all__


# --- the bitwise shifts ------------------------------------------------------------------------------

INTEGERS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def _shifted(values: np.ndarray, counts: np.ndarray, left: bool) -> np.ndarray:
    """C's shifts on each type's own width, in Python's integers: a count of the width or more
    shifts every bit out, a negative one nothing."""
    bits = np.iinfo(values.dtype).bits
    signed = np.issubdtype(values.dtype, np.signedinteger)
    out = []
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        count = max(count, 0)
        if left:
            moved = 0 if count >= bits else (value << count) % (1 << bits)
            moved -= (1 << bits) if signed and moved >= 1 << (bits - 1) else 0
        else:
            moved = value >> count if count < bits else (-1 if value < 0 else 0)
        out.append(moved)
    return np.array(out, dtype=values.dtype)


@pytest.mark.parametrize("engine", [None, "ONNXRUNTIME"])
@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda t: t.__name__)
def test_bitwise_shifts_over_each_types_whole_range(dtype: Any, engine: str | None) -> None:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(info.bits)
    values = np.concatenate([np.array([0, 1, info.max, info.min, 5], dtype=dtype),
                             rng.integers(info.min, info.max, 300, dtype=dtype, endpoint=True)])
    counts = np.concatenate([np.array([0, 1, 1, 1, info.bits], dtype=dtype),
                             rng.integers(0, info.bits + 3, 300).astype(dtype)])
    if info.min < 0:
        counts[-3:] = np.array([-1, -4, 2], dtype=dtype)
    params = [opset.parameter([len(values)], dtype) for _ in range(2)]
    for left in (True, False):
        shift = opset.bitwise_left_shift if left else opset.bitwise_right_shift
        model = ov.Model([shift(*params)], params, "shift")
        compiled = ov.Core().compile_model(model, "CPU", {"ENGINE": engine} if engine else {})
        got = np.asarray(compiled([values, counts])[0])
        np.testing.assert_array_equal(got, _shifted(values, counts, left))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=lambda t: t.__name__)
def test_bitwise_shifts_match_openvinos_cpu_on_8_bits_and_read_from_an_ir(tmp_path: Path,
                                                                           dtype: Any) -> None:
    """On 8-bit values and counts below the width (OpenVINO's CPU shifts 32- and 64-bit values in
    32-bit signed arithmetic, where the test above holds inferplex to C's)."""
    values = np.random.default_rng(1).integers(np.iinfo(dtype).min, np.iinfo(dtype).max, 64, dtype=dtype)
    counts = np.random.default_rng(2).integers(0, 8, 64).astype(dtype)
    for name in ("bitwise_left_shift", "bitwise_right_shift"):
        def build(module: Any, a: Any, b: Any, name: str = name) -> Any:
            return getattr(module, name)(a, b)

        reference = _graph(openvino, ov_opset15, build, [values, counts])
        want = _results(openvino.Core().compile_model(reference, "CPU"), [values, counts], 1)
        path = tmp_path / f"{name}.xml"
        openvino.save_model(reference, str(path))
        _check(_results(ov.Core().compile_model(str(path), "CPU"), [values, counts], 1), want, 0)


# --- convert_promote_types -----------------------------------------------------------------------------

TYPE_NAMES = ["boolean", "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f16", "bf16", "f32", "f64"]


@pytest.mark.parametrize(("unsafe", "scalars"), [(False, False), (True, False), (False, True), (True, True)])
def test_convert_promote_types_gives_openvinos_type_or_refuses_where_it_does(unsafe: bool,
                                                                            scalars: bool) -> None:
    """Every pair of element types (and with pytorch_scalar_promotion, a scalar on either side)."""
    shapes = [([2], [2]), ([2], []), ([], [2])] if scalars else [([2], [2])]
    for left, right in ((a, b) for a in TYPE_NAMES for b in TYPE_NAMES):
        for left_shape, right_shape in shapes:
            ports = (ov_opset14.parameter(left_shape, getattr(openvino.Type, left)),
                     ov_opset14.parameter(right_shape, getattr(openvino.Type, right)))
            try:
                node = ov_opset14.convert_promote_types(*ports, unsafe, scalars)
                want = [node.get_output_element_type(i).get_type_name() for i in range(2)]
            except RuntimeError:
                want = None
            ours = (opset.parameter(left_shape, left), opset.parameter(right_shape, right))
            if want is None:
                with pytest.raises(InputError, match="convert_promote_types"):
                    opset.convert_promote_types(*ours, unsafe, scalars)
            else:
                built = opset.convert_promote_types(*ours, unsafe, scalars)
                types = [built.get_output_element_type(i).get_type_name() for i in range(2)]
                assert types == want, (left, right)


def test_convert_promote_types_converts_values_and_reads_from_an_ir(tmp_path: Path) -> None:
    feeds = [np.array([1, 200, 7], np.uint8), np.array([-3, 4, 5], np.int8)]
    reference = _graph(openvino, ov_opset14, lambda m, a, b: m.convert_promote_types(a, b, True), feeds)
    want = _results(openvino.Core().compile_model(reference, "CPU"), feeds, 2)
    assert want[0].dtype == np.int16
    path = tmp_path / "promote.xml"
    openvino.save_model(reference, str(path))
    _check(_results(ov.Core().compile_model(str(path), "CPU"), feeds, 2), want, 0)
    same = [np.ones(3, F32), np.zeros(3, F32)]  # of one type already: both pass through
    model = _graph(ov, opset, lambda m, a, b: m.convert_promote_types(a, b), same)
    for engine in ("OPENVINO", "ONNXRUNTIME"):
        _check(_results(ov.Core().compile_model(model, "CPU", {"ENGINE": engine}), same, 2), same, 0)
