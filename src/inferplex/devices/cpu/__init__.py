"""The CPU device: OpenVINO's CPU plugin by default, ONNX Runtime as the other engine and fallback.

Modules: ``plugin`` (the device family, its properties, the engine choice),
``openvino_engine`` and ``onnxruntime_engine`` (one program class each, sharing
``program.CpuProgram``), ``openvino_core`` (the process's OpenVINO Core and
how a CPU config maps onto it), ``openvino_dtypes`` (bfloat16, float8, sub-byte and
string tensors across OpenVINO's API), ``onnxruntime_dtypes`` (float8 tensors across
ONNX Runtime's API), ``onnxruntime_support`` (which nodes ONNX Runtime
runs), ``quantized`` (which quantized models each engine computes unlike ONNX, and
how ONNX Runtime then runs them as written), ``profile`` (both engines' counters as
profiling records), ``cpu_info``
(name, cores, memory, instruction sets) and ``threads`` (thread priority).
"""

from inferplex.devices.cpu.onnxruntime_engine import stream_layout
from inferplex.devices.cpu.plugin import CpuPlugin
from inferplex.devices.cpu.program import ENGINES, CpuProgram

__all__ = ["ENGINES", "CpuPlugin", "CpuProgram", "stream_layout"]
