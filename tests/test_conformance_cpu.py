"""The ONNX backend conformance suite of the onnx wheel, run on inferplex's CPU device.

Every case goes through the public API (``ov.Core().compile_model(path, "CPU")``,
inputs by name) and is compared like ``onnx.backend.test.runner`` compares:
same output count, shapes and dtypes, strings equal, numbers within the case's
rtol/atol (1e-3 / 1e-7 unless its data.json says otherwise), NaN where the
reference has NaN; sequence outputs element by element, optional outputs by
presence then value.

Cases (this onnx wheel ships the ``node`` cases as Python generators, not
files; the other kinds are folders under ``onnx/backend/test/data``):

- ``node``: ``onnx.backend.test.loader.load_model_tests(kind="node")``;
- ``simple``, ``pytorch-converted``, ``pytorch-operator``: ``model.onnx`` and
  ``test_data_set_*/{input,output}_*.pb``;
- ``light``: ``real/<case>/data.json`` points at ``light/light_<name>.onnx``;
  as in the onnx runner, the inputs are ``arange(n) / n`` and the reference is
  ``light_<name>_output_0.pb``.

Skips are decided in the test, not from a committed list: when inferplex fails
a case, the same case is run on raw ONNX Runtime (default session options).
If raw ONNX Runtime passes, the case FAILS (inferplex lost something on the
way); if it fails too, the case is skipped with ONNX Runtime's failure,
normalised into a cause ("ONNX Runtime 1.31.1 has no CPU kernel for X(opset
N)") so that ``pytest -rs`` groups them.  Raw ONNX Runtime runs only for the
cases inferplex fails, so the suite costs one run per passing case.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.backend.test.loader as loader
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import inferplex as ov

DATA = Path(loader.DATA_DIR)
DIR_KINDS = ("simple", "pytorch-converted", "pytorch-operator")


@dataclass(frozen=True)
class Case:
    kind: str
    name: str
    rtol: float = 1e-3
    atol: float = 1e-7
    model_dir: str | None = None  # folder with model.onnx and test_data_set_*
    light_model: str | None = None  # light/light_<name>.onnx
    index: int = -1  # position in the in-memory node cases

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.name}"


def _collect() -> list[Case]:
    cases: list[Case] = []
    for index, test in enumerate(_node_tests()):
        cases.append(Case("node", test.name, test.rtol, test.atol, test.model_dir, index=index))
    for kind in DIR_KINDS:
        for test in loader.load_model_tests(str(DATA), kind=kind):
            cases.append(Case(kind, test.name, test.rtol, test.atol, test.model_dir))
    for test in loader.load_model_tests(str(DATA), kind="real"):
        if test.url and test.url.startswith("onnx/backend/test/data/light/"):
            model = str(DATA / "light" / Path(test.url).name)
            cases.append(Case("light", test.model_name, test.rtol, test.atol, light_model=model))
    return sorted(cases, key=lambda c: c.id)


_NODE_TESTS: list[Any] | None = None


def _node_tests() -> list[Any]:
    global _NODE_TESTS
    if _NODE_TESTS is None:
        import warnings

        with warnings.catch_warnings():  # the generators cast out-of-range values on purpose
            warnings.simplefilter("ignore")
            _NODE_TESTS = sorted(loader.load_model_tests(str(DATA), kind="node"), key=lambda t: t.name)
    return _NODE_TESTS


CASES = _collect()


# --- loading a case: (model path, inputs by name, reference outputs) ----------------------


def _load_proto(path: str, type_proto: onnx.TypeProto) -> Any:
    data = Path(path).read_bytes()
    if type_proto.HasField("sequence_type"):
        sequence = onnx.SequenceProto()
        sequence.ParseFromString(data)
        return numpy_helper.to_list(sequence)
    if type_proto.HasField("optional_type"):
        optional = onnx.OptionalProto()
        optional.ParseFromString(data)
        return numpy_helper.to_optional(optional)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return numpy_helper.to_array(tensor)


def _as_value(item: Any) -> Any:
    return numpy_helper.to_array(item) if isinstance(item, onnx.TensorProto) else item


def _dummy_input(value_info: onnx.ValueInfoProto) -> np.ndarray:
    """The onnx runner's input for light models (``generate_dummy_data(random=False)``)."""
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                  for d in value_info.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def load_case(case: Case, workdir: Path) -> tuple[str, list[tuple[dict[str, Any], list[Any]]]]:
    """The model's path and its data sets as ``(inputs by name, reference outputs)``."""
    if case.light_model is not None:
        model = onnx.load(case.light_model, load_external_data=False)
        initializers = {i.name for i in model.graph.initializer}
        feeds = {vi.name: _dummy_input(vi) for vi in model.graph.input if vi.name not in initializers}
        prefix = case.light_model[: -len(".onnx")]
        refs = [_load_proto(f"{prefix}_output_{i}.pb", vi.type) for i, vi in enumerate(model.graph.output)]
        return case.light_model, [(feeds, refs)]
    if case.model_dir is not None:
        path = os.path.join(case.model_dir, "model.onnx")
        model = onnx.load(path, load_external_data=False)
        data_sets = []
        for folder in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set*"))):
            n_in = len(glob.glob(os.path.join(folder, "input_*.pb")))
            n_out = len(glob.glob(os.path.join(folder, "output_*.pb")))
            feeds = {model.graph.input[i].name: _load_proto(os.path.join(folder, f"input_{i}.pb"),
                                                             model.graph.input[i].type)
                     for i in range(n_in)}
            refs = [_load_proto(os.path.join(folder, f"output_{i}.pb"), model.graph.output[i].type)
                    for i in range(n_out)]
            data_sets.append((feeds, refs))
        return path, data_sets
    test = _node_tests()[case.index]
    path = str(workdir / f"{case.name}.onnx")
    onnx.save(test.model, path)
    graph_inputs = test.model.graph.input
    data_sets = [({graph_inputs[i].name: _as_value(v) for i, v in enumerate(inputs)},
                  [_as_value(v) for v in outputs]) for inputs, outputs in test.data_sets]
    return path, data_sets


