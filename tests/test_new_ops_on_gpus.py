"""The opset functions added for OpenVINO parity (``_opsets/recent.py`` and the new arguments of
gather, interpolate and reverse_sequence) on GPU.0: emulated, and on CUDA under the ``gpu`` marker.
References are numpy's, or inferplex's CPU at f32 where the op is a resampling (whose CPU results
``tests/test_opset_more_ops2.py`` checks against OpenVINO's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import inferplex as ov
from inferplex import opset

RNG = np.random.default_rng(29)
F32 = np.float32


def _run(core: ov.Core, device: str, build: Callable[..., Any], *arrays: np.ndarray) -> list[np.ndarray]:
    params = [opset.parameter(list(a.shape), a.dtype, name=f"in{i}") for i, a in enumerate(arrays)]
    node = build(*params)
    outputs = [node.output(i) for i in range(node.get_output_size())]
    config = {"INFERENCE_PRECISION_HINT": "f32"}
    compiled = core.compile_model(ov.Model(outputs, params, "op"), device, config)
    return [np.asarray(v) for v in compiled(list(arrays)).to_tuple()]


def _gpu_and_cpu(core: ov.Core, build: Callable[..., Any],
                 *arrays: np.ndarray) -> tuple[list[Any], list[Any]]:
    return _run(core, "GPU.0", build, *arrays), _run(core, "CPU", build, *arrays)


def _wide(dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(dtype)
    values = RNG.integers(int(info.min), int(info.max), shape, dtype=dtype, endpoint=True)
    values.reshape(-1)[:2] = [info.min, info.max]
    return values


def test_resampling_ops_on_the_gpu_match_the_cpu(emulated_or_cuda_core: ov.Core) -> None:
    core = emulated_or_cuda_core
    image = RNG.standard_normal((2, 3, 5, 6)).astype(F32)
    grid = RNG.uniform(-1.3, 1.3, (2, 4, 7, 2)).astype(F32)
    for mode in ("bilinear", "bicubic", "nearest"):
        attributes = {"mode": mode, "padding_mode": "reflection", "align_corners": False}
        gpu, cpu = _gpu_and_cpu(core, lambda x, g, a=attributes: opset.grid_sample(x, g, a), image, grid)
        np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-4, atol=1e-4, err_msg=mode)
    picture = RNG.standard_normal((1, 2, 7, 9)).astype(F32)
    for mode in ("bilinear_pillow", "bicubic_pillow"):
        gpu, cpu = _gpu_and_cpu(core, lambda x, m=mode: opset.interpolate(
            x, np.array([4, 13], np.int64), m, "sizes", axes=np.array([2, 3], np.int64)), picture)
        np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-5, atol=1e-5, err_msg=mode)


def test_index_and_integer_ops_on_the_gpu_match_numpy(emulated_or_cuda_core: ov.Core) -> None:
    core = emulated_or_cuda_core
    data = RNG.standard_normal((2, 3, 4, 5)).astype(F32)
    indices = RNG.integers(-4, 4, (2, 3, 6)).astype(np.int64)
    got = _run(core, "GPU.0", lambda x, i: opset.gather(x, i, np.int64(2), 2), data, indices)[0]
    expected = np.stack([np.take(data[b, c], indices[b, c], axis=0) for b in range(2) for c in range(3)])
    np.testing.assert_array_equal(got, expected.reshape(2, 3, 6, 5))
    sequence = RNG.standard_normal((3, 4, 5)).astype(F32)
    lengths = np.array([2, 5, 1], np.int32)
    reversed_ = sequence.copy()
    for b, length in enumerate(lengths):
        reversed_[b, :, :length] = sequence[b, :, :length][:, ::-1]
    np.testing.assert_array_equal(
        _run(core, "GPU.0", lambda x: opset.reverse_sequence(x, lengths, 0, 2), sequence)[0], reversed_)
    for dtype in (np.int8, np.int32, np.int64, np.uint32):
        left, right = _wide(dtype, (3, 5)), _wide(dtype, (5,))
        for function, reference in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                                    ("bitwise_xor", np.bitwise_xor)):
            got = _run(core, "GPU.0", lambda a, b, f=function: getattr(opset, f)(a, b), left, right)[0]
            np.testing.assert_array_equal(got, reference(left, right), err_msg=f"{function} {dtype}")
        np.testing.assert_array_equal(_run(core, "GPU.0", opset.bitwise_not, left)[0], np.invert(left))
    values = np.array([[3, 1, 3], [2, 1, 2]], np.int32)
    unique, _, inverse, counts = _run(core, "GPU.0", lambda x: opset.unique(x, None, True, "i32", "i32"),
                                      values)
    np.testing.assert_array_equal(unique, [1, 2, 3])
    np.testing.assert_array_equal(counts, [2, 2, 2])
    np.testing.assert_array_equal(unique[inverse], values.reshape(-1))
    np.testing.assert_array_equal(_run(core, "GPU.0", lambda x: opset.eye(
        np.int64(3), np.int64(4), np.int64(1), "f32"), np.zeros(1, F32))[0], np.eye(3, 4, 1, dtype=F32))
