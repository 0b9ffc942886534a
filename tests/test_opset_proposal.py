"""Proposal (opsets 1 and 4) and GenerateProposals (opset 9) built with ``inferplex.opset``, against
OpenVINO's CPU on the same graph built with ``openvino.opset4``/``opset9``: the boxes (within float32's
last places: OpenVINO's CPU fuses some of its products and sums), the scores, Proposal's padding and
its end marker, GenerateProposals' counts per image, for Caffe's and TensorFlow's rules, each
clipping and normalizing option, a few images and either image-shape form; on both of the CPU
device's engines and on an emulated GPU; and the ops read from IRs OpenVINO saved."""

from __future__ import annotations

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
ov_opset4 = pytest.importorskip("openvino.opset4")
ov_opset9 = pytest.importorskip("openvino.opset9")

U32 = np.uint32


def _attrs(**changes: Any) -> dict[str, Any]:
    """OpenVINO's typed attributes (its Python API takes numpy unsigned integers, floats and bools)."""
    attrs: dict[str, Any] = {
        "base_size": U32(16), "pre_nms_topn": U32(60), "post_nms_topn": U32(20),
        "nms_thresh": np.float32(0.7), "feat_stride": U32(16), "min_size": U32(16),
        "ratio": np.array([0.5, 1.0, 2.0], np.float32), "scale": np.array([8.0, 16.0], np.float32)}
    attrs.update(changes)
    return attrs


def _inputs(seed: int, images: int, anchors: int, height: int, width: int, info: list[float]
            ) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random((images, 2 * anchors, height, width)).astype(np.float32),
            (rng.standard_normal((images, 4 * anchors, height, width)) * 0.3).astype(np.float32),
            np.array(info, np.float32)]


def _shapes(feeds: list[np.ndarray]) -> list[list[int]]:
    return [list(feed.shape) for feed in feeds]


def _openvino(module: Any, attrs: dict[str, Any], feeds: list[np.ndarray]) -> tuple[Any, list[np.ndarray]]:
    params = [module.parameter(shape, np.float32) for shape in _shapes(feeds)]
    model = openvino.Model(module.proposal(*params, attrs).outputs(), params, "proposal")
    results = openvino.Core().compile_model(model, "CPU")(feeds)
    return model, [np.asarray(results[i]) for i in range(len(model.outputs))]


def _inferplex(attrs: dict[str, Any], feeds: list[np.ndarray], device: str = "CPU",
               config: dict[str, Any] | None = None) -> list[np.ndarray]:
    params = [opset.parameter(shape, np.float32) for shape in _shapes(feeds)]
    node = opset.proposal(*params, attrs)
    model = ov.Model([node.output(i) for i in range(node.get_output_size())], params, "proposal")
    return [np.asarray(v) for v in ov.Core().compile_model(model, device, config or {})(feeds).to_tuple()]


def _kept(boxes: np.ndarray, images: int) -> np.ndarray:
    """Which rows hold a kept box: those before each image's end marker (OpenVINO's CPU leaves the
    scores of the padding rows unwritten; inferplex writes 0)."""
    rows = boxes.reshape(images, -1, 5)[:, :, 0]
    ended = np.cumsum(rows == -1, axis=1) > 0
    return ~ended.reshape(-1)


def _same(got: list[np.ndarray], want: list[np.ndarray], images: int) -> None:
    assert [g.shape for g in got] == [w.shape for w in want]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(got[0][:, 0], want[0][:, 0])  # image indices and end markers
    kept = _kept(want[0], images)
    np.testing.assert_allclose(got[1][kept], want[1][kept], rtol=1e-6, atol=0)
    assert not got[1][~kept].any()


