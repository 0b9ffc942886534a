"""The ONNX backend conformance suite of the onnx wheel, run on the (emulated) GPU device.

Every case goes through the public API with ``INFERPLEX_EMULATED_GPUS=1``
(``ov.Core().compile_model(model, "GPU.0")``, inputs by name).  A case whose
every node the GPU device supports (``core.query_model``) must match the
reference outputs like ``onnx.backend.test.runner`` compares them (the case's
rtol/atol, 1e-3/1e-7 unless its data says otherwise; bfloat16 outputs at
2**-6 and float16 at 2**-9, an ulp or two, since torch accumulates half-precision
products in float32 where numpy's reference does not); the others are skipped with the device's reason for the first node it
refuses, so ``pytest -rs`` lists what is missing.

Cases: ``node`` (generated in memory by the onnx wheel), ``simple``,
``pytorch-converted``, ``pytorch-operator`` (folders of model.onnx and
test_data_set_*), and ``light`` (inputs ``arange(n) / n`` as the onnx runner
makes them, reference ``light_<name>_output_0.pb``).

Coverage: ``test_gpu_supports_most_cases_onnx_runtime_passes`` checks that the
GPU device supports >= 85% of the node cases raw ONNX Runtime passes.  Which
cases ONNX Runtime passes is computed once and kept in
``data/ort_passing_node_cases.txt`` (ORT's version on its first line);
regenerate it with ``python tests/test_gpu_conformance.py --write-ort-list``.
"""

from __future__ import annotations

import glob
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.backend.test.loader as loader
import onnx_ir as ir
import pytest
from onnx import numpy_helper

import inferplex as ov

torch = pytest.importorskip("torch")

DATA = Path(loader.DATA_DIR)
DIR_KINDS = ("simple", "pytorch-converted", "pytorch-operator")
ORT_LIST = Path(__file__).parent / "data" / "ort_passing_node_cases.txt"
COVERAGE_TARGET = 0.85


@dataclass(frozen=True)
class Case:
    kind: str
    name: str
    rtol: float = 1e-3
    atol: float = 1e-7
    model_dir: str | None = None
    light_model: str | None = None
    index: int = -1

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.name}"


_NODE_TESTS: list[Any] = []


def _node_tests() -> list[Any]:
    if not _NODE_TESTS:
        with warnings.catch_warnings():  # the generators cast out-of-range values on purpose
            warnings.simplefilter("ignore")
            _NODE_TESTS.extend(sorted(loader.load_model_tests(str(DATA), kind="node"), key=lambda t: t.name))
    return _NODE_TESTS


def _collect() -> list[Case]:
    cases = [Case("node", t.name, t.rtol, t.atol, index=i) for i, t in enumerate(_node_tests())]
    for kind in DIR_KINDS:
        cases += [Case(kind, t.name, t.rtol, t.atol, t.model_dir) for t in loader.load_model_tests(str(DATA), kind=kind)]
    for test in loader.load_model_tests(str(DATA), kind="real"):
        if test.url and test.url.startswith("onnx/backend/test/data/light/"):
            cases.append(Case("light", test.model_name, test.rtol, test.atol,
                              light_model=str(DATA / "light" / Path(test.url).name)))
    return sorted(cases, key=lambda c: c.id)


CASES = _collect()
DataSets = list[tuple[dict[str, Any], list[Any]]]


# --- loading --------------------------------------------------------------------------


def _value(item: Any) -> Any:
    return numpy_helper.to_array(item) if isinstance(item, onnx.TensorProto) else item


def _read_pb(path: str, type_proto: onnx.TypeProto) -> Any:
    data = Path(path).read_bytes()
    if type_proto.HasField("sequence_type"):
        sequence = onnx.SequenceProto()
        sequence.ParseFromString(data)
        return numpy_helper.to_list(sequence)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return numpy_helper.to_array(tensor)


