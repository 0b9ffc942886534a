"""OpenVINO programs run unchanged where ``openvino`` is made to mean inferplex.

A program (or a test harness) may alias the name: ``sys.modules["openvino"] = inferplex``, or an
import hook that sends ``openvino.*`` to ``inferplex.*``.  inferplex itself uses the installed
openvino package (the CPU device's OpenVINO engine, reading and writing IR), which must stay the
real one beside such an alias.  Each case runs in its own process, since the alias is process-wide;
results are compared with ONNX Runtime on the source model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest

from conftest import mlp_model, ort_run

pytest.importorskip("openvino")

SRC = Path(__file__).resolve().parents[1] / "src"

ALIASES = {
    "sys.modules": """
        import inferplex
        sys.modules["openvino"] = inferplex
    """,
    "import hook": """
        import importlib, importlib.abc, importlib.util

        class Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
            def find_spec(self, name, path, target=None):
                if name == "openvino" or name.startswith("openvino."):
                    return importlib.util.spec_from_loader(name, self)
                return None

            def create_module(self, spec):
                return importlib.import_module("inferplex" + spec.name[len("openvino"):])

            def exec_module(self, module):
                pass

        sys.meta_path.insert(0, Alias())
    """,
}

PROGRAM = """
    import numpy as np
    import openvino as ov
    import openvino.properties.hint as hints

    assert ov.__name__ == "inferplex", ov
    core = ov.Core()
    x = np.load("x.npy")
    ov.save_model(core.read_model("mlp.onnx"), "ir/mlp.xml", compress_to_fp16=False)  # written by OpenVINO
    model = core.read_model("ir/mlp.xml")  # and read by OpenVINO
    for device in ("CPU", "AUTO"):
        compiled = core.compile_model(model, device, {hints.inference_precision: ov.Type.f32})
        np.save(f"{device}.npy", compiled(x)[0])
    print("engine", core.compile_model(model, "CPU").get_property("ENGINE"))
"""


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_an_openvino_program_runs_where_openvino_names_inferplex(alias: str, tmp_path: Path) -> None:
    source = mlp_model(batch=3)
    onnx.save(source, tmp_path / "mlp.onnx")
    x = np.random.default_rng(0).standard_normal((3, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = "import sys\n" + textwrap.dedent(ALIASES[alias]) + textwrap.dedent(PROGRAM)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "engine OPENVINO" in done.stdout  # the CPU device compiled on the installed openvino
    (expected,) = ort_run(source, {"x": x})
    for device in ("CPU", "AUTO"):
        np.testing.assert_allclose(np.load(tmp_path / f"{device}.npy"), expected, rtol=1e-4, atol=1e-6)