CASES = {
    "caffe": (_attrs(), 2, [112, 144, 1.0]),
    "tensorflow": (_attrs(framework=np.str_("tensorflow")), 2, [112, 144, 1.0]),
    "clip_after_nms_and_normalize": (_attrs(clip_after_nms=np.bool_(True), normalize=np.bool_(True)), 1,
                                     [112, 144, 1.0]),
    "no_clip_before_nms": (_attrs(clip_before_nms=np.bool_(False)), 1, [112, 144, 1.0]),
    "scaled_deltas": (_attrs(box_size_scale=np.float32(2.0), box_coordinate_scale=np.float32(0.5)), 1,
                      [112, 144, 1.0]),
    "height_and_width_scales": (_attrs(min_size=U32(24)), 1, [112, 144, 0.5, 1.5]),
    "fewer_kept_than_asked": (_attrs(post_nms_topn=U32(300), pre_nms_topn=U32(200),
                                     nms_thresh=np.float32(0.3), min_size=U32(1)), 2, [112, 144, 1.0]),
    "tensorflow_normalized": (_attrs(framework=np.str_("tensorflow"), normalize=np.bool_(True),
                                     clip_after_nms=np.bool_(True)), 2, [100, 130, 1.0, 1.0]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
def test_proposal_matches_openvinos_cpu(case: str, engine: str) -> None:
    attrs, images, info = CASES[case]
    feeds = _inputs(3, images, 6, 7, 9, info)
    _, want = _openvino(ov_opset4, attrs, feeds)
    _same(_inferplex(attrs, feeds, config={"ENGINE": engine}), want, images)
    if case == "fewer_kept_than_asked":  # each image's padding starts with the -1 marker
        rows = want[0].reshape(images, -1, 5)
        assert all((rows[i, :, 0] == -1).sum() == 1 for i in range(images))


def test_proposal_runs_on_an_emulated_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    attrs, images, info = CASES["caffe"]
    feeds = _inputs(5, images, 6, 7, 9, info)
    _, want = _openvino(ov_opset4, attrs, feeds)
    _same(_inferplex(attrs, feeds, device="GPU.0"), want, images)


def test_proposal_takes_plain_python_numbers() -> None:
    """OpenVINO's Python API insists on numpy unsigned integers; plain ints and lists give the same op."""
    attrs = _attrs()
    plain = {key: value.tolist() if isinstance(value, np.ndarray) else value.item()
             for key, value in attrs.items()}
    feeds = _inputs(7, 1, 6, 5, 6, [80, 96, 1.0])
    _, want = _openvino(ov_opset4, attrs, feeds)
    _same(_inferplex(plain, feeds), want, 1)


@pytest.mark.parametrize(("module", "outputs"), [(ov_opset1, 1), (ov_opset4, 2)])
def test_proposal_read_from_an_ir(tmp_path: Path, module: Any, outputs: int) -> None:
    """Proposal-1 (the boxes alone) and Proposal-4 (boxes and scores) saved by OpenVINO."""
    attrs, images, info = CASES["caffe"]
    feeds = _inputs(9, images, 6, 7, 9, info)
    model, want = _openvino(module, attrs, feeds)
    path = tmp_path / "proposal.xml"
    openvino.save_model(model, str(path))
    compiled = ov.Core().compile_model(str(path), "CPU")
    got = [np.asarray(v) for v in compiled(feeds).to_tuple()]
    assert len(got) == outputs
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-4)
    if outputs == 2:
        kept = _kept(want[0], images)
        np.testing.assert_allclose(got[1][kept], want[1][kept], rtol=1e-6, atol=0)


def test_proposal_reports_openvinos_type_and_shapes() -> None:
    params = [opset1.parameter(shape, np.float32) for shape in ([2, 12, 7, 9], [2, 24, 7, 9], [3])]
    node = opset1.proposal(*params, _attrs())
    assert node.get_type_name() == "Proposal"
    assert [list(node.get_output_partial_shape(i).to_shape()) for i in range(2)] == [[40, 5], [40]]


@pytest.mark.parametrize(("changes", "names"), [
    ({"framework": "mxnet"}, "framework"),
    ({"base_size": None}, "base_size"),
    ({"anchor_count": 3}, "anchor_count"),
    ({"post_nms_topn": 0}, "post_nms_topn"),
    ({"ratio": []}, "ratio"),
])
def test_proposal_refuses_bad_attributes_by_name(changes: dict[str, Any], names: str) -> None:
    attrs = {**_attrs(), **changes}
    if changes.get("base_size", 0) is None:
        del attrs["base_size"]
    params = [opset.parameter(shape, np.float32) for shape in ([1, 12, 4, 4], [1, 24, 4, 4], [3])]
    with pytest.raises(InputError, match=names):
        opset.proposal(*params, attrs)


def test_proposal_refuses_an_image_shape_of_another_size() -> None:
    params = [opset.parameter(shape, np.float32) for shape in ([1, 12, 4, 4], [1, 24, 4, 4], [2, 3])]
    with pytest.raises(InputError, match=r"image_shape \[3\] or \[4\].*got \[2, 3\]"):
        opset.proposal(*params, _attrs())


def test_proposal_refuses_channels_that_do_not_fit_its_anchors() -> None:
    params = [opset.parameter(shape, np.float32) for shape in ([1, 10, 4, 4], [1, 24, 4, 4], [3])]
    with pytest.raises(InputError, match=r"6 anchors .* need 12 channels of class_probs, got 10"):
        opset.proposal(*params, _attrs())


# --- GenerateProposals ------------------------------------------------------------------------------


def _proposal_inputs(seed: int, images: int, height: int, width: int, info: list[list[float]]
                     ) -> list[np.ndarray]:
    """im_info [N, 3 or 4], anchors [H, W, 3, 4] (three shapes about each place, 8 pixels apart),
    deltas and scores."""
    rng = np.random.default_rng(seed)
    shapes = np.array([[-8, -8, 8, 8], [-16, -8, 16, 8], [-8, -16, 8, 16]], np.float32)
    ys, xs = np.meshgrid(np.arange(height) * 8.0, np.arange(width) * 8.0, indexing="ij")
    places = np.stack([xs, ys, xs, ys], -1)[:, :, None, :]
    return [np.array(info, np.float32), (places + shapes[None, None]).astype(np.float32),
            (rng.standard_normal((images, 12, height, width)) * 0.4).astype(np.float32),
            rng.random((images, 3, height, width)).astype(np.float32)]


def _generated(module: Any, core: Any, feeds: list[np.ndarray], **attrs: Any) -> list[np.ndarray]:
    params = [module.parameter(list(feed.shape), np.float32) for feed in feeds]
    node = module.generate_proposals(*params, **attrs)
    model = core.Model([node.output(i) for i in range(3)], params, "generate_proposals")
    results = core.Core().compile_model(model, "CPU")(feeds)
    return [np.asarray(results[i]) for i in range(3)]


GENERATE_CASES = {
    "normalized": ({"min_size": 1.0, "nms_threshold": 0.7, "pre_nms_count": 50, "post_nms_count": 20},
                   [[40, 48, 1.0], [36, 44, 1.5]]),
    "pixel_boxes": ({"min_size": 4.0, "nms_threshold": 0.5, "pre_nms_count": 30, "post_nms_count": 10,
                     "normalized": False}, [[40, 48, 1.0, 2.0], [36, 44, 1.5, 0.5]]),
    "small_boxes_left_out": ({"min_size": 10.0, "nms_threshold": 0.6, "pre_nms_count": 90,
                              "post_nms_count": 90, "roi_num_type": "i32"}, [[40, 48, 1.0], [36, 44, 1.5]]),
}


@pytest.mark.parametrize("case", sorted(GENERATE_CASES))
def test_generate_proposals_matches_openvinos_cpu(case: str) -> None:
    attrs, info = GENERATE_CASES[case]
    feeds = _proposal_inputs(11, len(info), 5, 6, info)
    want = _generated(ov_opset9, openvino, feeds, **attrs)
    got = _generated(opset, ov, feeds, **attrs)
    assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])
    if case == "small_boxes_left_out":  # fewer than post_nms_count: the small boxes took no part
        assert (want[2] < 90).all()