def load_case(case: Case) -> tuple[onnx.ModelProto, DataSets]:
    """The model and its data sets as ``(inputs by name, reference outputs)``."""
    if case.light_model is not None:
        model = onnx.load(case.light_model)
        initializers = {i.name for i in model.graph.initializer}
        feeds = {}
        for vi in model.graph.input:
            if vi.name not in initializers:
                shape = tuple(d.dim_value or 1 for d in vi.type.tensor_type.shape.dim)
                n = int(np.prod(shape))
                feeds[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
        prefix = case.light_model[: -len(".onnx")]
        refs = [_read_pb(f"{prefix}_output_{i}.pb", vi.type) for i, vi in enumerate(model.graph.output)]
        return model, [(feeds, refs)]
    if case.model_dir is not None:
        model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
        data_sets = []
        for folder in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set*"))):
            n_in = len(glob.glob(os.path.join(folder, "input_*.pb")))
            n_out = len(glob.glob(os.path.join(folder, "output_*.pb")))
            feeds = {model.graph.input[i].name: _read_pb(os.path.join(folder, f"input_{i}.pb"), model.graph.input[i].type)
                     for i in range(n_in)}
            refs = [_read_pb(os.path.join(folder, f"output_{i}.pb"), model.graph.output[i].type) for i in range(n_out)]
            data_sets.append((feeds, refs))
        return model, data_sets
    test = _node_tests()[case.index]
    names = [vi.name for vi in test.model.graph.input]
    return test.model, [({names[i]: _value(v) for i, v in enumerate(ins)}, [_value(v) for v in outs])
                        for ins, outs in test.data_sets]


def assert_similar(refs: list[Any], outputs: list[Any], rtol: float, atol: float) -> None:
    """Compare like onnx.backend.test.runner: count, shapes, dtypes, values within rtol/atol."""
    assert len(outputs) == len(refs), f"{len(outputs)} outputs, the reference has {len(refs)}"
    for index, (ref, out) in enumerate(zip(refs, outputs)):
        ref, out = np.asarray(ref), np.asarray(out)
        assert out.shape == ref.shape, f"output {index}: shape {out.shape}, reference {ref.shape}"
        assert out.dtype == ref.dtype, f"output {index}: dtype {out.dtype}, reference {ref.dtype}"
        # Half-precision results may differ from numpy's by an ulp or two: torch sums f16/bf16
        # products in float32, numpy's reference in the narrow type.
        tolerance = {"bfloat16": max(rtol, 2**-6), "float16": max(rtol, 2**-9)}.get(out.dtype.name, rtol)
        if out.dtype.kind not in "biufc":
            out, ref = out.astype(np.float32), ref.astype(np.float32)
        np.testing.assert_allclose(out, ref, rtol=tolerance, atol=atol, err_msg=f"output {index} differs")


# --- support, cached per case (shared by the cases and the coverage figure) ------------------

_REASONS: dict[str, str | None] = {}


def gpu_refusal(case_name: str, model: onnx.ModelProto) -> str | None:
    """None when the GPU device runs every node of ``model``; else its reason for the first it refuses."""
    if case_name not in _REASONS:
        from inferplex.devices.gpu.lower import analyze_model

        try:
            analysis = analyze_model(ir.serde.deserialize_model(model))
        except Exception as error:  # noqa: BLE001 - a model the IR cannot hold is not supported
            _REASONS[case_name] = f"cannot analyze: {type(error).__name__}"
        else:
            _REASONS[case_name] = next(iter(sorted(analysis.unsupported.values())), None)
    return _REASONS[case_name]


# --- the tests ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def core() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "1")
        yield ov.Core()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(case: Case, core: Any) -> None:
    model, data_sets = load_case(case)
    reason = gpu_refusal(case.id, model)
    if reason is not None:
        pytest.skip(f"GPU device: {reason}")
    supported = core.query_model(model, "GPU.0")
    assert len(supported) == len(model.graph.node), "query_model disagrees with the lowering's analysis"
    compiled = core.compile_model(model, "GPU.0")
    for feeds, refs in data_sets:
        results = compiled(feeds)
        assert_similar(refs, [results[i] for i in range(len(compiled.outputs))], case.rtol, case.atol)


def _ort_passing() -> list[str]:
    lines = ORT_LIST.read_text().splitlines()
    return [line for line in lines[1:] if line and not line.startswith("#")]


def test_gpu_supports_most_cases_onnx_runtime_passes() -> None:
    passing = set(_ort_passing())
    tests = {t.name: t for t in _node_tests()}
    missing = sorted(passing - set(tests))
    assert len(missing) < 0.02 * len(passing), f"the ORT list names cases this onnx lacks: {missing[:5]}"
    names = sorted(passing & set(tests))
    supported = [n for n in names if gpu_refusal("node/" + n, tests[n].model) is None]
    share = len(supported) / len(names)
    assert share >= COVERAGE_TARGET, (
        f"the GPU device supports {len(supported)}/{len(names)} = {share:.1%} of the node cases "
        f"ONNX Runtime passes; target {COVERAGE_TARGET:.0%}")


def test_the_suite_is_all_there() -> None:
    kinds = {kind: sum(c.kind == kind for c in CASES) for kind in ("node", *DIR_KINDS, "light")}
    assert kinds["node"] >= 1000 and all(kinds.values()), kinds


# --- regenerating the ONNX Runtime list -----------------------------------------------------


def _ort_passes(test: Any) -> bool:
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(test.model.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [vi.name for vi in test.model.graph.input]
        for ins, outs in test.data_sets:
            got = session.run(None, {names[i]: _value(v) for i, v in enumerate(ins)})
            assert_similar([_value(v) for v in outs], got, test.rtol, test.atol)
    except Exception:  # noqa: BLE001 - any failure means "ORT does not pass it"
        return False
    return True


def write_ort_list() -> None:
    """Run every node case on raw ONNX Runtime and write the names of those it passes."""
    import onnxruntime as ort

    passing = [t.name for t in _node_tests() if _ort_passes(t)]
    ORT_LIST.parent.mkdir(exist_ok=True)
    ORT_LIST.write_text(f"# node cases raw ONNX Runtime {ort.__version__} passes (onnx {onnx.__version__})\n"
                        + "\n".join(passing) + "\n")


if __name__ == "__main__" and "--write-ort-list" in sys.argv:
    write_ort_list()
