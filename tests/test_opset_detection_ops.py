"""OpenVINO's detection ops built with ``inferplex.opset`` (NonMaxSuppression, ROIAlign, ROIPooling,
ReorgYolo, RegionYolo, PriorBox, PriorBoxClustered), the NV12 and I420 colour conversions,
RandomUniform, GatherTree and CTCLoss, against numpy computing each op as OpenVINO's specification defines
it (NMS against a greedy NMS in numpy; RandomUniform by range, shape and type only, as its values
are not OpenVINO's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex import opset, opset1, opset8
from inferplex.errors import InputError, InputTypeError

RNG = np.random.default_rng(23)
F32 = np.float32


def _outputs(build: Callable[..., Any], feeds: list[np.ndarray], device: str = "CPU") -> list[np.ndarray]:
    params = [opset.parameter(list(f.shape), f.dtype, name=f"in{i}") for i, f in enumerate(feeds)]
    node = build(*params)
    model = ov.Model([node.output(i) for i in range(node.get_output_size())], params, "op")
    return list(ov.Core().compile_model(model, device)(feeds).to_tuple())


# --- non-maximum suppression -------------------------------------------------------------------------


def _corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    if not center:
        low = np.minimum(boxes[..., :2], boxes[..., 2:])
        return np.concatenate([low, np.maximum(boxes[..., :2], boxes[..., 2:])], -1)
    x, y, w, h = (boxes[..., i] for i in range(4))
    return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], -1)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    inter = (max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1])))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _nms(boxes: np.ndarray, scores: np.ndarray, limit: int, iou: float, least: float, center: bool,
         sort: bool) -> np.ndarray:
    """Greedy NMS per batch and class: rows (batch, class, box, score)."""
    rows = []
    corners = _corners(boxes, center)
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            kept: list[int] = []
            for i in np.argsort(-scores[b, c], kind="stable"):
                if scores[b, c, i] <= least or len(kept) == limit:
                    continue
                if all(_iou(corners[b, i], corners[b, k]) <= iou for k in kept):
                    kept.append(int(i))
            rows += [(b, c, i, scores[b, c, i]) for i in kept]
    table = np.asarray(rows, np.float64).reshape(-1, 4)
    return table[np.argsort(-table[:, 3], kind="stable")] if sort else table


BOXES = RNG.uniform(0, 10, (2, 7, 4)).astype(F32)
SCORES = RNG.uniform(0, 1, (2, 3, 7)).astype(F32)


@pytest.mark.parametrize(("encoding", "sort", "kind"), [("corner", True, "i64"), ("corner", False, "i32"),
                                                        ("center", True, "i32"), ("center", False, "i64")])
def test_non_max_suppression_matches_greedy_nms(encoding: str, sort: bool, kind: str) -> None:
    indices, scores, valid = _outputs(lambda b, s: opset.non_max_suppression(
        b, s, np.int64(3), F32(0.2), F32(0.3), None, encoding, sort, kind), [BOXES, SCORES])
    expected = _nms(BOXES, SCORES, 3, 0.2, 0.3, encoding == "center", sort)
    assert indices.dtype == valid.dtype == np.dtype(np.int32 if kind == "i32" else np.int64)
    assert indices.shape == scores.shape == (len(expected), 3) and valid.tolist() == [len(expected)]
    np.testing.assert_array_equal(indices, expected[:, :3])
    np.testing.assert_allclose(scores, expected[:, [0, 1, 3]], rtol=1e-6)


def test_non_max_suppression_forms_and_defaults() -> None:
    """Opset 1's form (box_encoding sixth); no max_output_boxes_per_class keeps nothing."""
    indices = _outputs(lambda b, s: opset1.non_max_suppression(b, s, np.int64(2), F32(0.4), F32(0.0),
                                                               "corner", False), [BOXES, SCORES])[0]
    np.testing.assert_array_equal(indices, _nms(BOXES, SCORES, 2, 0.4, 0.0, False, False)[:, :3])
    empty, _, valid = _outputs(lambda b, s: opset.non_max_suppression(b, s), [BOXES, SCORES])
    assert empty.shape == (0, 3) and valid.tolist() == [0]
    zero_sigma = _outputs(lambda b, s: opset.non_max_suppression(b, s, np.int64(2), F32(0.4), F32(0.0),
                                                                 F32(0.0)), [BOXES, SCORES])[0]
    np.testing.assert_array_equal(zero_sigma, _nms(BOXES, SCORES, 2, 0.4, 0.0, False, True)[:, :3])


