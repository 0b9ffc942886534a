"""Output shapes of ops inferplex builds from several ONNX ops, as OpenVINO's shape inference gives
them when the op is built (where ONNX's inference of the parts loses a dim): each op built with
``inferplex.opsetN`` and ``openvino.opsetN`` on the same inputs, every output's partial shape the
same."""

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
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_output_shapes_are_openvinos(case: str) -> None:
    version, build = CASES[case]
    ours = build(getattr(inferplex, f"opset{version}"))
    theirs = build(getattr(openvino, f"opset{version}"))
    assert ours.get_output_size() == theirs.get_output_size()
    assert [str(ours.get_output_partial_shape(i)) for i in range(ours.get_output_size())] == \
        [str(theirs.get_output_partial_shape(i)) for i in range(theirs.get_output_size())]
