"""Compile keys set on a device with ``set_property`` apply to later compiles there, as in OpenVINO.

OpenVINO's documented behaviour: a property a device's compile takes can be set
on the device (``core.set_property("GPU", {...})``); later ``compile_model`` calls
on that device use it, a compile's own config wins, and ``core.get_property``
reads it back.  Checked here for the engine's keys (OUTPUT_PRECISION,
ENABLE_TRACE, EXIT_TIMEOUT) and the GPU's own compile keys, on the emulated GPU
and the CPU; results against ONNX Runtime on the whole model.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.errors import DeviceNameError, PropertyError

from conftest import make_model, ort_run

pytest.importorskip("torch")

F16_BOUND = 4 * 2**-9
"""A few roundings to f16, relative: the tests hint f16, which devices compute in whatever type
the outputs come back in."""


@pytest.fixture
def core() -> Iterator[ov.Core]:
    """A fresh Core (set_property changes it) with two emulated GPUs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "2")
        yield ov.Core()


def _model() -> onnx.ModelProto:
    weight = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["p"])]
    return make_model(nodes, [("x", TensorProto.FLOAT, [4, 16])], [("p", TensorProto.FLOAT, [4, 8])],
                      [helper.make_tensor("w", TensorProto.FLOAT, [16, 8], weight.ravel())])


X = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)


def _run(compiled: ov.CompiledModel) -> np.ndarray:
    result = compiled({"x": X})["p"]
    (expected,) = ort_run(_model(), {"x": X})
    np.testing.assert_allclose(result.astype(np.float32), expected, rtol=F16_BOUND, atol=F16_BOUND)
    return result


@pytest.mark.parametrize("device", ["GPU", "GPU.0", "CPU"])
def test_output_precision_set_on_a_device_applies_to_its_compiles(core: ov.Core, device: str) -> None:
    core.set_property(device, {"OUTPUT_PRECISION": "inference", "INFERENCE_PRECISION_HINT": "f16"})
    assert core.get_property(device, "OUTPUT_PRECISION") == "INFERENCE"
    assert core.get_property(device, "SUPPORTED_PROPERTIES")["OUTPUT_PRECISION"] == "RW"
    compiled = core.compile_model(_model(), device)
    assert compiled.get_property("OUTPUT_PRECISION") == "INFERENCE"
    assert compiled.outputs[0].element_type == ov.Type.f16
    assert _run(compiled).dtype == np.float16
    # the compile's own config wins over the device's setting
    own = core.compile_model(_model(), device, {"OUTPUT_PRECISION": "MODEL"})
    assert own.outputs[0].element_type == ov.Type.f32 and _run(own).dtype == np.float32


def test_a_setting_stays_on_its_device(core: ov.Core) -> None:
    core.set_property("GPU.1", {"OUTPUT_PRECISION": "INFERENCE", "INFERENCE_PRECISION_HINT": "f16"})
    assert core.get_property("GPU.1", "OUTPUT_PRECISION") == "INFERENCE"
    for device in ("GPU.0", "CPU"):
        assert core.get_property(device, "OUTPUT_PRECISION") == "MODEL"
        assert _run(core.compile_model(_model(), device)).dtype == np.float32
    assert _run(core.compile_model(_model(), "GPU.1")).dtype == np.float16
    # a family's setting reaches each of its devices; the device's own wins
    core.set_property("GPU", {"OUTPUT_PRECISION": "INFERENCE", "INFERENCE_PRECISION_HINT": "f16"})
    core.set_property("GPU.1", {"OUTPUT_PRECISION": "MODEL"})
    assert _run(core.compile_model(_model(), "GPU.0")).dtype == np.float16
    assert _run(core.compile_model(_model(), "GPU.1")).dtype == np.float32


def test_core_wide_and_virtual_device_settings(core: ov.Core) -> None:
    core.set_property({"OUTPUT_PRECISION": "INFERENCE", "INFERENCE_PRECISION_HINT": "f16"})
    assert core.get_property("OUTPUT_PRECISION") == "INFERENCE"
    assert core.get_property("CPU", "OUTPUT_PRECISION") == "INFERENCE"
    assert _run(core.compile_model(_model(), "CPU")).dtype == np.float16
    core.set_property("MULTI", {"OUTPUT_PRECISION": "MODEL"})
    assert core.get_property("MULTI", "OUTPUT_PRECISION") == "MODEL"
    compiled = core.compile_model(_model(), "MULTI:GPU.0,CPU")
    assert compiled.get_property("OUTPUT_PRECISION") == "MODEL" and _run(compiled).dtype == np.float32
    assert _run(core.compile_model(_model(), "AUTO:GPU.0,CPU")).dtype == np.float16