# --- comparing like onnx.backend.test.runner ------------------------------------------------


def assert_similar(refs: list[Any], outputs: list[Any], rtol: float, atol: float) -> None:
    assert len(outputs) == len(refs), f"{len(outputs)} outputs, the reference has {len(refs)}"
    for index, (ref, out) in enumerate(zip(refs, outputs, strict=True)):
        _assert_similar_value(ref, out, rtol, atol, f"output {index}")


def _assert_similar_value(ref: Any, out: Any, rtol: float, atol: float, where: str) -> None:
    if ref is None or out is None:  # an optional output: present in both or in neither
        assert ref is None and out is None, f"{where}: reference {type(ref)}, got {type(out)}"
        return
    if isinstance(ref, (list, tuple)):
        assert isinstance(out, (list, tuple)), f"{where}: a sequence expected, got {type(out)}"
        assert len(out) == len(ref), f"{where}: sequence of {len(out)}, reference {len(ref)}"
        for j, (r, o) in enumerate(zip(ref, out, strict=True)):
            _assert_similar_value(r, o, rtol, atol, f"{where}[{j}]")
        return
    ref, out = np.asarray(ref), np.asarray(out)
    np.testing.assert_array_equal(out.shape, ref.shape, err_msg=f"{where} has a wrong shape")
    if ref.dtype == object:
        np.testing.assert_array_equal(out, ref, err_msg=f"{where} differs")
        return
    assert out.dtype == ref.dtype, f"{where} has dtype {out.dtype}, the reference {ref.dtype}"
    if out.dtype.name in ("bfloat16",) or out.dtype.name.startswith("float8") or \
            out.dtype.name.startswith("float4"):
        rtol = max(rtol, 2**-6) if out.dtype.name == "bfloat16" else rtol
        out, ref = out.astype(np.float32), ref.astype(np.float32)
    elif out.dtype.kind not in "biufc":  # int4 and other ml_dtypes: compare exactly
        out, ref = out.astype(np.float32), ref.astype(np.float32)
    # assert_allclose: NaN must sit where the reference has NaN (equal_nan=True)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, err_msg=f"{where} differs")


# --- the raw ONNX Runtime oracle ------------------------------------------------------------


def raw_ort_failure(path: str, data_sets: list[tuple[dict[str, Any], list[Any]]],
                    case: Case) -> str | None:
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


# --- the test ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def core() -> ov.Core:
    return ov.Core()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("node-models")


def _run_inferplex(core: ov.Core, path: str, data_sets: list[tuple[dict[str, Any], list[Any]]],
                   case: Case) -> None:
    compiled = core.compile_model(path, "CPU")
    for feeds, refs in data_sets:
        results = compiled(feeds)
        outputs = [results[i] for i in range(len(compiled.outputs))]
        assert_similar(refs, outputs, case.rtol, case.atol)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(case: Case, core: ov.Core, workdir: Path) -> None:
    path, data_sets = load_case(case, workdir)
    assert data_sets, f"{case.id} has no data set"
    try:
        _run_inferplex(core, path, data_sets, case)
        return
    except Exception as error:  # noqa: BLE001 - decided below against raw ONNX Runtime
        ours = error
    cause = raw_ort_failure(path, data_sets, case)
    if cause is None:
        raise AssertionError(f"raw ONNX Runtime passes {case.id} but inferplex fails: "
                             f"{type(ours).__name__}: {ours}") from ours
    pytest.skip(cause)


def test_the_suite_is_all_there() -> None:
    """Guard against an empty or shrunken parametrisation (e.g. a wheel without data)."""
    kinds = {kind: sum(c.kind == kind for c in CASES) for kind in ("node", *DIR_KINDS, "light")}
    assert kinds["node"] >= 1500, kinds
    assert all(count > 0 for count in kinds.values()), kinds