def test_generate_proposals_runs_on_an_emulated_gpu(emulated_core: ov.Core) -> None:
    attrs, info = GENERATE_CASES["pixel_boxes"]
    feeds = _proposal_inputs(17, 2, 5, 6, info)
    params = [opset.parameter(list(feed.shape), np.float32) for feed in feeds]
    node = opset.generate_proposals(*params, **attrs)
    same_on_the_gpu(emulated_core, ov.Model([node.output(i) for i in range(3)], params, "generate_proposals"),
                    feeds, atol=1e-4)


def test_generate_proposals_read_from_an_ir(tmp_path: Path) -> None:
    attrs, info = GENERATE_CASES["pixel_boxes"]
    feeds = _proposal_inputs(13, 2, 5, 6, info)
    params = [ov_opset9.parameter(list(feed.shape), np.float32) for feed in feeds]
    node = ov_opset9.generate_proposals(*params, **attrs)
    model = openvino.Model(node.outputs(), params, "generate_proposals")
    want = [np.asarray(v) for v in openvino.Core().compile_model(model, "CPU")(feeds).values()]
    path = tmp_path / "generate_proposals.xml"
    openvino.save_model(model, str(path))
    got = [np.asarray(v) for v in ov.Core().compile_model(str(path), "CPU")(feeds).to_tuple()]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(got[2], want[2])


def test_generate_proposals_refusals() -> None:
    shapes = ([1, 3], [4, 4, 3, 4], [1, 12, 4, 4], [1, 3, 4, 4])
    params = [opset.parameter(shape, np.float32) for shape in shapes]
    with pytest.raises(InputError, match=r"nms_eta 0\.5.*accepted: 1\.0"):
        opset.generate_proposals(*params, 1.0, 0.7, 10, 5, nms_eta=0.5)
    with pytest.raises(InputError, match=r"roi_num_type 'u8'.*i32, i64"):
        opset.generate_proposals(*params, 1.0, 0.7, 10, 5, roi_num_type="u8")
    with pytest.raises(InputError, match="post_nms_count 0"):
        opset.generate_proposals(*params, 1.0, 0.7, 10, 0)
    assert "generate_proposals" in opset.__all__ and "generate_proposals" not in ov.opset8.__all__
