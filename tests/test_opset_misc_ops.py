"""OpenVINO's Fourier transforms, block and window ops, embedding bags and CTC decoders built with
``inferplex.opset``, against numpy computing each op as OpenVINO's specification defines it
(``numpy.fft`` for the transforms: OpenVINO's inverse transforms divide by the signal's size)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex import opset, opset1, opset8
from inferplex.errors import InputError

RNG = np.random.default_rng(17)
F32 = np.float32


def _outputs(build: Callable[[Any], Any], data: np.ndarray, device: str = "CPU") -> list[np.ndarray]:
    param = opset.parameter(list(data.shape), data.dtype, name="x")
    node = build(param)
    model = ov.Model([node.output(i) for i in range(node.get_output_size())], [param], "op")
    return list(ov.Core().compile_model(model, device)([data]).to_tuple())


def _one(build: Callable[[Any], Any], data: np.ndarray, device: str = "CPU") -> np.ndarray:
    return _outputs(build, data, device)[0]


def _complex(value: np.ndarray) -> np.ndarray:
    return value[..., 0] + 1j * value[..., 1]


SIGNAL = RNG.standard_normal((2, 3, 4, 2)).astype(F32)
REAL = RNG.standard_normal((2, 3, 5)).astype(F32)
SPECTRUM = _complex(SIGNAL)


# --- Fourier transforms ----------------------------------------------------------------------------


@pytest.mark.parametrize(("build", "expected"), [
    (lambda x: opset.dft(x, [-1]), np.fft.fft(SPECTRUM, axis=2)),
    (lambda x: opset.dft(x, [0, 2]), np.fft.fftn(SPECTRUM, axes=[0, 2])),
    (lambda x: opset.dft(x, [2, 0], [-1, 1]), np.fft.fftn(SPECTRUM, s=[4, 1], axes=[2, 0])),
    (lambda x: opset.idft(x, [1, 2], [5, 3]), np.fft.ifftn(SPECTRUM, s=[5, 3], axes=[1, 2])),
    (lambda x: opset.idft(x, [1]), np.fft.ifft(SPECTRUM, axis=1)),
], ids=["last", "two axes", "trimmed", "padded inverse", "inverse"])
def test_dft_and_idft(build: Callable[[Any], Any], expected: np.ndarray) -> None:
    got = _one(build, SIGNAL)
    assert got.shape == (*expected.shape, 2)
    np.testing.assert_allclose(_complex(got), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("build", "expected"), [
    (lambda x: opset.rdft(x, [1, 2]), np.fft.rfftn(REAL, axes=[1, 2])),
    (lambda x: opset.rdft(x, [2, 1]), np.fft.rfftn(REAL, axes=[2, 1])),
    (lambda x: opset.rdft(x, [-1], [8]), np.fft.rfft(REAL, n=8, axis=2)),
    (lambda x: opset.rdft(x, [2], [4]), np.fft.rfft(REAL, n=4, axis=2)),
], ids=["two axes", "half on axis 1", "padded", "trimmed"])
def test_rdft(build: Callable[[Any], Any], expected: np.ndarray) -> None:
    got = _one(build, REAL)
    assert got.shape == (*expected.shape, 2)
    np.testing.assert_allclose(_complex(got), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("build", "expected"), [
    (lambda x: opset.irdft(x, [2]), np.fft.irfft(SPECTRUM, axis=2)),
    (lambda x: opset.irdft(x, [1, 2]), np.fft.irfftn(SPECTRUM, axes=[1, 2])),
    (lambda x: opset.irdft(x, [2], [9]), np.fft.irfft(SPECTRUM, n=9, axis=2)),
    (lambda x: opset.irdft(x, [2], [3]), np.fft.irfft(SPECTRUM, n=3, axis=2)),
    (lambda x: opset.irdft(x, [-1, 1], [3, 5]), np.fft.irfftn(SPECTRUM, s=[3, 5], axes=[2, 1])),
], ids=["last", "two axes", "padded", "trimmed", "sized"])
def test_irdft(build: Callable[[Any], Any], expected: np.ndarray) -> None:
    got = _one(build, SIGNAL)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_transforms_on_the_emulated_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    got = _one(lambda x: opset.idft(opset.dft(x, [1, 2]), [2]), SIGNAL, "GPU.0")
    np.testing.assert_allclose(_complex(got), np.fft.fft(SPECTRUM, axis=1), rtol=1e-4, atol=1e-4)
    real = _one(lambda x: opset.irdft(opset.rdft(x, [2]), [2], [5]), REAL, "GPU.0")
    np.testing.assert_allclose(real, REAL, rtol=1e-4, atol=1e-4)


def test_transform_arguments_are_checked() -> None:
    x = opset.parameter([2, 4, 2], F32)
    with pytest.raises(InputError, match="distinct axes"):
        opset.dft(x, [2])
    with pytest.raises(InputError, match="one a transformed axis"):
        opset.dft(x, [1], [4, 4])
    with pytest.raises(InputError, match="last axis of 2"):
        opset.idft(opset.parameter([2, 4, 3], F32), [1])
    with pytest.raises(InputError, match="needs its signal_size"):
        opset.irdft(opset.parameter([2, -1, 2], F32), [1])


# --- blocks and windows -----------------------------------------------------------------------------


def test_grn_and_bucketize() -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(F32)
    np.testing.assert_allclose(_one(lambda p: opset.grn(p, 0.5), x),
                               x / np.sqrt((x ** 2).sum(axis=1, keepdims=True) + 0.5), rtol=1e-5)
    values = np.array([[-2, -1, -0.5, 0], [0.25, 0.5, 1, 3]], F32)
    bounds = np.array([-1, 0, 0.5, 1], F32)
    right = _one(lambda p: opset.bucketize(p, bounds), values)
    assert right.dtype == np.int64
    np.testing.assert_array_equal(right, np.searchsorted(bounds, values, side="left"))
    left = _one(lambda p: opset.bucketize(p, bounds, "i32", with_right_bound=False), values)
    assert left.dtype == np.int32
    np.testing.assert_array_equal(left, np.searchsorted(bounds, values, side="right"))


def _batch_to_space(x: np.ndarray, blocks: list[int], begin: list[int], end: list[int]) -> np.ndarray:
    spatial = x.ndim - 1
    split = x.reshape(*blocks[1:], x.shape[0] // int(np.prod(blocks)), *x.shape[1:])
    order = [spatial] + [i for axis in range(spatial) for i in (spatial + 1 + axis, axis)]
    grown = (d * b for d, b in zip(x.shape[1:], blocks[1:], strict=True))
    merged = split.transpose(order).reshape(-1, *grown)
    return merged[tuple(slice(b, d - e) for b, e, d in zip(begin, end, merged.shape, strict=True))]


def _space_to_batch(x: np.ndarray, blocks: list[int], begin: list[int], end: list[int]) -> np.ndarray:
    padded = np.pad(x, list(zip(begin, end, strict=True)))
    pairs = zip(padded.shape[1:], blocks[1:], strict=True)
    shape = [padded.shape[0], *(v for d, b in pairs for v in (d // b, b))]
    rank = x.ndim
    order = [2 * axis for axis in range(1, rank)] + [0] + [2 * axis - 1 for axis in range(1, rank)]
    moved = padded.reshape(shape).transpose(order)
    return moved.reshape(-1, *(d // b for d, b in zip(padded.shape[1:], blocks[1:], strict=True)))


@pytest.mark.parametrize(("blocks", "begin", "end"), [
    ([1, 1, 2, 2], [0, 0, 0, 1], [0, 0, 1, 0]), ([1, 2, 2, 1], [0, 0, 0, 0], [0, 1, 0, 0])])
def test_batch_to_space_and_space_to_batch(blocks: list[int], begin: list[int], end: list[int]) -> None:
    x = RNG.standard_normal((8, 3, 2, 3)).astype(F32)
    np.testing.assert_array_equal(_one(lambda p: opset.batch_to_space(p, blocks, begin, end), x),
                                  _batch_to_space(x, blocks, begin, end))
    y = RNG.standard_normal((2, 3, 5, 4)).astype(F32)
    pads_end = [0, 1, 1, 0] if blocks[1] == 2 else [0, 0, 1, 0]
    np.testing.assert_array_equal(_one(lambda p: opset.space_to_batch(p, blocks, [0, 0, 0, 0], pads_end), y),
                                  _space_to_batch(y, blocks, [0, 0, 0, 0], pads_end))


def _windows(size: int, out: int) -> list[slice]:
    return [slice((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive(x: np.ndarray, sizes: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Adaptive average, max and argmax (flat spatial index, the first of ties) of [N, C, spatial...]."""
    spatial = x.shape[2:]
    flat_index = np.arange(int(np.prod(spatial))).reshape(spatial)
    shape = (*x.shape[:2], *sizes)
    mean, top, where = np.zeros(shape, F32), np.zeros(shape, F32), np.zeros(shape, np.int64)
    for corner in itertools.product(*(range(s) for s in sizes)):
        box = tuple(_windows(n, o)[i] for n, o, i in zip(spatial, sizes, corner, strict=True))
        block = x[(slice(None), slice(None), *box)].reshape(*x.shape[:2], -1)
        mean[(..., *corner)] = block.mean(-1)
        top[(..., *corner)] = block.max(-1)
        where[(..., *corner)] = flat_index[box].reshape(-1)[block.argmax(-1)]
    return mean, top, where


