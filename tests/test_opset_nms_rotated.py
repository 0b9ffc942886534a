"""``nms_rotated`` (OpenVINO's opset 13) against OpenVINO's CPU on the same graph built with
``openvino.opset13``: selected indices, scores and the valid count, their types, on both of the CPU
device's engines, for both result orders and rotation senses, several thresholds and limits, and
boxes that coincide, nest, touch or have no area; read from an IR OpenVINO saved; and on an
emulated GPU."""

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
ov_opset13 = pytest.importorskip("openvino.opset13")

RNG = np.random.default_rng(11)
BATCHES, CLASSES, BOXES = 2, 3, 24


def _boxes() -> np.ndarray:
    boxes = np.stack([RNG.uniform(0, 20, (BATCHES, BOXES)), RNG.uniform(0, 20, (BATCHES, BOXES)),
                      RNG.uniform(2, 10, (BATCHES, BOXES)), RNG.uniform(2, 10, (BATCHES, BOXES)),
                      RNG.uniform(-3, 3, (BATCHES, BOXES))], axis=-1).astype(np.float32)
    boxes[0, 1] = boxes[0, 0]  # the same box twice
    boxes[0, 2] = [*boxes[0, 0, :2], boxes[0, 0, 2] / 2, boxes[0, 0, 3] / 2, boxes[0, 0, 4]]  # inside it
    boxes[1, 0], boxes[1, 1] = [5, 5, 4, 4, 0], [9, 5, 4, 4, 0]  # edge to edge
    boxes[1, 2] = [12, 12, 0, 5, 0.4]  # no area
    return boxes


BOX_DATA = _boxes()
SCORES = RNG.uniform(0, 1, (BATCHES, CLASSES, BOXES)).astype(np.float32)

# sort_result_descending, clockwise, max_output_boxes_per_class, iou_threshold, score_threshold
CASES = {"sorted": (True, True, 5, 0.3, 0.2), "by class": (False, True, 100, 0.1, 0.0),
         "counterclockwise": (True, False, 3, 0.5, 0.5),
         "every overlap suppresses": (True, True, 100, 0.0, 0.0),
         "few above the score threshold": (False, False, 100, 0.4, 0.9)}


def _graph(lib: Any, module: Any, case: str, output_type: str = "i64") -> Any:
    ordered, clockwise, limit, iou, least = CASES[case]
    boxes = module.parameter(list(BOX_DATA.shape), np.float32)
    scores = module.parameter(list(SCORES.shape), np.float32)
    node = module.nms_rotated(boxes, scores, np.int64(limit), np.float32(iou), np.float32(least), ordered,
                              output_type, clockwise)
    return lib.Model([node.output(i) for i in range(3)], [boxes, scores], "nms_rotated")


def _outputs(compiled: Any) -> list[np.ndarray]:
    results = compiled([BOX_DATA, SCORES])
    return [np.asarray(results[i]) for i in range(3)]


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=0)
    np.testing.assert_array_equal(got[2], want[2])


@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_nms_rotated_matches_openvinos_cpu(case: str, engine: str) -> None:
    want = _outputs(openvino.Core().compile_model(_graph(openvino, ov_opset13, case), "CPU"))
    got = _outputs(ov.Core().compile_model(_graph(ov, opset, case), "CPU", {"ENGINE": engine}))
    _same(got, want)
    assert 0 < len(want[0]) < BATCHES * CLASSES * BOXES  # some kept, some suppressed


def test_nms_rotated_i32_outputs_and_no_box_kept() -> None:
    want = _outputs(openvino.Core().compile_model(_graph(openvino, ov_opset13, "sorted", "i32"), "CPU"))
    _same(_outputs(ov.Core().compile_model(_graph(ov, opset, "sorted", "i32"), "CPU")), want)
    boxes = opset.parameter(list(BOX_DATA.shape), np.float32)
    scores = opset.parameter(list(SCORES.shape), np.float32)
    none = opset.nms_rotated(boxes, scores, np.int64(0), np.float32(0.5), np.float32(0.0))
    indices, selected_scores, valid = _outputs(ov.Core().compile_model(
        ov.Model([none.output(i) for i in range(3)], [boxes, scores]), "CPU"))
    assert indices.shape == (0, 3) and selected_scores.shape == (0, 3) and valid.tolist() == [0]


def test_nms_rotated_read_from_an_ir(tmp_path: Path) -> None:
    reference = _graph(openvino, ov_opset13, "by class")
    path = tmp_path / "nms_rotated.xml"
    openvino.save_model(reference, str(path))
    _same(_outputs(ov.Core().compile_model(str(path), "CPU")),
          _outputs(openvino.Core().compile_model(reference, "CPU")))


def test_nms_rotated_runs_on_an_emulated_gpu(emulated_core: ov.Core) -> None:
    same_on_the_gpu(emulated_core, _graph(ov, opset, "sorted"), [BOX_DATA, SCORES], 0)


def test_nms_rotated_refusals() -> None:
    scores = opset.parameter([1, 2, 4], np.float32)
    with pytest.raises(InputError, match=r"boxes \[batch, boxes, 5\].*got float\[1,4,4\]"):
        opset.nms_rotated(opset.parameter([1, 4, 4], np.float32), scores, 2, 0.5, 0.0)
    with pytest.raises(InputError, match=r"output_type 'i16'"):
        opset.nms_rotated(opset.parameter([1, 4, 5], np.float32), scores, 2, 0.5, 0.0, output_type="i16")


SHAPE_CASES = [(1, 100, 1, 100), (2, 700, 3, 600), (2, 50, 3, 600), (2, 50, 3, None), (2, -1, 3, 10)]


@pytest.mark.parametrize(("images", "boxes", "classes", "limit"), SHAPE_CASES)
def test_nms_outputs_shapes_are_openvinos(images: int, boxes: int, classes: int, limit: int | None) -> None:
    """The selected rows' bound (images x classes x the fewer of the boxes and the limit, where all
    are known: OpenVINO's ``[..K,3]``) and ``valid_outputs``' [1], for NMSRotated and NMS-9."""
    def shapes(module: Any) -> list[str]:
        scores = module.parameter([images, classes, boxes], np.float32)
        most = module.constant(np.array([limit], np.int64)) if limit is not None \
            else module.parameter([1], np.int64)
        iou, least = module.constant(np.float32(0.1)), module.constant(np.float32(0.4))
        rotated = module.nms_rotated(module.parameter([images, boxes, 5], np.float32), scores, most, iou,
                                     least)
        upright = module.non_max_suppression(module.parameter([images, boxes, 4], np.float32), scores, most,
                                             iou, least)
        return [str(node.get_output_partial_shape(i)) for node in (rotated, upright) for i in range(3)]

    assert shapes(opset) == shapes(ov_opset13)
