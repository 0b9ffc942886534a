"""MulticlassNms (opsets 8 and 9), MatrixNms, PSROIPooling and DeformablePSROIPooling built with
``inferplex.opset``, each against
OpenVINO's CPU on the same graph built with ``openvino.opset8``/``opset9``/``opset1``: every output's
shape, element type and values (order included), on both of the CPU device's engines; and the same
ops read from an IR that OpenVINO saved."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex import opset, opset1, opset8
from inferplex.errors import InputError

from conftest import same_on_the_gpu

openvino = pytest.importorskip("openvino")
ov_opset1 = pytest.importorskip("openvino.opset1")
ov_opset8 = pytest.importorskip("openvino.opset8")
ov_opset9 = pytest.importorskip("openvino.opset9")

F32 = np.float32
ENGINES = ["OPENVINO", "ONNXRUNTIME"]


def _openvino(build: Callable[..., Any], module: Any, feeds: list[np.ndarray],
              shapes: list[list[int]]) -> list[np.ndarray]:
    params = [module.parameter(shape, feed.dtype) for shape, feed in zip(shapes, feeds, strict=True)]
    node = build(module, *params)
    compiled = openvino.Core().compile_model(openvino.Model(node.outputs(), params), "CPU",
                                             {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled(feeds)
    return [results[i] for i in range(len(node.outputs()))]


def _inferplex(build: Callable[..., Any], module: Any, feeds: list[np.ndarray], shapes: list[list[int]],
               engine: str) -> tuple[list[np.ndarray], Any]:
    params = [opset.parameter(shape, feed.dtype) for shape, feed in zip(shapes, feeds, strict=True)]
    node = build(module, *params)
    model = ov.Model([node.output(i) for i in range(node.get_output_size())], params, "op")
    compiled = ov.Core().compile_model(model, "CPU", {"ENGINE": engine})
    return list(compiled(feeds).to_tuple()), node


def _compared(build: Callable[..., Any], ov_module: Any, module: Any, feeds: list[np.ndarray],
              shapes: list[list[int]], engine: str, atol: float = 0.0) -> tuple[list[np.ndarray], Any]:
    """inferplex's outputs and node, once checked against OpenVINO's CPU on the same graph."""
    expected = _openvino(build, ov_module, feeds, shapes)
    got, node = _inferplex(build, module, feeds, shapes, engine)
    _same(expected, got, atol)
    return got, node


def _same(expected: list[np.ndarray], got: list[np.ndarray], atol: float = 0.0) -> None:
    assert len(got) == len(expected)
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have.dtype == want.dtype, index
        assert have.shape == want.shape, (index, have.shape, want.shape)
        np.testing.assert_allclose(have, want, rtol=1e-6, atol=atol, err_msg=str(index))


# --- MulticlassNms ---------------------------------------------------------------------------------


def _boxes(rng: np.random.Generator, *lead: int) -> np.ndarray:
    corner = rng.uniform(0, 10, (*lead, 2))
    return np.concatenate([corner, corner + rng.uniform(1, 6, (*lead, 2))], -1).astype(F32)


SHARED_CASES = [
    ({}, 2, 3, 6, True),
    ({"sort_result_type": "score", "iou_threshold": 0.3, "score_threshold": 0.2, "keep_top_k": 3},
     2, 3, 8, True),
    ({"sort_result_type": "classid", "background_class": 1, "nms_top_k": 2, "sort_result_across_batch": True,
      "output_type": "i32"}, 2, 3, 6, True),
    ({"sort_result_type": "score", "sort_result_across_batch": True, "iou_threshold": 0.5,
      "normalized": False}, 3, 4, 20, True),
    ({"sort_result_type": "classid", "iou_threshold": 0.5, "keep_top_k": 5, "background_class": 0},
     3, 4, 20, False),
    ({"sort_result_type": "none", "iou_threshold": 0.7, "nms_top_k": 4, "score_threshold": 0.5,
      "output_type": "i32"}, 1, 2, 30, False),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("attrs", "batch", "classes", "boxes", "dynamic"), SHARED_CASES)
def test_multiclass_nms_matches_openvino(engine: str, attrs: dict[str, Any], batch: int, classes: int,
                                         boxes: int, dynamic: bool) -> None:
    rng = np.random.default_rng(batch * 100 + classes * 10 + boxes)
    feeds = [_boxes(rng, batch, boxes), rng.uniform(0, 1, (batch, classes, boxes)).astype(F32)]
    shapes = [[-1, -1, 4], [-1, -1, -1]] if dynamic else [list(f.shape) for f in feeds]

    def build(module: Any, b: Any, s: Any) -> Any:
        return module.multiclass_nms(b, s, **attrs)

    expected = _openvino(build, ov_opset8, feeds, shapes)
    got, node = _inferplex(build, opset8, feeds, shapes, engine)
    _same(expected, got)
    assert node.get_type_name() == "MulticlassNms"
    reference = build(ov_opset8, *(ov_opset8.parameter(shape, F32) for shape in shapes))
    assert [str(node.get_output_partial_shape(i)) for i in range(3)] == \
        [str(reference.get_output_partial_shape(i)) for i in range(3)]
    assert got[2].sum() == len(got[0]) > 0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("attrs", "rois", "classes"), [
    ({}, (4, 0, 5), 3),
    ({"sort_result_type": "classid", "iou_threshold": 0.4, "keep_top_k": 4, "background_class": 2},
     (4, 0, 5), 3),
    ({"sort_result_type": "score", "sort_result_across_batch": True, "iou_threshold": 0.6, "nms_top_k": 3,
      "output_type": "i32"}, (6, 7, 3, 2), 4),
])
def test_multiclass_nms_9_boxes_per_class_with_roisnum(engine: str, attrs: dict[str, Any],
                                                       rois: tuple[int, ...], classes: int) -> None:
    rng = np.random.default_rng(sum(rois) + classes)
    count = sum(rois)
    feeds = [_boxes(rng, classes, count), rng.uniform(0, 1, (classes, count)).astype(F32),
             np.array(rois, np.int32)]
    shapes = [[-1, -1, 4], [-1, -1], [-1]]

    def build(module: Any, b: Any, s: Any, r: Any) -> Any:
        return module.multiclass_nms(b, s, r, **attrs)

    expected = _openvino(build, ov_opset9, feeds, shapes)
    got, _ = _inferplex(build, opset, feeds, shapes, engine)
    _same(expected, got)
    assert [bool(n) for n in got[2]] == [n > 0 for n in rois]  # an image of no boxes keeps none


@pytest.mark.parametrize("engine", ENGINES)
def test_multiclass_nms_of_many_boxes(engine: str) -> None:
    """More than 46340 boxes kept (where the sort keys of equal scores would pass 2**31): ONNX
    Runtime gives OpenVINO's order exactly; OpenVINO, which holds 64-bit integers in 32 bits, the
    same rows with equal scores in its own order."""
    rng = np.random.default_rng(0)
    feeds = [_boxes(rng, 2, 1000) * 60, rng.uniform(0, 1, (2, 80, 1000)).astype(F32)]
    shapes = [[-1, -1, 4], [-1, -1, -1]]

    def build(module: Any, b: Any, s: Any) -> Any:
        return module.multiclass_nms(b, s, sort_result_type="classid", sort_result_across_batch=True,
                                     iou_threshold=0.5, score_threshold=0.05)

    expected = _openvino(build, ov_opset8, feeds, shapes)
    got, _ = _inferplex(build, opset8, feeds, shapes, engine)
    assert len(expected[0]) > 46340
    if engine == "ONNXRUNTIME":
        _same(expected, got)
    else:
        assert got[0].shape == expected[0].shape and got[2].tolist() == expected[2].tolist()
        moved = np.any(got[0] != expected[0], axis=1)
        assert moved.sum() < 20 and np.array_equal(np.unique(got[0], axis=0), np.unique(expected[0], axis=0))
        np.testing.assert_array_equal(got[0][moved, :2], expected[0][moved, :2])  # same class and score


EDGE_BOXES = np.array([[[0, 0, 4, 4], [0, 0, 4, 4], [1, 1, 5, 5], [3, 3, 3, 6], [5, 5, 2, 2], [0, 0, 2, 2],
                        [2, 2, 6, 6]]], F32)
EDGE_SCORES = np.array([[[0.9, 0.8, 0.5, 0.7, 0.6, 0.5, 0.25], [0.5, 0.5, 0.9, 0.3, 0.2, 0.1, 0.4]]], F32)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("iou", [0.0, 1 / 17, 0.25, 1.0, 1.5])
@pytest.mark.parametrize(("least", "normalized"), [(0.5, True), (0.25, False)])
def test_multiclass_nms_thresholds_ties_and_empty_boxes(engine: str, iou: float, least: float,
                                                        normalized: bool) -> None:
    """Scores equal to score_threshold are kept, IoUs equal to iou_threshold dropped, equal scores
    ordered by class then box, boxes of no area never overlap; identical boxes of IoU 1."""
    def build(module: Any, b: Any, s: Any) -> Any:
        return module.multiclass_nms(b, s, "score", False, "i64", iou, least, -1, -1, -1, 1.0, normalized)

    shapes = [[-1, -1, 4], [-1, -1, -1]]
    expected = _openvino(build, ov_opset8, [EDGE_BOXES, EDGE_SCORES], shapes)
    got, _ = _inferplex(build, opset8, [EDGE_BOXES, EDGE_SCORES], shapes, engine)
    _same(expected, got)
    assert got[0][0, 1] == got[0][1, 1] == F32(0.9) and got[0][0, 0] == 0


@pytest.mark.parametrize("module", [opset8, opset])
def test_multiclass_nms_f16_and_opset8_positional_arguments(module: Any) -> None:
    """Opset 8's positional form (a sort type third, the rest left to their defaults) and f16
    inputs, whose selected_outputs are f16."""
    rng = np.random.default_rng(3)
    feeds = [_boxes(rng, 2, 8).astype(np.float16), rng.uniform(0, 1, (2, 3, 8)).astype(np.float16)]
    shapes = [list(f.shape) for f in feeds]

    def build(mod: Any, b: Any, s: Any) -> Any:
        return mod.multiclass_nms(b, s, "score", False, "i32", 0.4, 0.3)

    expected = _openvino(build, ov_opset8, feeds, shapes)
    got, _ = _inferplex(build, module, feeds, shapes, "OPENVINO")
    _same(expected, got)
    assert got[0].dtype == np.float16 and got[1].dtype == np.int32 and len(got[0]) > 6


def test_multiclass_nms_refusals() -> None:
    boxes, scores = opset.parameter([1, 4, 4], F32), opset.parameter([1, 2, 4], F32)
    with pytest.raises(InputError, match=r"nms_eta 0\.5.*accepted: 1\.0"):
        opset.multiclass_nms(boxes, scores, nms_eta=0.5)
    with pytest.raises(InputError, match=r"sort_result_type 'class'.*classid, score, none"):
        opset.multiclass_nms(boxes, scores, sort_result_type="class")
    with pytest.raises(InputError, match=r"output_type 'u8'.*i32, i64"):
        opset.multiclass_nms(boxes, scores, output_type="u8")
    with pytest.raises(InputError, match=r"unknown \['top_k'\].*accepted: boxes, scores, roisnum"):
        opset.multiclass_nms(boxes, scores, top_k=3)
    with pytest.raises(InputError, match="needs roisnum"):
        opset.multiclass_nms(opset.parameter([2, 4, 4], F32), opset.parameter([2, 4], F32))
    assert "multiclass_nms" in opset8.__all__ and "multiclass_nms" not in opset1.__all__


# --- PSROIPooling ----------------------------------------------------------------------------------

PSROI_CASES = [
    ({"output_dim": 2, "group_size": 3, "spatial_scale": 0.5, "spatial_bins_x": 1, "spatial_bins_y": 1,
      "mode": "average"}, None),
    ({"output_dim": 3, "group_size": 2, "spatial_scale": 1.0, "spatial_bins_x": 1, "spatial_bins_y": 1,
      "mode": "average"}, 3),
    ({"output_dim": 2, "group_size": 3, "spatial_scale": 1.0, "spatial_bins_x": 2, "spatial_bins_y": 3,
      "mode": "bilinear"}, None),
    ({"output_dim": 2, "group_size": 1, "spatial_scale": 0.5, "spatial_bins_x": 3, "spatial_bins_y": 2,
      "mode": "bilinear"}, 2),
]


def _psroi_feeds(attrs: dict[str, Any], end: int | None, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    count, batch = 6, 2
    bins = attrs["group_size"] ** 2 if attrs["mode"] == "average" else attrs["spatial_bins_x"] * attrs[
        "spatial_bins_y"]
    data = rng.standard_normal((batch, attrs["output_dim"] * bins, 9, 11)).astype(F32)
    if attrs["mode"] == "average":  # pixels, some regions past the map's edges
        corner, size = rng.uniform(-2, 12, (count, 2)), rng.uniform(0, 8, (count, 2))
    else:  # fractions of the map
        corner, size = rng.uniform(-0.2, 1, (count, 2)), rng.uniform(0, 0.8, (count, 2))
    rois = np.concatenate([corner, corner + size], 1) / attrs["spatial_scale"]
    coords = np.concatenate([rng.integers(0, batch, (count, 1)), rois], 1).astype(F32)
    if end is not None:
        coords[end, 0] = -1
    return [data, coords]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("attrs", "end"), PSROI_CASES)
def test_psroi_pooling_matches_openvino(engine: str, attrs: dict[str, Any], end: int | None) -> None:
    feeds = _psroi_feeds(attrs, end, len(attrs["mode"]) + attrs["group_size"])
    shapes = [list(f.shape) for f in feeds]

    def build(module: Any, x: Any, c: Any) -> Any:
        return module.psroi_pooling(x, c, **attrs)

    got, node = _compared(build, ov_opset1, opset, feeds, shapes, engine, atol=1e-5)
    assert node.get_type_name() == "PSROIPooling"
    assert np.abs(got[0]).max() > 0.1
    if end is not None:
        assert not got[0][end:].any()


def test_psroi_pooling_refusals() -> None:
    data, coords = opset.parameter([1, 8, 5, 5], F32), opset.parameter([3, 5], F32)
    with pytest.raises(InputError, match=r"mode 'max'.*average, bilinear"):
        opset.psroi_pooling(data, coords, 2, 2, 1.0, 1, 1, "max")
    with pytest.raises(InputError, match=r"output_dim \* group_size² = 18 input channels, got 8"):
        opset.psroi_pooling(data, coords, 2, 3, 1.0, 1, 1, "average")


# --- DeformablePSROIPooling --------------------------------------------------------------------------

DEFORMABLE_CASES = [
    ({"spatial_bins_x": 2, "spatial_bins_y": 2}, None),  # no offsets: PSROI pooling of bilinear samples
    ({"part_size": 3, "trans_std": 0.1, "spatial_bins_x": 3, "spatial_bins_y": 2}, 2),
    ({"part_size": 2, "trans_std": 0.5}, 1),
    ({"part_size": 3, "trans_std": 1.0, "spatial_bins_x": 2, "spatial_bins_y": 2}, 4),  # samples off the map
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("attrs", "classes"), DEFORMABLE_CASES)
def test_deformable_psroi_pooling_matches_openvino(engine: str, attrs: dict[str, Any],
                                                   classes: int | None) -> None:
    rng = np.random.default_rng(len(attrs) + (classes or 0))
    output_dim, group = 4, 3
    data = rng.standard_normal((2, output_dim * group * group, 10, 12)).astype(F32)
    coords = np.array([[0, 1, 2, 20, 16], [1, 4, 0, 30, 25], [0, -3, -4, 8, 9], [1, 10, 8, 11, 9],
                       [-1, 0, 0, 5, 5], [0, 1, 1, 9, 9]], F32)  # the -1 ends the list
    feeds = [data, coords]
    if classes is not None:
        part = attrs["part_size"]
        feeds.append((rng.standard_normal((len(coords), 2 * classes, part, part)) * 0.3).astype(F32))
    shapes = [list(f.shape) for f in feeds]

    def build(module: Any, x: Any, c: Any, *offsets: Any) -> Any:
        moves = offsets[0] if offsets else None
        return module.deformable_psroi_pooling(x, c, output_dim, 0.5, group, offsets=moves, **attrs)

    got, node = _compared(build, ov_opset1, opset1, feeds, shapes, engine, atol=1e-5)
    assert node.get_type_name() == "DeformablePSROIPooling"
    assert np.abs(got[0][:4]).max() > 0.1 and not got[0][4:].any()


def test_deformable_psroi_pooling_refusals() -> None:
    data, coords = opset.parameter([1, 8, 5, 5], F32), opset.parameter([3, 5], F32)
    with pytest.raises(InputError, match=r"mode 'bilinear'.*bilinear_deformable"):
        opset.deformable_psroi_pooling(data, coords, 2, 1.0, 2, "bilinear")
    with pytest.raises(InputError, match=r"output_dim \* group_size² = 18 input channels, got 8"):
        opset.deformable_psroi_pooling(data, coords, 2, 1.0, 3)


# --- MatrixNms ------------------------------------------------------------------------------------

MATRIX_CASES = [
    ({}, 2, 3, 12),
    ({"sort_result_type": "classid"}, 2, 3, 12),  # OpenVINO's CPU orders each image's boxes by score
    ({"decay_function": "gaussian", "gaussian_sigma": 2.0, "sort_result_type": "score"}, 2, 3, 12),
    ({"keep_top_k": 5, "nms_top_k": 4, "score_threshold": 0.2, "post_threshold": 0.1}, 2, 3, 12),
    ({"sort_result_type": "classid", "sort_result_across_batch": True, "output_type": "i32"}, 3, 2, 10),
    ({"sort_result_type": "score", "sort_result_across_batch": True, "background_class": 1,
      "normalized": False, "post_threshold": 0.3}, 2, 4, 16),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("attrs", "batch", "classes", "boxes"), MATRIX_CASES)
def test_matrix_nms_matches_openvino(engine: str, attrs: dict[str, Any], batch: int, classes: int,
                                     boxes: int) -> None:
    rng = np.random.default_rng(batch * 100 + classes * 10 + boxes)
    feeds = [_boxes(rng, batch, boxes), rng.uniform(0, 1, (batch, classes, boxes)).astype(F32)]
    shapes = [list(f.shape) for f in feeds]

    def build(module: Any, b: Any, s: Any) -> Any:
        return module.matrix_nms(b, s, **attrs)

    got, node = _compared(build, ov_opset8, opset8, feeds, shapes, engine, atol=1e-6)
    assert node.get_type_name() == "MatrixNms"
    assert got[2].sum() == len(got[0]) > 0
    index, labels = got[1][:, 0].astype(np.int64), got[0][:, 0].astype(np.int64)
    original = feeds[1][index // boxes, labels, index % boxes]
    assert (got[0][:, 1] <= original).all()  # scores decay by their overlaps
    assert (got[0][:, 1] < original).any() or "keep_top_k" in attrs


def test_matrix_nms_refusals() -> None:
    boxes, scores = opset.parameter([1, 4, 4], F32), opset.parameter([1, 2, 4], F32)
    with pytest.raises(InputError, match=r"decay_function 'cosine'.*linear, gaussian"):
        opset.matrix_nms(boxes, scores, decay_function="cosine")
    with pytest.raises(InputError, match=r"sort_result_type 'class'.*classid, score, none"):
        opset.matrix_nms(boxes, scores, sort_result_type="class")
    with pytest.raises(InputError, match=r"ranks 3 and 2"):
        opset.matrix_nms(boxes, opset.parameter([2, 4], F32))
    assert "matrix_nms" in opset8.__all__ and "matrix_nms" not in opset1.__all__



def test_matrix_nms_and_deformable_psroi_pooling_run_on_an_emulated_gpu(emulated_core: ov.Core) -> None:
    rng = np.random.default_rng(11)
    nms_feeds = [_boxes(rng, 2, 12), rng.uniform(0, 1, (2, 3, 12)).astype(F32)]
    data = rng.standard_normal((2, 36, 10, 12)).astype(F32)
    coords = np.array([[0, 1, 2, 20, 16], [1, 4, 0, 30, 25], [-1, 0, 0, 5, 5]], F32)
    moves = (rng.standard_normal((3, 4, 3, 3)) * 0.3).astype(F32)
    cases = [(lambda b, s: opset8.matrix_nms(b, s, "classid", True, decay_function="gaussian"), nms_feeds),
             (lambda x, c, m: opset1.deformable_psroi_pooling(
                 x, c, 4, 0.5, 3, spatial_bins_x=2, spatial_bins_y=2, trans_std=0.2, part_size=3, offsets=m),
              [data, coords, moves])]
    for build, feeds in cases:
        params = [opset.parameter(list(f.shape), f.dtype) for f in feeds]
        node = build(*params)
        model = ov.Model([node.output(i) for i in range(node.get_output_size())], params, "op")
        same_on_the_gpu(emulated_core, model, feeds)


# --- read from an IR -------------------------------------------------------------------------------


def test_multiclass_nms_and_psroi_pooling_read_from_ir(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    boxes = ov_opset8.parameter([2, 10, 4], F32, name="boxes")
    scores = ov_opset8.parameter([2, 3, 10], F32, name="scores")
    nms8 = ov_opset8.multiclass_nms(boxes, scores, "classid", True, "i32", 0.4, 0.2, 5, 6, 0, 1.0, False)
    class_boxes = ov_opset9.parameter([-1, -1, 4], F32, name="class_boxes")
    class_scores = ov_opset9.parameter([-1, -1], F32, name="class_scores")
    rois_num = ov_opset9.parameter([2], np.int64, name="rois_num")
    nms9 = ov_opset9.multiclass_nms(class_boxes, class_scores, rois_num, "score", False, "i64", 0.5, 0.1,
                                    -1, 3)
    matrix = ov_opset8.matrix_nms(boxes, scores, "score", True, "i32", 0.1, 6, 8, -1, "gaussian", 1.5, 0.05)
    data = ov_opset1.parameter([1, 18, 8, 8], F32, name="data")
    pixels = ov_opset1.parameter([4, 5], F32, name="pixels")
    fractions = ov_opset1.parameter([4, 5], F32, name="fractions")
    average = ov_opset1.psroi_pooling(data, pixels, 2, 3, 0.5, 1, 1, "average")
    bilinear = ov_opset1.psroi_pooling(data, fractions, 2, 1, 1.0, 3, 3, "bilinear")
    moves = ov_opset1.parameter([4, 2, 3, 3], F32, name="moves")
    deformable = ov_opset1.deformable_psroi_pooling(
        data, pixels, 2, 0.5, 3, spatial_bins_x=2, spatial_bins_y=2, trans_std=0.2, part_size=3,
        offsets=moves)
    model = openvino.Model([*nms8.outputs(), *nms9.outputs(), *matrix.outputs(), average.output(0),
                            bilinear.output(0), deformable.output(0)],
                           [boxes, scores, class_boxes, class_scores, rois_num, data, pixels, fractions,
                            moves],
                           "detections")
    xml = tmp_path / "detections.xml"
    openvino.save_model(model, str(xml))
    feeds = {"boxes": _boxes(rng, 2, 10), "scores": rng.uniform(0, 1, (2, 3, 10)).astype(F32),
             "class_boxes": _boxes(rng, 3, 9), "class_scores": rng.uniform(0, 1, (3, 9)).astype(F32),
             "rois_num": np.array([5, 4], np.int64), "data": rng.standard_normal((1, 18, 8, 8)).astype(F32),
             "pixels": np.array([[0, 2, 2, 12, 10], [0, 0, 4, 14, 14], [0, 6, 0, 8, 8], [-1, 4, 4, 6, 6]],
                                F32)}
    feeds["fractions"] = feeds["pixels"] / np.array([1, 16, 16, 16, 16], F32)
    feeds["moves"] = (rng.standard_normal((4, 2, 3, 3)) * 0.3).astype(F32)
    compiled = openvino.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled(feeds)
    expected = [results[i] for i in range(len(compiled.outputs))]
    core = ov.Core()
    read = core.read_model(xml)
    assert {"MulticlassNms", "MatrixNms", "PSROIPooling", "DeformablePSROIPooling"} <= {
        node.get_type_name() for node in read.get_ordered_ops()}
    got = core.compile_model(read, "CPU")(feeds)
    for index, want in enumerate(expected):
        assert got[index].dtype == want.dtype and got[index].shape == want.shape, index
        np.testing.assert_allclose(got[index], want, rtol=1e-5, atol=1e-5, err_msg=str(index))
    assert expected[1].dtype == np.int32 and all(len(expected[i]) > 0 for i in (0, 3, 6))


@pytest.mark.parametrize(("images", "boxes", "classes", "nms_top_k", "keep_top_k", "background"),
                         [(2, 50, 3, 10, 20, -1), (2, 50, 3, -1, -1, -1), (2, 50, 3, 10, -1, 0),
                          (2, 50, 3, 100, 500, 1), (1, -1, 3, 10, 20, -1), (2, 50, 3, 0, -1, -1)])
def test_multiclass_and_matrix_nms_outputs_shapes_are_openvinos(images: int, boxes: int, classes: int,
                                                                 nms_top_k: int, keep_top_k: int,
                                                                 background: int) -> None:
    """The kept rows' bound (the images x each one's classes x its ``nms_top_k`` best boxes, at most
    ``keep_top_k``, where the shapes give them: OpenVINO's ``[..K,6]``), as OpenVINO shows it."""
    ov_opset9 = pytest.importorskip("openvino.opset9")

    def shapes(module: Any) -> list[str]:
        box = module.parameter([images, boxes, 4], np.float32)
        score = module.parameter([images, classes, boxes], np.float32)
        nodes = [build(box, score, nms_top_k=nms_top_k, keep_top_k=keep_top_k, background_class=background)
                 for build in (module.multiclass_nms, module.matrix_nms)]
        return [str(node.get_output_partial_shape(i)) for node in nodes for i in range(3)]

    assert shapes(opset) == shapes(ov_opset9)
