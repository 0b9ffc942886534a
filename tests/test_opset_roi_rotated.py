"""``roi_align_rotated`` (OpenVINO's opset 15) against OpenVINO's CPU at f32 on the same graph built
with ``openvino.opset15``, on both of the CPU device's engines: fixed and adaptive sampling grids
(regions of different sizes, so the adaptive grids differ), both rotation senses, regions partly
or wholly outside the image and of no height; read from an IR OpenVINO saved; and on an emulated
GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex import opset
from inferplex.errors import InputError

from conftest import same_on_the_gpu

openvino = pytest.importorskip("openvino")
ov_opset15 = pytest.importorskip("openvino.opset15")

F32_HINT = {"INFERENCE_PRECISION_HINT": "f32"}
RNG = np.random.default_rng(5)
DATA = RNG.standard_normal((2, 3, 12, 16)).astype(np.float32)


def _regions(count: int) -> np.ndarray:
    """Regions [count, 5] in a 32 x 24 image (the feature map at scale 0.5), most inside it."""
    rois = np.stack([RNG.uniform(0, 32, count), RNG.uniform(0, 24, count), RNG.uniform(1, 20, count),
                     RNG.uniform(1, 16, count), RNG.uniform(-3.2, 3.2, count)], axis=1).astype(np.float32)
    rois[0] = [16, 12, 10, 6, 0.0]  # upright
    rois[1] = [4, 30, 12, 0.0, 0.7]  # no height, and partly outside
    rois[2] = [80, 70, 6, 6, 0.3]  # wholly outside
    return rois


ROIS = _regions(9)
BATCH = RNG.integers(0, 2, len(ROIS)).astype(np.int32)

# pooled_h, pooled_w, sampling_ratio, spatial_scale, clockwise_mode
CASES = {"fixed grid": (2, 3, 2, 0.5, False), "adaptive grid": (3, 2, 0, 0.5, True),
         "adaptive grid, full scale": (4, 4, 0, 1.0, False), "one bin": (1, 1, 3, 0.5, True)}


def _graph(lib: Any, module: Any, case: str) -> Any:
    pooled_h, pooled_w, ratio, scale, clockwise = CASES[case]
    data = module.parameter(list(DATA.shape), np.float32)
    rois = module.parameter([len(ROIS), 5], np.float32)
    batch = module.parameter([len(ROIS)], np.int32)
    node = module.roi_align_rotated(data, rois, batch, pooled_h, pooled_w, ratio, scale, clockwise)
    return lib.Model([node.output(0)], [data, rois, batch], "rotated")


def _openvinos(case: str) -> np.ndarray:
    compiled = openvino.Core().compile_model(_graph(openvino, ov_opset15, case), "CPU", F32_HINT)
    return np.asarray(compiled([DATA, ROIS, BATCH])[0])


@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_roi_align_rotated_matches_openvinos_cpu(case: str, engine: str) -> None:
    want = _openvinos(case)
    compiled = ov.Core().compile_model(_graph(ov, opset, case), "CPU", {**F32_HINT, "ENGINE": engine})
    got = np.asarray(compiled([DATA, ROIS, BATCH])[0])
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.abs(want[0]).max() > 0.1 and not want[2].any()  # a region inside, and one outside


def test_roi_align_rotated_read_from_an_ir(tmp_path: Path) -> None:
    path = tmp_path / "rotated.xml"
    openvino.save_model(_graph(openvino, ov_opset15, "adaptive grid"), str(path))
    got = np.asarray(ov.Core().compile_model(str(path), "CPU", F32_HINT)([DATA, ROIS, BATCH])[0])
    np.testing.assert_allclose(got, _openvinos("adaptive grid"), rtol=1e-5, atol=1e-5)


def test_roi_align_rotated_runs_on_an_emulated_gpu(emulated_core: ov.Core) -> None:
    same_on_the_gpu(emulated_core, _graph(ov, opset, "adaptive grid"), [DATA, ROIS, BATCH])


def test_roi_align_rotated_refusals() -> None:
    data, batch = opset.parameter([1, 3, 8, 8], np.float32), opset.parameter([2], np.int32)
    rois = opset.parameter([2, 5], np.float32)
    with pytest.raises(InputError, match=r"rois \[N, 5\] \(centre x, centre y, width, height, angle\)"):
        opset.roi_align_rotated(data, opset.parameter([2, 4], np.float32), batch, 2, 2, 2, 1.0, False)
    with pytest.raises(InputError, match=r"data \[batch, C, H, W\]"):
        opset.roi_align_rotated(opset.parameter([3, 8, 8], np.float32), rois, batch, 2, 2, 2, 1.0, False)
    with pytest.raises(InputError, match=r"sampling_ratio of 0 or more, got 2, 2 and -1"):
        opset.roi_align_rotated(data, rois, batch, 2, 2, -1, 1.0, False)
