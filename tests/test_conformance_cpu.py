"""The ONNX backend conformance suite of the onnx wheel, run on inferplex's CPU device.

Every case goes through the public API (``ov.Core().compile_model(path, "CPU")``,
inputs by name) and is compared like ``onnx.backend.test.runner`` compares:
same output count, shapes and dtypes, strings equal, numbers within the case's
rtol/atol (1e-3 / 1e-7 unless its data.json says otherwise), NaN where the
reference has NaN; sequence outputs element by element, optional outputs by
presence then value.

Cases, loading and the comparison come from ``conformance``.

Skips are decided in the test, not from a committed list: when inferplex fails
a case, the same case is run on raw ONNX Runtime (default session options).
If raw ONNX Runtime passes, the case FAILS (inferplex lost something on the
way); if it fails too, the case is skipped with ONNX Runtime's failure,
normalised into a cause ("ONNX Runtime 1.31.1 has no CPU kernel for X(opset
N)") so that ``pytest -rs`` groups them.  Raw ONNX Runtime runs only for the
cases inferplex fails, so the suite costs one run per passing case.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import inferplex as ov

from conformance import KINDS, Case, DataSets, assert_similar, cases, load_case, model_path

CASES = cases()


# --- the raw ONNX Runtime oracle ------------------------------------------------------------


def raw_ort_failure(path: str, data_sets: DataSets, case: Case) -> str | None:
    """None when raw ONNX Runtime passes the case, else the cause of its failure."""
    try:
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - ORT raises several types
        return _cause(str(error), path, "cannot load the model")
    for feeds, refs in data_sets:
        # numpy scalars (some node cases' inputs) as 0-d arrays, as inferplex's binding does
        feeds = {k: np.asarray(v) if isinstance(v, np.generic) else v for k, v in feeds.items()}
        try:
            outputs = session.run(None, feeds)
        except Exception as error:  # noqa: BLE001
            return _cause(str(error), path, "fails at run time")
        try:
            assert_similar(refs, outputs, case.rtol, case.atol)
        except AssertionError as error:
            return f"{_engine()}'s result differs from the reference ({_op_types(path)}): " + \
                _first_line(str(error))
    return None


def _engine() -> str:
    return f"ONNX Runtime {ort.__version__}"


def _op_types(path: str) -> str:
    model = onnx.load(path, load_external_data=False)
    types = sorted({n.op_type for n in model.graph.node})
    return ",".join(types[:3]) + ("..." if len(types) > 3 else "")


def _first_line(text: str) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line[:160]


_KERNEL = re.compile(r"Could not find an implementation for (\w+)\((\d+)\)")
_OPSET = re.compile(r"Opset (\d+) is under development")
_UNSUPPORTED_OPSET = re.compile(r"(?:onnx|ONNX) Runtime only \*guarantees\* support.*?Opset (\d+)")
_TYPE = re.compile(r"Type \((tensor\(\w+\)|seq\(tensor\(\w+\)\))\) of (?:input|output) parameter")
_IR = re.compile(r"[Uu]nsupported model IR version: (\d+)")
_NUMPY_TYPE = re.compile(r"Numpy_type (\d+) can't be converted to MLDataType")
_NOT_REGISTERED = re.compile(r"Fatal error: ([\w.]+):(\w+)\(-?\d+\) is not a registered")
_INIT = re.compile(r"Exception during initialization: .*?onnxruntime::(\w+)")
_ATTRIBUTE = re.compile(r"Unrecognized attribute: (\w+) for operator (\w+)")
_LOCALE = re.compile(r"Failed to construct locale with name:([\w.-]+)")


def _cause(message: str, path: str, stage: str) -> str:
    """A reason shared by every case with the same cause, so that skips group."""
    ops = _op_types(path)
    if m := _KERNEL.search(message):
        return f"{_engine()} has no CPU kernel for {m.group(1)} at opset {m.group(2)} for these types"
    if (m := _OPSET.search(message)) or (m := _UNSUPPORTED_OPSET.search(message)):
        return f"{_engine()} does not support opset {m.group(1)} (cases generated for newer ONNX)"
    if m := _IR.search(message):
        model = onnx.load(path, load_external_data=False)
        opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
        return (f"{_engine()} does not support IR version {m.group(1)} (nor opset {opset}): "
                "cases stamped for a newer ONNX")
    if m := _TYPE.search(message):
        return f"{_engine()} refuses type {m.group(1)} for {ops}"
    if _NUMPY_TYPE.search(message):
        return f"{_engine()}'s Python API cannot take ml_dtypes arrays (float8, float4, int4, ...)"
    if m := _ATTRIBUTE.search(message):
        return f"{_engine()} does not know attribute {m.group(1)} of {m.group(2)} (a newer schema)"
    if m := _LOCALE.search(message):
        return f"{_engine()}'s StringNormalizer needs locale {m.group(1)}, not installed here"
    if "layout == 1) are not supported" in message:
        return f"{_engine()} does not support layout=1 (batch-first) for {ops}"
    if "Type Error: Type parameter" in message:
        return f"{_engine()} refuses mixed types in its own expansion of {ops}"
    if m := _NOT_REGISTERED.search(message):
        return f"{_engine()} has no kernel for {m.group(1)}:{m.group(2)}"
    if m := _INIT.search(message):
        return f"{_engine()}'s {m.group(1)} kernel refuses this node's attributes ({ops})"
    if "Unable to handle object of type" in message:
        return f"{_engine()}'s Python API cannot take this case's inputs ({ops})"
    if "NOT_IMPLEMENTED" in message:
        return f"{_engine()} lacks an implementation ({ops})"
    text = re.sub(r"/\S+", "<path>", _first_line(message.split(" : ")[-1]))
    text = re.sub(r"'[^']*'", "'…'", text)
    return f"{_engine()} {stage} ({ops}): {text[:120]}"


def _openvino_difference(core: ov.Core, path: str, data_sets: DataSets, case: Case,
                         ours: Exception) -> str | None:
    """Where the default engine (OpenVINO) fails a case that raw ONNX Runtime passes: the reason,
    when inferplex's ONNX Runtime engine passes it (nothing lost on inferplex's side); else None."""
    try:
        compiled = core.compile_model(path, "CPU", {"ENGINE": "ONNXRUNTIME"})
        for feeds, refs in data_sets:
            results = compiled(feeds)
            assert_similar(refs, [results[i] for i in range(len(compiled.outputs))], case.rtol, case.atol)
    except Exception:  # noqa: BLE001 - the ONNX Runtime engine fails too: a real failure
        return None
    import openvino

    return (f"OpenVINO {openvino.__version__.split('-')[0]} (the default CPU engine) differs from ONNX's "
            f"reference for {_op_types(path)}; ENGINE=ONNXRUNTIME passes: "
            + re.sub(r"\s+", " ", str(ours))[:120])


# --- the test ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("node-models")


def _run_inferplex(core: ov.Core, path: str, data_sets: DataSets, case: Case) -> None:
    compiled = core.compile_model(path, "CPU")
    for feeds, refs in data_sets:
        results = compiled(feeds)
        outputs = [results[i] for i in range(len(compiled.outputs))]
        assert_similar(refs, outputs, case.rtol, case.atol)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(case: Case, core: ov.Core, workdir: Path) -> None:
    model, data_sets = load_case(case)
    path = model_path(case, model, workdir)
    assert data_sets, f"{case.id} has no data set"
    try:
        _run_inferplex(core, path, data_sets, case)
        return
    except Exception as error:  # noqa: BLE001 - decided below against raw ONNX Runtime
        ours = error
    cause = raw_ort_failure(path, data_sets, case)
    if cause is None and core.get_property("CPU", "ENGINE") == "OPENVINO":
        cause = _openvino_difference(core, path, data_sets, case, ours)
    if cause is None:
        raise AssertionError(f"raw ONNX Runtime passes {case.id} but inferplex fails: "
                             f"{type(ours).__name__}: {ours}") from ours
    pytest.skip(cause)


def test_the_suite_is_all_there() -> None:
    """Guard against an empty or shrunken parametrisation (e.g. a wheel without data)."""
    kinds = {kind: sum(c.kind == kind for c in CASES) for kind in KINDS}
    assert kinds["node"] >= 1500, kinds
    assert all(count > 0 for count in kinds.values()), kinds
