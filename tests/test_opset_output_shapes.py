"""Ops inferplex builds from several ONNX ops, as OpenVINO builds them: output shapes as OpenVINO's
shape inference gives them when the op is built (where ONNX's inference of the parts loses a dim),
each op built with ``inferplex.opsetN`` and ``openvino.opsetN`` on the same inputs, every output's
partial shape the same; and computed parameters OpenVINO's builders take."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import inferplex

openvino = pytest.importorskip("openvino")

F32, I32 = np.float32, np.int32


def _param(module: Any, shape: list[int], dtype: Any = F32) -> Any:
    return module.parameter(shape, dtype)


CASES: dict[str, tuple[int, Callable[[Any], Any]]] = {
    "ctc_greedy_decoder": (1, lambda m: m.ctc_greedy_decoder(_param(m, [20, 8, 128]), _param(m, [20, 8]))),
    "ctc_greedy_decoder_seq_len": (6, lambda m: m.ctc_greedy_decoder_seq_len(
        _param(m, [8, 20, 128]), _param(m, [8], I32), _param(m, [1], I32))),
    "gather_tree": (1, lambda m: m.gather_tree(_param(m, [10, 2, 4]), _param(m, [10, 2, 4]), _param(m, [2]),
                                               _param(m, []))),
    "embedding_bag_offsets_sum": (3, lambda m: m.embedding_bag_offsets_sum(
        _param(m, [5, 2]), _param(m, [4], I32), _param(m, [3], I32))),
    "embedding_segments_sum": (3, lambda m: m.embedding_segments_sum(
        _param(m, [5, 2]), _param(m, [4], I32), _param(m, [4], I32), m.constant(np.array(3, I32)))),
    "nv12_to_rgb": (8, lambda m: m.nv12_to_rgb(_param(m, [1, 720, 640, 1]))),
    "i420_to_bgr": (8, lambda m: m.i420_to_bgr(_param(m, [1, 480, 640, 1]), _param(m, [1, 240, 320, 1]),
                                               _param(m, [1, 240, 320, 1]))),
    "roi_align_rotated": (15, lambda m: m.roi_align_rotated(_param(m, [2, 3, 12, 16]), _param(m, [7, 5]),
                                                            _param(m, [7], I32), 2, 3, 2, 0.5, True)),
    "space_to_batch": (2, lambda m: m.space_to_batch(_param(m, [1, 2, 2, 3]), np.array([1, 2, 3, 2]),
                                                     np.array([0, 0, 1, 0]), np.array([0, 0, 0, 1]))),
    "batch_to_space": (2, lambda m: m.batch_to_space(_param(m, [12, 1, 1, 2]), np.array([1, 2, 3, 2]),
                                                     np.array([0, 0, 1, 0]), np.array([0, 0, 0, 1]))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_output_shapes_are_openvinos(case: str) -> None:
    version, build = CASES[case]
    ours = build(getattr(inferplex, f"opset{version}"))
    theirs = build(getattr(openvino, f"opset{version}"))
    assert ours.get_output_size() == theirs.get_output_size()
    assert [str(ours.get_output_partial_shape(i)) for i in range(ours.get_output_size())] == \
        [str(theirs.get_output_partial_shape(i)) for i in range(theirs.get_output_size())]


def test_hard_sigmoid_and_selu_take_computed_parameters() -> None:
    """OpenVINO builds HardSigmoid and Selu of computed alpha, beta and lambda (its CPU then refuses
    to run them); inferplex builds and runs them, as the formulas give them."""
    x = (np.random.default_rng(0).standard_normal((2, 5)) * 3).astype(F32)
    data, alpha, beta = (inferplex.opset13.parameter(shape, F32) for shape in ([2, 5], [], [1]))
    built = [inferplex.opset13.hard_sigmoid(data, alpha, beta), inferplex.opset13.selu(data, alpha, beta)]
    assert [node.get_type_name() for node in built] == ["HardSigmoid", "Selu"]
    compiled = inferplex.Core().compile_model(inferplex.Model(built, [data, alpha, beta]), "CPU")
    results = compiled([x, np.float32(0.2), np.array([1.05], F32)])
    np.testing.assert_allclose(results[0], np.clip(0.2 * x + 1.05, 0, 1), rtol=1e-6, atol=1e-7)
    selu = 1.05 * np.where(x > 0, x, 0.2 * (np.exp(x) - 1))
    np.testing.assert_allclose(results[1], selu, rtol=1e-6, atol=1e-6)


def test_computed_parameters_of_more_than_one_value_are_refused() -> None:
    data = inferplex.opset13.parameter([2, 5], F32)
    refused = inferplex.errors.InputError
    with pytest.raises(refused, match=r"hard_sigmoid alpha takes one value, got float\[2\]"):
        inferplex.opset13.hard_sigmoid(data, inferplex.opset13.parameter([2], F32), np.float32(0.5))
    with pytest.raises(refused, match=r"selu lambda takes one value"):
        inferplex.opset13.selu(data, np.float32(1.6), inferplex.opset13.parameter([3], F32))
