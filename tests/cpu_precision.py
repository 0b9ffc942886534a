"""The suite's CPU computes in float32 on every machine.

A CPU with bf16 (AMX, AVX512_BF16) runs a model's float ops in bf16 when no
``INFERENCE_PRECISION_HINT`` is given, as OpenVINO does; the suite's references are float32
(ONNX Runtime, numpy), so its CPU is pinned to f32 through the process's OpenVINO Core, as on
a CPU without bf16.  Tests of the bf16 default ask for bf16 by name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def pin_float32() -> None:
    """Make f32 the CPU's default precision in this process (nothing where OpenVINO is missing)."""
    from inferplex.devices.cpu import openvino_core

    if openvino_core.available():
        openvino_core.core().set_property("CPU", {"INFERENCE_PRECISION_HINT": "f32"})


@contextlib.contextmanager
def native_default() -> Iterator[None]:
    """The CPU's own default precision (OpenVINO's: bf16 where the CPU has AMX or AVX512_BF16) for
    the block, for tests that compare the defaults with OpenVINO's; f32 again after it."""
    import openvino

    from inferplex.devices.cpu import openvino_core

    native = openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
    openvino_core.core().set_property("CPU", {"INFERENCE_PRECISION_HINT": native})
    try:
        yield
    finally:
        pin_float32()