def test_non_max_suppression_arguments_are_checked() -> None:
    b, s = opset.parameter([1, 4, 4], F32), opset.parameter([1, 1, 4], F32)
    with pytest.raises(InputError, match="soft NMS"):  # soft NMS takes a constant sigma
        opset.non_max_suppression(b, s, 3, 0.5, 0.0, opset.parameter([1], F32))
    with pytest.raises(InputError, match="accepted: corner, center"):
        opset.non_max_suppression(b, s, 3, box_encoding="middle")
    with pytest.raises(InputError, match="accepted: i32, i64"):
        opset.non_max_suppression(b, s, 3, output_type="f32")


# --- ROI pooling -------------------------------------------------------------------------------------


def _bilinear(plane: np.ndarray, y: float, x: float) -> float:
    h, w = plane.shape
    if y < -1 or y > h or x < -1 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = min(int(y), h - 1), min(int(x), w - 1)
    y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
    y, x = (float(y0) if y0 == h - 1 else y), (float(x0) if x0 == w - 1 else x)
    ly, lx = y - y0, x - x0
    return float((1 - ly) * (1 - lx) * plane[y0, x0] + (1 - ly) * lx * plane[y0, x1]
                 + ly * (1 - lx) * plane[y1, x0] + ly * lx * plane[y1, x1])


def _roi_align(x: np.ndarray, rois: np.ndarray, batch: np.ndarray, ph: int, pw: int, ratio: int,
               scale: float, aligned: str) -> np.ndarray:
    """OpenVINO's ROIAlign (avg): bins of ratio x ratio bilinear samples (adaptive where 0)."""
    out = np.zeros((len(rois), x.shape[1], ph, pw))
    for n, roi in enumerate(rois):
        shift, offset = {"asymmetric": (0.0, 0.0), "half_pixel_for_nn": (0.0, -0.5),
                         "half_pixel": (0.5, -0.5)}[aligned]
        x1, y1, x2, y2 = ((v + shift) * scale + offset for v in roi)
        rw, rh = x2 - x1, y2 - y1
        if aligned == "asymmetric":
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph, rw / pw
        sy = ratio or int(np.ceil(rh / ph))
        sx = ratio or int(np.ceil(rw / pw))
        points = [(y1 + i * bh + (a + 0.5) * bh / sy, x1 + j * bw + (b + 0.5) * bw / sx, i, j)
                  for i in range(ph) for j in range(pw) for a in range(sy) for b in range(sx)]
        for c in range(x.shape[1]):
            for y, xx, i, j in points:
                out[n, c, i, j] += _bilinear(x[batch[n], c], y, xx) / (sy * sx)
    return out


IMAGE = RNG.standard_normal((2, 3, 8, 8)).astype(F32)
ROIS = np.array([[0, 0, 5, 5], [1.2, 0.5, 7.3, 6.1], [2, 2, 2.5, 3]], F32)
ROI_BATCH = np.array([0, 1, 1], np.int32)


@pytest.mark.parametrize(("aligned", "ratio"), [("asymmetric", 2), ("asymmetric", 0), ("half_pixel", 2),
                                                ("half_pixel_for_nn", 0)])
