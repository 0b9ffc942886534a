"""What OpenVINO programs print: the reprs of types, ports, ops, models, compiled models, requests and
queues, and how devices are listed.  Each printed form is compared with what the installed openvino
prints for the same program (skipped where openvino is not installed).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import inferplex as ov

from conftest import mlp_model

real = pytest.importorskip("openvino")


def _built(module: ModuleType) -> dict[str, Any]:
    """One program, written once, run on either package: a small model and what it is made of."""
    ops = module.opset13
    x = ops.parameter([2, 3], np.float32, name="x")
    act = ops.relu(x)
    act.set_friendly_name("act")
    act.output(0).get_tensor().set_names({"y"})
    halves = ops.split(x, 0, 2)
    halves.set_friendly_name("halves")
    constant = ops.constant(np.zeros((2, 3), np.float32))
    constant.set_friendly_name("zeros")
    model = module.Model([act], [x], "printed")
    compiled = module.Core().compile_model(model, "CPU")
    return {"x": x, "act": act, "halves": halves, "model": model, "compiled": compiled,
            "dynamic": ops.parameter(module.PartialShape.dynamic(), np.float32, name="any"),
            "indices": ops.parameter([2, -1], np.int64, name="indices"),
            "constant": constant}


PRINTED: dict[str, Callable[[ModuleType, dict[str, Any]], Any]] = {
    "model input": lambda m, b: b["model"].input(0),
    "model outputs": lambda m, b: b["model"].outputs,
    "op output": lambda m, b: b["act"].output(0),
    "op input": lambda m, b: b["act"].input(0),
    "compiled input": lambda m, b: b["compiled"].input(0),
    "op": lambda m, b: b["act"],
    "op of two outputs": lambda m, b: b["halves"],
    "parameter": lambda m, b: b["x"],
    "parameter of dynamic rank": lambda m, b: b["dynamic"],
    "integer parameter": lambda m, b: b["indices"],
    "constant": lambda m, b: b["constant"],
    "model": lambda m, b: b["model"],
    "compiled model": lambda m, b: b["compiled"],
    "request": lambda m, b: b["compiled"].create_infer_request(),
    "queue": lambda m, b: m.AsyncInferQueue(b["compiled"], 2),
    "tensor": lambda m, b: m.Tensor(np.zeros((2, 3), np.float32)),
    "port tensor": lambda m, b: b["model"].input(0).get_tensor(),
    "element types": lambda m, b: [m.Type.f32, m.Type.f64, m.Type.f16, m.Type.bf16, m.Type.i64,
                                   m.Type.u8, m.Type.i4, m.Type.boolean, m.Type.dynamic],
}


@pytest.fixture(scope="module")
def programs() -> tuple[dict[str, Any], dict[str, Any]]:
    return _built(ov), _built(real)


@pytest.mark.parametrize("what", sorted(PRINTED))
def test_printed_as_openvino_prints_it(what: str, programs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    ours, theirs = programs
    shown = PRINTED[what]
    assert repr(shown(ov, ours)) == repr(shown(real, theirs))


def test_element_types_print_and_format_as_openvino_and_keep_their_short_name() -> None:
    for name in ("f32", "f64", "f16", "bf16", "i8", "i64", "u1", "u4", "u16", "boolean", "nf4", "string"):
        ours, theirs = getattr(ov.Type, name), getattr(real.Type, name)
        assert str(ours) == str(theirs) and f"{ours}" == f"{theirs}", name
        assert ours.get_type_name() == theirs.get_type_name() == name


def test_a_lone_gpu_is_listed_by_its_family_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenVINO lists a family's only device as ``GPU``, several as ``GPU.0``, ``GPU.1``; the
    AVAILABLE_DEVICES property gives the family's device ids."""
    pytest.importorskip("torch")
    model = mlp_model(batch=2)
    x = np.random.default_rng(1).standard_normal((2, 32)).astype(np.float32)
    expected = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(x)[0]
    for count, listed, ids in ((1, ["CPU", "GPU"], ["0"]), (2, ["CPU", "GPU.0", "GPU.1"], ["0", "1"])):
        monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", str(count))
        core = ov.Core()
        assert core.available_devices == listed
        assert core.get_property("GPU", "AVAILABLE_DEVICES") == ids
        assert core.get_property("CPU", "AVAILABLE_DEVICES") == \
            real.Core().get_property("CPU", "AVAILABLE_DEVICES")
        for device in listed:  # each listed name compiles, as programs iterating the list do
            result = core.compile_model(model, device, {"INFERENCE_PRECISION_HINT": "f32"})(x)[0]
            np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-6)


def test_cache_dir_takes_a_temporary_directory_object(tmp_path: Path) -> None:
    """OpenVINO's docs pass ``tempfile.TemporaryDirectory()`` itself as ``CACHE_DIR``: the cache goes
    into that folder."""
    model = mlp_model(batch=2)
    with tempfile.TemporaryDirectory(dir=tmp_path) as _, tempfile.TemporaryDirectory(dir=tmp_path) as name:
        folder = tempfile.TemporaryDirectory(dir=tmp_path)
        core = ov.Core()
        core.set_property({"CACHE_DIR": folder})
        assert core.get_property("CACHE_DIR") == folder.name
        core.compile_model(model, "CPU")
        assert any(Path(folder.name).iterdir())
        assert not any(Path(name).iterdir())
        folder.cleanup()


def test_a_model_built_without_a_name_is_named_as_openvino_names_it() -> None:
    names = []
    for module in (ov, real):
        x = module.opset13.parameter([2], np.float32)
        model = module.Model([module.opset13.relu(x)], [x])
        names.append((model.get_name(), model.get_friendly_name()))
    for name, friendly in names:
        assert re.fullmatch(r"Model\d+", name) and friendly == name, names