def test_trace_and_exit_timeout_set_on_a_device(core: ov.Core) -> None:
    assert core.get_property("GPU", "ENABLE_TRACE") is False
    core.set_property("GPU", {"ENABLE_TRACE": "YES", "EXIT_TIMEOUT": 7})
    assert core.get_property("GPU", "ENABLE_TRACE") is True
    assert core.get_property("GPU", "EXIT_TIMEOUT") == 7.0
    compiled = core.compile_model(_model(), "GPU")
    _run(compiled)
    assert compiled.get_property("EXIT_TIMEOUT") == 7.0
    assert compiled.get_property("TRACE")["traceEvents"]
    with pytest.raises(PropertyError, match="ENABLE_TRACE"):
        core.compile_model(_model(), "CPU").get_property("TRACE")


def test_bad_values_are_refused_naming_each_and_nothing_is_kept(core: ov.Core) -> None:
    with pytest.raises(PropertyError) as error:
        core.set_property("GPU", {"OUTPUT_PRECISION": "f16", "TORCH_COMPILE_MODE": "fastest",
                                  "NUM_STREAMS": 2})
    message = str(error.value)
    assert "OUTPUT_PRECISION" in message and "'f16'" in message and "MODEL, INFERENCE" in message
    assert "TORCH_COMPILE_MODE" in message and "'fastest'" in message and "max-autotune" in message
    assert core.get_property("GPU", "OUTPUT_PRECISION") == "MODEL"
    assert core.get_property("GPU", "NUM_STREAMS") != 2
    with pytest.raises(PropertyError, match="EXIT_TIMEOUT"):
        core.set_property("CPU", {"EXIT_TIMEOUT": "soon"})
    with pytest.raises(PropertyError, match="OUTPUT_PRECISION") as unknown:
        core.set_property("GPU", {"OUTPUT_PRECISON": "MODEL"})  # misspelt: the accepted keys are listed
    assert "unknown property 'OUTPUT_PRECISON'" in str(unknown.value)
    with pytest.raises(DeviceNameError):
        core.set_property("GPU.7", {"OUTPUT_PRECISION": "MODEL"})


@pytest.mark.parametrize(("key", "value", "read"), [
    ("TORCH_COMPILE", "NO", "NO"), ("TORCH_COMPILE_MODE", "default", "default"),
    ("GPU_CHANNELS_LAST", "NO", "NO"), ("CUDA_GRAPHS", "NO", False), ("SHAPE_SPECIALIZATION", False, False),
    ("GPU_QUEUE_THROTTLE", "low", "LOW")])
def test_the_gpus_own_compile_keys_set_on_the_device(core: ov.Core, key: str, value: object,
                                                     read: object) -> None:
    """Set on the device, a GPU key compiles as the same key in the compile config does."""
    given = core.compile_model(_model(), "GPU", {key: value})
    core.set_property("GPU", {key: value})
    assert core.get_property("GPU", key) == read
    assert core.get_property("GPU", "SUPPORTED_PROPERTIES")[key] == "RW"
    compiled = core.compile_model(_model(), "GPU")
    assert compiled.get_property(key) == given.get_property(key)
    _run(compiled)
    with pytest.raises(PropertyError, match=f"unknown property '{key}' for CPU"):
        core.set_property("CPU", {key: value})


def test_encryption_callbacks_set_on_a_device_encrypt_exports_and_decrypt_imports(core: ov.Core) -> None:
    import base64

    with pytest.raises(PropertyError, match="CACHE_ENCRYPTION_CALLBACKS is not set"):
        core.get_property("CPU", "CACHE_ENCRYPTION_CALLBACKS")  # write-only in OpenVINO: not listed
    assert "CACHE_ENCRYPTION_CALLBACKS" not in core.get_property("CPU", "SUPPORTED_PROPERTIES")
    core.set_property("CPU", {"CACHE_ENCRYPTION_CALLBACKS": [base64.b64encode, base64.b64decode]})
    blob = core.compile_model(_model(), "CPU").export_model()
    assert isinstance(blob, bytes)
    _run(core.import_model(blob, "CPU"))  # decrypted with the device's callbacks
    _run(ov.Core().import_model(base64.b64decode(blob), "CPU"))  # the blob is encrypt(plain blob)


@pytest.mark.gpu
def test_output_precision_set_on_a_cuda_gpu() -> None:
    """On a CUDA GPU: OUTPUT_PRECISION set on the device gives f16 outputs within f16's bounds."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    core = ov.Core()
    core.set_property("GPU", {"OUTPUT_PRECISION": "INFERENCE", "INFERENCE_PRECISION_HINT": "f16"})
    assert core.get_property("GPU.0", "OUTPUT_PRECISION") == "INFERENCE"
    compiled = core.compile_model(_model(), "GPU")
    assert compiled.outputs[0].element_type == ov.Type.f16
    assert _run(compiled).dtype == np.float16
    assert _run(core.compile_model(_model(), "CPU")).dtype == np.float32  # the CPU keeps the model's types