def test_roi_align(aligned: str, ratio: int) -> None:
    got = _outputs(lambda x: opset.roi_align(x, ROIS, ROI_BATCH, 3, 2, ratio, 0.9, "avg", aligned),
                   [IMAGE])[0]
    np.testing.assert_allclose(got, _roi_align(IMAGE, ROIS, ROI_BATCH, 3, 2, ratio, 0.9, aligned),
                               rtol=1e-4, atol=1e-5)


def _roi_pool(x: np.ndarray, coords: np.ndarray, ph: int, pw: int, scale: float) -> np.ndarray:
    """OpenVINO's ROIPooling (max): rounded region corners, bins floor/ceil of equal parts."""
    out = np.zeros((len(coords), x.shape[1], ph, pw))
    h, w = x.shape[2:]
    for n, (b, *corners) in enumerate(coords):
        x1, y1, x2, y2 = (int(np.round(v * scale)) for v in corners)
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for i in range(ph):
            for j in range(pw):
                hs = min(max(int(np.floor(i * rh / ph)) + y1, 0), h)
                he = min(max(int(np.ceil((i + 1) * rh / ph)) + y1, 0), h)
                ws = min(max(int(np.floor(j * rw / pw)) + x1, 0), w)
                we = min(max(int(np.ceil((j + 1) * rw / pw)) + x1, 0), w)
                region = x[int(b), :, hs:he, ws:we]
                out[n, :, i, j] = region.max(axis=(1, 2)) if region.size else 0.0
    return out


def test_roi_pooling() -> None:
    coords = np.array([[0, 0, 0, 5, 5], [1, 1.2, 0.5, 7.3, 6.1], [1, 2, 2, 2.5, 3]], F32)
    got = _outputs(lambda x: opset.roi_pooling(x, coords, [3, 2], 0.9, "max"), [IMAGE])[0]
    np.testing.assert_allclose(got, _roi_pool(IMAGE, coords, 3, 2, 0.9), rtol=1e-6)
    same = _outputs(lambda x: opset.roi_pooling(x, coords, spatial_scale=0.9, output_size=[3, 2]), [IMAGE])[0]
    np.testing.assert_array_equal(same, got)


def test_roi_arguments_are_checked() -> None:
    x = opset.parameter([1, 3, 8, 8], F32)
    with pytest.raises(InputError, match="accepted: avg"):
        opset.roi_align(x, ROIS, ROI_BATCH, 2, 2, 0, 1.0, "max")
    with pytest.raises(InputError, match="accepted: asymmetric, half_pixel_for_nn, half_pixel"):
        opset.roi_align(x, ROIS, ROI_BATCH, 2, 2, 0, 1.0, "avg", "centre")
    with pytest.raises(InputError, match="accepted: max"):
        opset.roi_pooling(x, np.zeros((1, 5), F32), [2, 2], 1.0, "bilinear")
    with pytest.raises(InputError, match="output_roi"):
        opset.roi_pooling(x, np.zeros((1, 5), F32), None, 1.0)


# --- YOLO layers --------------------------------------------------------------------------------------


def _reorg(x: np.ndarray, s: int) -> np.ndarray:
    """OpenVINO's reference ReorgYolo, loop by loop."""
    b, c, h, w = x.shape
    src = x.reshape(-1)
    out = np.empty_like(src)
    ic_off, ih_off, iw_off = c // (s * s), h * s, w * s
    for n in range(b):
        for ic in range(c):
            for ih in range(h):
                for iw in range(w):
                    oc, offset = ic % ic_off, ic // ic_off
                    ow, oh = iw * s + offset % s, ih * s + offset // s
                    out[n * c * h * w + ic * h * w + ih * w + iw] = src[
                        n * ic_off * ih_off * iw_off + oc * ih_off * iw_off + oh * iw_off + ow]
    return out.reshape(b, c * s * s, h // s, w // s)


@pytest.mark.parametrize("shape", [(1, 8, 4, 6), (2, 4, 2, 4)])
def test_reorg_yolo(shape: tuple[int, ...]) -> None:
    x = RNG.standard_normal(shape).astype(F32)
    np.testing.assert_array_equal(_outputs(lambda p: opset.reorg_yolo(p, [2]), [x])[0], _reorg(x, 2))


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-v))