@pytest.mark.parametrize(("shape", "sizes"), [((2, 3, 7, 5), [3, 4]), ((1, 2, 5), [3]),
                                              ((1, 2, 5, 4, 3), [2, 3, 2])])
def test_adaptive_pools(shape: tuple[int, ...], sizes: list[int]) -> None:
    x = np.round(RNG.standard_normal(shape), 1).astype(F32)  # ties: the first index counts
    mean, top, where = _adaptive(x, sizes)
    np.testing.assert_allclose(_one(lambda p: opset.adaptive_avg_pool(p, sizes), x), mean, rtol=1e-5,
                               atol=1e-6)
    values, indices = _outputs(lambda p: opset.adaptive_max_pool(p, sizes), x)
    np.testing.assert_array_equal(values, top)
    np.testing.assert_array_equal(indices, where)
    assert _outputs(lambda p: opset.adaptive_max_pool(p, sizes, "i32"), x)[1].dtype == np.int32


def test_adaptive_pools_need_static_spatial_dims() -> None:
    with pytest.raises(InputError, match="spatial dims static"):
        opset.adaptive_avg_pool(opset.parameter([1, 3, -1, 4], F32), [2, 2])
    with pytest.raises(InputError, match="one size a spatial dim"):
        opset.adaptive_max_pool(opset.parameter([1, 3, 4, 4], F32), [2])


