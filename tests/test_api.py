"""The public surface: ``inferplex.__all__`` is pinned, resolves, and imports lightly."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import inferplex

PUBLIC = [
    "AsyncInferQueue",
    "AxisSet",
    "AxisVector",
    "CompiledModel",
    "ConstOutput",
    "Coordinate",
    "CoordinateDiff",
    "Core",
    "DevicePlugin",
    "DeviceProgram",
    "Dimension",
    "ElementType",
    "Extension",
    "InferRequest",
    "InferResults",
    "Input",
    "Layout",
    "MemoryInfo",
    "Model",
    "Node",
    "OVAny",
    "Op",
    "Output",
    "PartialShape",
    "Port",
    "ProfilingInfo",
    "ProfilingRecord",
    "RTMap",
    "Shape",
    "Strides",
    "Symbol",
    "Tensor",
    "Type",
    "Version",
    "__version__",
    "compile_model",
    "convert_model",
    "errors",
    "get_batch",
    "get_version",
    "helpers",
    "layout_helpers",
    "op",
    "opset",
    "opset1",
    "opset8",
    "preprocess",
    "properties",
    "save_model",
    "serialize",
    "set_batch",
    "tensor_from_file",
    "utils",
]

ERRORS = [
    "AffinityError", "CompileError", "DeviceError", "DeviceNameError", "InferenceError", "InferplexError",
    "InputError", "InputIndexError", "InputTypeError", "MemoryPlanError", "ModelError", "PluginError",
    "PropertyError", "PropertyTypeError", "RequestBusyError", "UnsupportedOpError",
]


def test_all_is_pinned() -> None:
    """Changing the public API is a decision: update PUBLIC here in the same change."""
    assert inferplex.__all__ == PUBLIC


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(inferplex, name)
    assert value is not None
    namespace: dict[str, object] = {}
    exec(f"from inferplex import {name}", namespace)  # noqa: S102 - the import statement itself
    assert namespace[name] is value


def test_errors_tree_is_pinned() -> None:
    assert sorted(inferplex.errors.__all__) == ERRORS
    for name in ERRORS:
        assert issubclass(getattr(inferplex.errors, name), inferplex.errors.InferplexError)


def test_version_is_a_string() -> None:
    assert isinstance(inferplex.__version__, str) and inferplex.__version__.count(".") >= 1


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.timeout(150)
def test_import_does_not_import_torch() -> None:
    out = _run("""
        import sys
        import inferplex as ov
        core = ov.Core()
        _ = core.read_model  # creating a Core and using the CPU must not load torch either
        print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
    """)
    assert out == "[]"


@pytest.mark.timeout(150)
def test_cpu_only_work_does_not_import_torch() -> None:
    out = _run("""
        import sys
        import numpy as np
        from onnx import TensorProto, helper
        import inferplex as ov
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 10
        result = ov.Core().compile_model(model, "CPU")(np.array([-1, 2], np.float32))[0]
        print(result.tolist(), "torch" in sys.modules)
    """)
    assert out == "[0.0, 2.0] False"


def test_get_versions_gives_openvino_shaped_versions() -> None:
    core = inferplex.Core()
    versions = core.get_versions("MULTI:CPU")
    assert list(versions) == ["MULTI", "CPU"]
    for version in versions.values():
        assert isinstance(version, inferplex.Version)
        assert version.build_number == inferplex.__version__
        assert (version.major, version.minor, version.patch) == tuple(
            int(part) for part in inferplex.__version__.split(".")[:3])
    assert "CPU" in versions["CPU"].description
    assert core.get_property("CPU", "ENGINE") in versions["CPU"].description
    assert repr(versions["CPU"]).startswith("<Version: ")