@pytest.mark.parametrize("softmax", [True, False])
def test_region_yolo(softmax: bool) -> None:
    coords, classes, regions = 4, 3, 3 if softmax else 2
    x = RNG.standard_normal((1, regions * (coords + 1 + classes), 4, 5)).astype(F32)
    got = _outputs(lambda p: opset.region_yolo(p, coords, classes, 3 if softmax else 9, softmax,
                                               [0, 1, 2][:regions], 1, 3), [x])[0]
    parts = x.reshape(1, regions, coords + 1 + classes, 4, 5).copy()
    parts[:, :, :2] = _sigmoid(parts[:, :, :2])
    parts[:, :, coords] = _sigmoid(parts[:, :, coords])
    scores = parts[:, :, coords + 1:]
    parts[:, :, coords + 1:] = (np.exp(scores) / np.exp(scores).sum(2, keepdims=True) if softmax
                                else _sigmoid(scores))
    expected = parts.reshape(1, -1) if softmax else parts.reshape(x.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_yolo_arguments_are_checked() -> None:
    with pytest.raises(InputError, match="divisible"):
        opset.reorg_yolo(opset.parameter([1, 4, 3, 4], F32), [2])
    with pytest.raises(InputError, match="3 regions of 8 channels"):
        opset.region_yolo(opset.parameter([1, 20, 4, 4], F32), 4, 3, 3, True, [0], 1, 3)


# --- prior boxes --------------------------------------------------------------------------------------


def _constant_output(node: Any, device: str = "CPU") -> np.ndarray:
    model = ov.Model([node.output(0)], [], "priors")
    return ov.Core().compile_model(model, device)({})[0]


def test_prior_box_clustered() -> None:
    attrs = {"offset": 0.5, "width": [4.0, 2.0], "height": [2.0, 6.0], "clip": False,
             "variance": [0.1, 0.1, 0.2, 0.2]}
    got = _constant_output(opset.prior_box_clustered(np.array([2, 3]), np.array([16, 24]), attrs))
    cy, cx = np.meshgrid((np.arange(2) + 0.5) * 8, (np.arange(3) + 0.5) * 8, indexing="ij")
    widths, heights = np.array([4.0, 2.0]), np.array([2.0, 6.0])
    expected = np.stack([(cx[..., None] - widths / 2) / 24, (cy[..., None] - heights / 2) / 16,
                         (cx[..., None] + widths / 2) / 24, (cy[..., None] + heights / 2) / 16], -1)
    assert got.shape == (2, 2 * 3 * 2 * 4)
    np.testing.assert_allclose(got[0], expected.reshape(-1), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.tile([0.1, 0.1, 0.2, 0.2], 12), rtol=1e-6)


def test_prior_box() -> None:
    """Square of min_size, of sqrt(min * max), then each aspect ratio (and its flip), per point."""
    attrs = {"offset": 0.5, "min_size": [4.0], "max_size": [9.0], "aspect_ratio": [2.0], "flip": True}
    got = _constant_output(opset.prior_box(np.array([2, 2]), np.array([8, 8]), attrs))
    sizes = [(2.0, 2.0), (3.0, 3.0), (2 * np.sqrt(2), 2 / np.sqrt(2)), (2 / np.sqrt(2), 2 * np.sqrt(2))]
    expected = [[(cx - w) / 8, (cy - h) / 8, (cx + w) / 8, (cy + h) / 8]
                for cy in (2.0, 6.0) for cx in (2.0, 6.0) for w, h in sizes]
    assert got.shape == (2, 4 * 4 * 4)
    np.testing.assert_allclose(got[0], np.ravel(expected), rtol=1e-6)
    np.testing.assert_allclose(got[1], 0.1, rtol=1e-6)
    clipped = _constant_output(opset8.prior_box(np.array([2, 2]), np.array([8, 8]), {**attrs, "clip": True}))
    np.testing.assert_allclose(clipped[0], np.clip(np.ravel(expected), 0, 1), rtol=1e-6)


def test_prior_arguments_are_checked() -> None:
    with pytest.raises(InputError, match="must be constant"):
        opset.prior_box(opset.parameter([2], np.int64), np.array([8, 8]), {"offset": 0.5, "min_size": [2.0]})
    with pytest.raises(InputError, match="fixed_size"):
        opset.prior_box(np.array([2, 2]), np.array([8, 8]), {"offset": 0.5, "fixed_size": [2.0]})
    with pytest.raises(InputTypeError, match="dict"):
        opset.prior_box_clustered(np.array([2, 2]), np.array([8, 8]), [0.5])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="accepted"):
        opset.prior_box_clustered(np.array([2, 2]), np.array([8, 8]), {"offset": 0.5, "widht": [1.0]})