def _patches(x: np.ndarray, sizes: list[int], strides: list[int], rates: list[int], mode: str) -> np.ndarray:
    pads = [(0, 0), (0, 0)]
    for length, size, stride, rate in zip(x.shape[2:], sizes, strides, rates, strict=True):
        span = (size - 1) * rate + 1
        out = -(-length // stride) if mode != "valid" else (length - span) // stride + 1
        total = max((out - 1) * stride + span - length, 0) if mode != "valid" else 0
        first = total // 2 if mode == "same_upper" else total - total // 2
        pads.append((first, total - first))
    padded = np.pad(x, pads)
    rows = (padded.shape[2] - (sizes[0] - 1) * rates[0] - 1) // strides[0] + 1
    cols = (padded.shape[3] - (sizes[1] - 1) * rates[1] - 1) // strides[1] + 1
    out = np.zeros((x.shape[0], sizes[0] * sizes[1] * x.shape[1], rows, cols), x.dtype)
    for r, c in itertools.product(range(rows), range(cols)):
        patch = padded[:, :, r * strides[0]:r * strides[0] + (sizes[0] - 1) * rates[0] + 1:rates[0],
                       c * strides[1]:c * strides[1] + (sizes[1] - 1) * rates[1] + 1:rates[1]]
        out[:, :, r, c] = patch.transpose(0, 2, 3, 1).reshape(x.shape[0], -1)
    return out


@pytest.mark.parametrize("mode", ["valid", "same_upper", "same_lower"])
def test_extract_image_patches(mode: str) -> None:
    x = RNG.standard_normal((2, 3, 7, 6)).astype(F32)
    for sizes, strides, rates in (([3, 2], [2, 3], [1, 2]), ([2, 2], [3, 2], [2, 1])):
        got = _one(lambda p, s=sizes, t=strides, r=rates: opset.extract_image_patches(p, s, t, r, mode), x)
        np.testing.assert_array_equal(got, _patches(x, sizes, strides, rates, mode))


# --- embedding bags and CTC decoders --------------------------------------------------------------


TABLE = RNG.standard_normal((6, 3)).astype(F32)
INDICES = np.array([0, 2, 3, 3, 5, 1], np.int32)
WEIGHTS = RNG.random(6).astype(F32)


def _bags(groups: list[list[int]], default: int | None, weights: np.ndarray | None) -> np.ndarray:
    rows = []
    for group in groups:
        if not group:
            rows.append(TABLE[default] if default is not None else np.zeros(3, F32))
            continue
        rows.append(sum(TABLE[INDICES[i]] * (weights[i] if weights is not None else 1) for i in group))
    return np.stack(rows)


@pytest.mark.parametrize(("default", "weights"), [(None, None), (4, WEIGHTS)])
def test_embedding_bags(default: int | None, weights: np.ndarray | None) -> None:
    offsets = np.array([0, 2, 2, 5], np.int32)
    given = np.int32(default) if default is not None else None
    groups = [[0, 1], [], [2, 3, 4], [5]]
    got = _one(lambda t: opset.embedding_bag_offsets_sum(t, INDICES, offsets, given, weights), TABLE)
    np.testing.assert_allclose(got, _bags(groups, default, weights), rtol=1e-5)
    segments = np.array([0, 0, 2, 2, 2, 4], np.int32)
    got = _one(lambda t: opset.embedding_segments_sum(t, INDICES, segments, np.int32(5), given, weights),
               TABLE)
    np.testing.assert_allclose(got, _bags([[0, 1], [], [2, 3, 4], [], [5]], default, weights), rtol=1e-5)
    packed_weights = weights.reshape(3, 2) if weights is not None else None
    got = _one(lambda t: opset.embedding_bag_packed_sum(t, INDICES.reshape(3, 2), packed_weights), TABLE)
    np.testing.assert_allclose(got, _bags([[0, 1], [2, 3], [4, 5]], None, weights), rtol=1e-5)


def _greedy(best: np.ndarray, lengths: list[int], blank: int, merge: bool) -> np.ndarray:
    out = np.full(best.shape, -1, np.int64)
    for n, length in enumerate(lengths):
        kept = [c for t, c in enumerate(best[n, :length])
                if c != blank and not (merge and t > 0 and c == best[n, t - 1])]
        out[n, :len(kept)] = kept
    return out


@pytest.mark.parametrize("merge", [True, False])
def test_ctc_greedy_decoders(merge: bool) -> None:
    steps, batch, classes = 7, 3, 4
    data = RNG.standard_normal((steps, batch, classes)).astype(F32)
    data[2:4, 0] = data[1, 0]  # repeats
    data[5, 1] = [0, 0, 0, 9]  # a blank
    lengths = [7, 4, 6]
    mask = (np.arange(steps)[:, None] < np.array(lengths)[None]).astype(F32)
    best = data.argmax(-1).T
    got = _one(lambda p: opset.ctc_greedy_decoder(p, mask, merge), data)
    expected = _greedy(best, lengths, classes - 1, merge)[:, :, None, None].astype(F32)
    np.testing.assert_array_equal(got, expected)
    major = np.ascontiguousarray(data.transpose(1, 0, 2))
    for blank in (None, 0):
        given = np.int32(blank) if blank is not None else None
        decoded, counts = _outputs(lambda p, b=given: opset.ctc_greedy_decoder_seq_len(
            p, np.array(lengths, np.int32), b, merge), major)
        expected = _greedy(best, lengths, classes - 1 if blank is None else blank, merge)
        assert decoded.dtype == np.int32 and counts.dtype == np.int32
        np.testing.assert_array_equal(decoded, expected)
        np.testing.assert_array_equal(counts, (expected >= 0).sum(1))


def test_bags_and_decoders_on_the_emulated_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    offsets = np.array([0, 2, 2, 5], np.int32)
    got = _one(lambda t: opset.embedding_bag_offsets_sum(t, INDICES, offsets, np.int32(1)), TABLE, "GPU.0")
    np.testing.assert_allclose(got, _bags([[0, 1], [], [2, 3, 4], [5]], 1, None), rtol=1e-5)
    x = RNG.standard_normal((2, 3, 7, 5)).astype(F32)
    np.testing.assert_allclose(_one(lambda p: opset.adaptive_avg_pool(p, [3, 4]), x, "GPU.0"),
                               _adaptive(x, [3, 4])[0], rtol=1e-5, atol=1e-6)


def test_each_opset_module_offers_the_new_functions() -> None:
    early = {"dft", "idft", "grn", "bucketize", "batch_to_space", "space_to_batch",
             "embedding_bag_offsets_sum", "embedding_bag_packed_sum", "embedding_segments_sum",
             "extract_image_patches", "ctc_greedy_decoder", "ctc_greedy_decoder_seq_len"}
    assert early <= set(opset1.__all__) and early <= set(opset8.__all__)
    assert {"adaptive_avg_pool", "adaptive_max_pool"} <= set(opset8.__all__)
    assert not hasattr(opset1, "adaptive_avg_pool") and not hasattr(opset8, "rdft")
    assert {"rdft", "irdft"} <= set(opset.__all__)
