"""The ONNX backend conformance suite of the onnx wheel, run on the (emulated) GPU device.

Every case goes through the public API with ``INFERPLEX_EMULATED_GPUS=1``
(and again on a CUDA GPU, marked ``gpu``)
(``ov.Core().compile_model(model, "GPU.0")``, inputs by name).  A case whose
every node the GPU device supports (``core.query_model``) must match the
reference outputs like ``onnx.backend.test.runner`` compares them (the case's
rtol/atol, 1e-3/1e-7 unless its data says otherwise; bfloat16 outputs at
2**-6 and float16 at 2**-9, an ulp or two, since torch accumulates half-precision
products in float32 where numpy's reference does not); the others are skipped
with the device's reason for the first node it refuses, so ``pytest -rs`` lists
what is missing.

Cases, loading and the comparison come from ``conformance``.

Coverage: ``test_gpu_supports_most_cases_onnx_runtime_passes`` checks that the
GPU device supports >= 97.8% of the node cases raw ONNX Runtime passes.  Which
cases ONNX Runtime passes is computed once and kept in
``data/ort_passing_node_cases.txt`` (ORT's version on its first line);
regenerate it with ``python tests/test_gpu_conformance.py --write-ort-list``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir
import pytest

import inferplex as ov

from conformance import KINDS, NARROW_RTOL, Case, assert_similar, cases, load_case, node_tests

torch = pytest.importorskip("torch")

ORT_LIST = Path(__file__).parent / "data" / "ort_passing_node_cases.txt"
COVERAGE_TARGET = 0.978
GPU_RTOL = {**NARROW_RTOL, "float16": 2**-9}
"""Half-precision results may differ from numpy's by an ulp or two: torch sums f16/bf16 products in
float32, numpy's reference in the narrow type."""
CASES = cases()
REFERENCE_NOISE_ATOL = {"node/test_dft_inverse": 1e-6, "node/test_dft_inverse_opset19": 1e-6}
"""Cases whose reference came from numpy's complex64 FFT: where the exact value is 0 it holds
float32 rounding noise (1.9e-7) above the case's atol, which an exact FFT does not reproduce."""

ROUNDING_DECIDES_ON_CUDA = {
    "light/squeezenet": "its logits are all 9.5e9 (constant weights), where float32's spacing is 1024: the "
                        "Softmax of these ties is decided by each kernel's summation order, not by the model",
}
"""Cases whose reference only the reference's own summation order reproduces (why, per case)."""


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
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


@pytest.fixture(scope="module")
def cuda_core() -> ov.Core:
    """A Core with the machine's own devices, where GPU.0 is a CUDA GPU."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return ov.Core()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(case: Case, core: Any) -> None:
    _check(case, core)


@pytest.mark.gpu
@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance_on_cuda(case: Case, cuda_core: Any) -> None:
    """The same cases on a CUDA GPU (``pytest -m gpu``): its kernels, not torch's CPU ones."""
    if case.id in ROUNDING_DECIDES_ON_CUDA:
        pytest.skip(ROUNDING_DECIDES_ON_CUDA[case.id])
    _check(case, cuda_core)


def _check(case: Case, core: Any) -> None:
    model, data_sets = load_case(case)
    reason = gpu_refusal(case.id, model)
    if reason is not None:
        pytest.skip(f"GPU device: {reason}")
    supported = core.query_model(model, "GPU.0")
    assert len(supported) == len(model.graph.node), "query_model disagrees with the lowering's analysis"
    compiled = core.compile_model(model, "GPU.0")
    for feeds, refs in data_sets:
        results = compiled(feeds)
        assert_similar(refs, [results[i] for i in range(len(compiled.outputs))], case.rtol,
                       REFERENCE_NOISE_ATOL.get(case.id, case.atol), GPU_RTOL)


def _ort_passing() -> list[str]:
    lines = ORT_LIST.read_text().splitlines()
    return [line for line in lines[1:] if line and not line.startswith("#")]


def test_gpu_supports_most_cases_onnx_runtime_passes() -> None:
    passing = set(_ort_passing())
    tests = {t.name: t for t in node_tests()}
    missing = sorted(passing - set(tests))
    assert len(missing) < 0.02 * len(passing), f"the ORT list names cases this onnx lacks: {missing[:5]}"
    names = sorted(passing & set(tests))
    supported = [n for n in names if gpu_refusal("node/" + n, tests[n].model) is None]
    share = len(supported) / len(names)
    assert share >= COVERAGE_TARGET, (
        f"the GPU device supports {len(supported)}/{len(names)} = {share:.1%} of the node cases "
        f"ONNX Runtime passes; target {COVERAGE_TARGET:.0%}")


def test_the_suite_is_all_there() -> None:
    kinds = {kind: sum(c.kind == kind for c in CASES) for kind in KINDS}
    assert kinds["node"] >= 1000 and all(kinds.values()), kinds


# --- regenerating the ONNX Runtime list -----------------------------------------------------


def _ort_passes(case: Case) -> bool:
    import onnxruntime as ort

    model, data_sets = load_case(case)
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        for feeds, refs in data_sets:
            assert_similar(refs, session.run(None, feeds), case.rtol, case.atol, GPU_RTOL)
    except Exception:  # noqa: BLE001 - any failure means "ORT does not pass it"
        return False
    return True


def write_ort_list() -> None:
    """Run every node case on raw ONNX Runtime and write the names of those it passes."""
    import onnxruntime as ort

    passing = [c.name for c in CASES if c.kind == "node" and _ort_passes(c)]
    ORT_LIST.parent.mkdir(exist_ok=True)
    ORT_LIST.write_text(f"# node cases raw ONNX Runtime {ort.__version__} passes (onnx {onnx.__version__})\n"
                        + "\n".join(passing) + "\n")


if __name__ == "__main__" and "--write-ort-list" in sys.argv:
    write_ort_list()