# --- colour conversions -------------------------------------------------------------------------------


def _yuv_to_rgb(y: np.ndarray, u: np.ndarray, v: np.ndarray, integer: bool) -> np.ndarray:
    """OpenVINO's BT.601 conversion of Y [N, H, W] and chroma [N, H/2, W/2]: RGB [N, H, W, 3]."""
    u, v = (np.repeat(np.repeat(p.astype(np.float64), 2, 1), 2, 2) - 128 for p in (u, v))
    c = 1.164 * (y.astype(np.float64) - 16)
    rgb = np.clip(np.stack([c + 1.596 * v, c - 0.391 * u - 0.813 * v, c + 2.018 * u], -1), 0, 255)
    return np.round(rgb) if integer else rgb


@pytest.mark.parametrize("dtype", [np.uint8, F32])
@pytest.mark.parametrize("bgr", [False, True])
def test_nv12_and_i420_conversions(dtype: Any, bgr: bool) -> None:
    h, w = 6, 8
    y = RNG.integers(0, 256, (2, h, w)).astype(dtype)
    u, v = (RNG.integers(0, 256, (2, h // 2, w // 2)).astype(dtype) for _ in range(2))
    expected = _yuv_to_rgb(y, u, v, dtype == np.uint8)[..., ::-1 if bgr else 1]
    nv12 = opset.nv12_to_bgr if bgr else opset.nv12_to_rgb
    i420 = opset.i420_to_bgr if bgr else opset.i420_to_rgb
    uv = np.stack([u, v], -1)
    nv12_plane = np.concatenate([y, uv.reshape(2, h // 2, w)], 1)[..., None]
    i420_plane = np.concatenate([p.reshape(2, -1) for p in (y, u, v)], 1).reshape(2, -1, w, 1)
    results = [_outputs(nv12, [nv12_plane])[0], _outputs(nv12, [y[..., None], uv])[0],
               _outputs(i420, [i420_plane])[0], _outputs(i420, [y[..., None], u[..., None], v[..., None]])[0]]
    for got in results:
        assert got.dtype == np.dtype(dtype) and got.shape == (2, h, w, 3)
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=1e-5,
                                   atol=1.0 if dtype == np.uint8 else 1e-3)  # u8: a half may round either way


def test_colour_arguments_are_checked() -> None:
    with pytest.raises(InputError, match="H \\* 3 / 2 rows"):
        opset.nv12_to_rgb(opset.parameter([1, 5, 4, 1], np.uint8))
    with pytest.raises(InputError, match="u8 or f32"):
        opset.i420_to_rgb(opset.parameter([1, 6, 4, 1], np.int32))
    with pytest.raises(InputError, match="both arg_u and arg_v"):
        opset.i420_to_bgr(opset.parameter([1, 4, 4, 1], np.uint8), opset.parameter([1, 2, 2, 1], np.uint8))


# --- random numbers and beam search -------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "low", "high"), [("f32", -2.0, 5.0), ("f16", 0.0, 1.0), ("i32", -3, 4),
                                                   ("i64", 10, 12)])
def test_random_uniform_range_shape_and_type(kind: str, low: Any, high: Any) -> None:
    number = F32 if kind[0] == "f" else np.int32
    node = opset.random_uniform(np.array([2, 3, 50]), number(low), number(high), kind, 7, 3)
    got = _constant_output(node)
    assert got.shape == (2, 3, 50) and got.dtype == np.dtype({"f32": F32, "f16": np.float16, "i32": np.int32,
                                                              "i64": np.int64}[kind])
    assert got.min() >= low and got.max() < high and np.unique(got).size > 1
    if kind[0] == "i":
        assert set(np.unique(got).tolist()) == set(range(low, high))


def test_random_uniform_arguments_are_checked() -> None:
    with pytest.raises(InputError, match="accepted: f16, bf16, f32, f64, i32, i64"):
        opset.random_uniform(np.array([2]), F32(0), F32(1), "u8")
    with pytest.raises(InputError, match="min_val < max_val"):
        opset.random_uniform(np.array([2]), F32(1), F32(1), "f32")


def _gather_tree(ids: np.ndarray, parents: np.ndarray, lengths: np.ndarray, end: int) -> np.ndarray:
    """OpenVINO's reference GatherTree, loop by loop."""
    time, batch, beams = ids.shape
    out = np.empty_like(ids)
    for b in range(batch):
        for beam in range(beams):
            last = min(time, int(lengths[b]))
            out[last:, b, beam] = end
            if last == 0:
                continue
            parent = int(parents[last - 1, b, beam])
            out[last - 1, b, beam] = ids[last - 1, b, beam]
            for level in reversed(range(last - 1)):
                out[level, b, beam] = ids[level, b, parent]
                parent = int(parents[level, b, parent])
            finished = False
            for t in range(last):
                if finished:
                    out[t, b, beam] = end
                elif out[t, b, beam] == end:
                    finished = True
    return out


@pytest.mark.parametrize("dtype", [np.int32, F32])
@pytest.mark.parametrize("lengths", [[5, 3, 7], [1, 4, 0]])
def test_gather_tree(dtype: Any, lengths: list[int]) -> None:
    ids = RNG.integers(0, 6, (5, 3, 4)).astype(dtype)
    parents = RNG.integers(0, 4, (5, 3, 4)).astype(dtype)
    seq = np.array(lengths, dtype)
    got = _outputs(lambda i, p: opset.gather_tree(i, p, seq, dtype(2)), [ids, parents])[0]
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, _gather_tree(ids, parents, seq, 2))


def _ctc_loss(logits: np.ndarray, steps: np.ndarray, labels: np.ndarray, lengths: np.ndarray, blank: int,
              collapse: bool, merge: bool, unique: bool) -> np.ndarray:
    """The CTC loss by the forward algorithm over the labels with blanks between them (float64)."""
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    losses = []
    for n in range(len(logits)):
        target = [int(v) for v in labels[n, :lengths[n]]]
        if collapse:
            target = [v for i, v in enumerate(target) if i == 0 or v != target[i - 1]]
        if unique:
            target = [v for i, v in enumerate(target) if v not in target[:i]]
        ext = [blank]
        for v in target:
            ext += [v, blank]
        alpha = np.full(len(ext), -np.inf)
        alpha[:2] = logp[n, 0, ext[:2]]
        for t in range(1, int(steps[n])):
            new = np.full(len(ext), -np.inf)
            for s, v in enumerate(ext):
                ways = [alpha[s]] if (v == blank or merge) else []
                ways += [alpha[s - 1]] if s else []
                ways += [alpha[s - 2]] if s > 1 and v != blank and (not merge or v != ext[s - 2]) else []
                new[s] = np.logaddexp.reduce(ways) + logp[n, t, v]
            alpha = new
        losses.append(-np.logaddexp.reduce(alpha[-2:] if target else alpha[-1:]))
    return np.asarray(losses)


@pytest.mark.parametrize(("collapse", "merge", "unique"), [(False, True, False), (True, True, False),
                                                           (False, False, False), (True, False, True)])
@pytest.mark.parametrize("blank", [None, 0])
def test_ctc_loss(collapse: bool, merge: bool, unique: bool, blank: int | None) -> None:
    logits = RNG.standard_normal((4, 6, 5)).astype(F32)
    labels = np.array([[1, 1, 2, 0, 0, 3], [2, 2, 3, 1, 2, 1], [3, 1, 3, 1, 3, 3], [1, 2, 3, 4, 1, 2]],
                      np.int32)
    if blank == 0:
        labels = labels + 1 - (labels == 4) * 4  # classes 1 to 4
    steps, lengths = np.array([6, 5, 6, 3], np.int32), np.array([3, 2, 5, 0], np.int32)
    blank_input = None if blank is None else np.int32(blank)
    got = _outputs(lambda x: opset.ctc_loss(x, steps, labels, lengths, blank_input, collapse, merge, unique),
                   [logits])[0]
    expected = _ctc_loss(logits.astype(np.float64), steps, labels, lengths, 4 if blank is None else 0,
                         collapse, merge, unique)
    assert got.shape == (4,) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_ctc_loss_of_an_impossible_labelling_is_infinite() -> None:
    logits = RNG.standard_normal((1, 3, 4)).astype(F32)
    got = _outputs(lambda x: opset.ctc_loss(x, np.array([3], np.int32), np.array([[1, 1, 1]], np.int32),
                                            np.array([3], np.int32)), [logits])[0]
    assert np.isposinf(got).all()


# --- devices and modules ------------------------------------------------------------------------------


def test_detection_ops_on_the_emulated_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    got = _outputs(lambda x: opset.roi_align(x, ROIS, ROI_BATCH, 3, 2, 2, 0.9, "avg"), [IMAGE], "GPU.0")[0]
    np.testing.assert_allclose(got, _roi_align(IMAGE, ROIS, ROI_BATCH, 3, 2, 2, 0.9, "asymmetric"),
                               rtol=1e-4, atol=1e-5)
    x = RNG.standard_normal((1, 8, 4, 6)).astype(F32)
    np.testing.assert_array_equal(_outputs(lambda p: opset.reorg_yolo(p, [2]), [x], "GPU.0")[0], _reorg(x, 2))
    y = RNG.integers(0, 256, (1, 4, 6)).astype(F32)
    u, v = (RNG.integers(0, 256, (1, 2, 3)).astype(F32) for _ in range(2))
    rgb = _outputs(opset.i420_to_rgb, [y[..., None], u[..., None], v[..., None]], "GPU.0")[0]
    np.testing.assert_allclose(rgb, _yuv_to_rgb(y, u, v, False), rtol=1e-5, atol=1e-3)


def test_each_opset_module_offers_the_new_functions() -> None:
    names = {"non_max_suppression", "roi_align", "roi_pooling", "reorg_yolo", "region_yolo", "prior_box",
             "prior_box_clustered", "gather_tree", "ctc_loss"}
    later = {"nv12_to_rgb", "nv12_to_bgr", "i420_to_rgb", "i420_to_bgr", "random_uniform"}
    assert names | later <= set(opset.__all__) and names | later <= set(opset8.__all__)
    assert names <= set(opset1.__all__) and not later & set(opset1.__all__)
    assert not hasattr(opset1, "nv12_to_rgb") and not hasattr(opset1, "random_uniform")
