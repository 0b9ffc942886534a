"""Soft NMS: ``non_max_suppression`` (opsets 5 and 9) with a ``soft_nms_sigma`` above 0, against
OpenVINO's CPU on the same graph built with ``openvino.opset9``: selected indices, their decayed
scores and the valid count, on both of the CPU device's engines, both box encodings and result
orders; and on an emulated GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex import opset9
from inferplex.errors import InputError

from conftest import same_on_the_gpu

openvino = pytest.importorskip("openvino")
ov_opset9 = pytest.importorskip("openvino.opset9")

RNG = np.random.default_rng(5)
BATCHES, CLASSES, BOXES = 2, 2, 30
_CORNERS = RNG.uniform(0, 20, (BATCHES, BOXES, 2))
BOX_DATA = np.concatenate([_CORNERS, _CORNERS + RNG.uniform(2, 8, (BATCHES, BOXES, 2))],
                          -1).astype(np.float32)
SCORES = RNG.uniform(0, 1, (BATCHES, CLASSES, BOXES)).astype(np.float32)

# max_output_boxes_per_class, iou_threshold, score_threshold, soft_nms_sigma,
# sort_result_descending, box_encoding
CASES = {"by class": (10, 0.3, 0.05, 0.5, False, "corner"), "sorted": (5, 0.7, 0.2, 0.1, True, "corner"),
         "centres, every box": (100, 0.0, 0.0, 1.0, False, "center")}


def _graph(lib: Any, module: Any, case: str) -> Any:
    limit, iou, least, sigma, ordered, encoding = CASES[case]
    boxes = module.parameter(list(BOX_DATA.shape), np.float32)
    scores = module.parameter(list(SCORES.shape), np.float32)
    node = module.non_max_suppression(boxes, scores, module.constant(np.array([limit], np.int64)),
                                      module.constant(np.float32(iou)), module.constant(np.float32(least)),
                                      module.constant(np.float32(sigma)), box_encoding=encoding,
                                      sort_result_descending=ordered)
    return lib.Model([node.output(i) for i in range(3)], [boxes, scores], "soft_nms")


def _outputs(compiled: Any) -> list[np.ndarray]:
    results = compiled([BOX_DATA, SCORES])
    return [np.asarray(results[i]) for i in range(3)]


@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_soft_nms_matches_openvinos_cpu(case: str, engine: str) -> None:
    want = _outputs(openvino.Core().compile_model(_graph(openvino, ov_opset9, case), "CPU"))
    got = _outputs(ov.Core().compile_model(_graph(ov, opset9, case), "CPU", {"ENGINE": engine}))
    assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(got[2], want[2])
    picked = SCORES[want[0][:, 0], want[0][:, 1], want[0][:, 2]]
    assert np.any(want[1][:, 2] < picked - 1e-6)  # some scores decayed before their box was selected


def test_soft_nms_runs_on_an_emulated_gpu(emulated_core: ov.Core) -> None:
    same_on_the_gpu(emulated_core, _graph(ov, opset9, "sorted"), [BOX_DATA, SCORES], 1e-6)


def test_soft_nms_needs_a_constant_sigma() -> None:
    boxes, scores = opset9.parameter([1, 4, 4], np.float32), opset9.parameter([1, 1, 4], np.float32)
    with pytest.raises(InputError, match="soft_nms_sigma as one constant number"):
        opset9.non_max_suppression(boxes, scores, 2, 0.5, 0.0, opset9.parameter([1], np.float32))
