"""The GPU device beside the user's own torch work in one process (issue #23, item 3).

A process serves models on GPU.0 at f16 (a transformer block and a small CNN),
then compiles and runs the same computations with ``torch.compile``
(``reduce-overhead``: CUDA-graph trees; ``max-autotune-no-cudagraphs``), with
the user's tensors on the default stream and on a stream of their own, and
inferplex requests (sync and ``AsyncInferQueue``) before, between and after,
at batch 1, 8 and 32.  Every result is checked: inferplex's against ONNX
Runtime, the user's against torch eager; requests started asynchronously with
tensors the user's busy stream has not written yet must wait for them.  The
process must then exit cleanly.
It runs in a child process with a deadline, so that a CUDA error that poisons
the context (and aborts the interpreter at exit) fails the test with its
stderr instead of crashing pytest.

On CUDA (``pytest -m gpu``) at batch 1, 8 and 32; on the emulated GPU (torch's
CPU device, where ``torch.compile`` needs a C++ compiler) at batch 1 and 8 with
smaller models, so that the same code paths run in CPU CI.

On CUDA, a shorter test does what those trees do to inferplex's CUDA graphs
without compiling anything: free every cuBLAS workspace, empty torch's cache and
fill the freed memory between two batches of requests.

Also here: compiling and running on the GPU device leaves torch's process-wide
state (TF32 and matmul precision, cuDNN autotuning, default dtype, grad mode)
as the user set it.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

_MODES = ("reduce-overhead", "max-autotune-no-cudagraphs")
_OK = "inferplex-coexistence: every result matched"
_TESTS = Path(__file__).resolve().parent
_F16 = 2e-2
"""Tolerance (relative and absolute) for results computed at f16 against an f32 or f16 reference."""


def _run_child(kind: str, batches: tuple[int, ...], deadline: float) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(_TESTS), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)])}
    if kind == "emulated":
        env["INFERPLEX_EMULATED_GPUS"] = "1"
    else:
        env.pop("INFERPLEX_EMULATED_GPUS", None)
    command = [sys.executable, str(Path(__file__).resolve()), kind, *map(str, batches)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=deadline, check=False)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"the process did not finish within {deadline:.0f} s; its stderr ended with:\n"
                    f"{_tail(expired.stderr)}")
    assert done.returncode == 0 and _OK in done.stdout, (
        f"the process ended with code {done.returncode}; stdout ended with:\n{_tail(done.stdout)}\n"
        f"stderr ended with:\n{_tail(done.stderr)}")
    for sign in ("CUDA error", "AcceleratorError", "terminate called"):
        assert sign not in done.stderr, f"{sign!r} on stderr:\n{_tail(done.stderr)}"


def _tail(text: str | bytes | None, lines: int = 60) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join((text or "").splitlines()[-lines:])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_serving_beside_torch_compile_on_cuda() -> None:
    _run_child("cuda", (1, 8, 32), deadline=540)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graphs_outlive_torch_freeing_its_cublas_workspaces() -> None:
    """What the CUDA-graph trees of torch.compile do between two requests, without compiling: free
    every cuBLAS workspace and empty torch's cache; the user's tensors then take the memory."""
    _run_child("workspaces", (32,), deadline=300)


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("gcc") is None,
                    reason="torch.compile on torch's CPU device (the emulated GPU) needs a C++ compiler")
def test_serving_beside_torch_compile_on_the_emulated_gpu() -> None:
    _run_child("emulated", (1, 8), deadline=540)


# --- process-wide torch state --------------------------------------------------------


def _torch_state() -> dict[str, Any]:
    """What torch keeps process-wide (and the calling thread's grad mode), as the user reads it."""
    state: dict[str, Any] = {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "default_dtype": torch.get_default_dtype(),
        "grad_enabled": torch.is_grad_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
    }
    for path in ("cuda.matmul", "cudnn.conv", "mkldnn.matmul", "mkldnn.conv"):
        backend: Any = torch.backends
        for part in path.split("."):
            backend = getattr(backend, part, None)
        if backend is not None and hasattr(backend, "fp32_precision"):
            state[f"{path}.fp32_precision"] = backend.fp32_precision
    return state


@pytest.fixture
def users_torch_state() -> Iterator[None]:
    """The state a user's own torch code set (none of it inferplex's values); put back after the test."""
    saved = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.benchmark, torch.get_default_dtype(), torch.is_grad_enabled())
    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = False
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cudnn.allow_tf32 = saved[1]
        torch.backends.cudnn.benchmark = saved[2]
        torch.set_default_dtype(saved[3])
        torch.set_grad_enabled(saved[4])


@pytest.fixture
def small_transformer() -> Any:
    """The emulated transformer block as ONNX (made before the user's state is set)."""
    return _export(*_transformer("emulated"))


def test_compile_and_infer_leave_torchs_process_state_as_the_user_set_it(
        monkeypatch: pytest.MonkeyPatch, small_transformer: Any, users_torch_state: None) -> None:
    import inferplex as ov

    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    before = _torch_state()
    core = ov.Core()
    model = small_transformer
    x = np.random.default_rng(3).standard_normal((2, 16, 64)).astype(np.float32)
    want = _ort(model, x)
    for config in ({"INFERENCE_PRECISION_HINT": "f32"}, {"INFERENCE_PRECISION_HINT": "f16"}):
        compiled = core.compile_model(model, "GPU.0", {**config, "PERFORMANCE_HINT": "THROUGHPUT"})
        assert _torch_state() == before, config
        tolerance = _F16 if config["INFERENCE_PRECISION_HINT"] == "f16" else 1e-4
        np.testing.assert_allclose(compiled(x)[0], want, rtol=tolerance, atol=tolerance)
        _serve_async(compiled, [x] * 4, [want] * 4, tolerance)
        assert _torch_state() == before, config
        compiled.release()
    assert _torch_state() == before


# --- the models and the child process's body -------------------------------------------


class _Block(torch.nn.Module):
    """A transformer encoder block: attention (MatMul, Softmax), LayerNorm, a GELU MLP."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.norm1 = torch.nn.LayerNorm(width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, x: Any) -> Any:
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).reshape(batch, seq, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.softmax(q @ k.transpose(-1, -2) * (width // self.heads) ** -0.5, dim=-1)
        attended = (scores @ v).transpose(1, 2).reshape(batch, seq, width)
        x = self.norm1(x + self.out(attended))
        return self.norm2(x + self.mlp(x))


def _transformer(kind: str) -> tuple[torch.nn.Module, Any]:
    torch.manual_seed(0)
    width, heads, seq = (256, 4, 64) if kind == "cuda" else (64, 4, 16)
    return _Block(width, heads).eval(), torch.randn(2, seq, width, dtype=torch.float32)


def _cnn(kind: str) -> tuple[torch.nn.Module, Any]:
    torch.manual_seed(1)
    channels, size = (32, 32) if kind == "cuda" else (8, 16)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, channels, 3, padding=1), torch.nn.BatchNorm2d(channels), torch.nn.ReLU(),
        torch.nn.Conv2d(channels, channels, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(channels, 10))
    return net.eval(), torch.randn(2, 3, size, size, dtype=torch.float32)


def _export(module: torch.nn.Module, example: Any) -> Any:
    from torch_export import export_onnx

    with torch.no_grad():
        return export_onnx(module, (example,), ["x"], {"x": {0: "batch"}})


def _ort(model: Any, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    result: np.ndarray = session.run(None, {"x": x})[0]
    return result


def _serve_sync(compiled: Any, inputs: list[Any], wants: list[np.ndarray], tolerance: float) -> None:
    for x, want in zip(inputs, wants, strict=True):
        np.testing.assert_allclose(compiled({"x": x})[0].astype(np.float32), want, rtol=tolerance,
                                   atol=tolerance)


def _serve_async(compiled: Any, inputs: list[Any], wants: list[np.ndarray], tolerance: float) -> None:
    import inferplex as ov

    queue = ov.AsyncInferQueue(compiled)
    results: dict[int, np.ndarray] = {}
    queue.set_callback(lambda request, index: results.__setitem__(index, request.results[0].copy()))
    for index, x in enumerate(inputs):
        queue.start_async({"x": x}, index)
    queue.wait_all()
    assert sorted(results) == list(range(len(inputs)))
    for index, want in enumerate(wants):
        np.testing.assert_allclose(results[index].astype(np.float32), want, rtol=tolerance, atol=tolerance)


def _users_run(function: Any, reference: Any, x: Any, tolerance: float) -> None:
    """The user's compiled call, checked against torch eager on the same input."""
    with torch.inference_mode():
        torch.compiler.cudagraph_mark_step_begin()  # a new inference step (CUDA-graph trees)
        got = function(x).clone()  # a tree's outputs are overwritten by its next replay
        want = reference(x)
    torch.testing.assert_close(got.float(), want.float(), rtol=tolerance, atol=tolerance)


def _interleave(kind: str, compiled: Any, module: torch.nn.Module, example: Any,
                onnx_model: Any, batches: list[int]) -> None:
    """Serve at each batch size, with the user's torch.compile runs in between (module docstring)."""
    cuda = kind == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    users = copy.deepcopy(module).to(device, torch.float16 if cuda else torch.float32)
    # dynamic: one compile per mode serves every batch size (compile time kept small)
    functions = {mode: torch.compile(users, mode=mode, dynamic=True) for mode in _MODES}
    user_stream = torch.cuda.Stream(device) if cuda else None
    user_tolerance = _F16 if cuda else 1e-4
    rng = np.random.default_rng(7)
    before = 5 if cuda else 1  # on CUDA: as in the issue, well over a hundred requests before
    for batch in batches:
        inputs = [rng.standard_normal((batch, *example.shape[1:])).astype(np.float32) for _ in range(4)]
        wants = [_ort(onnx_model, x) for x in inputs]
        _serve_sync(compiled, inputs * before, wants * before, _F16)  # every worker's graph captured
        _serve_async(compiled, inputs * 2 * before, wants * 2 * before, _F16)
        for mode, function in functions.items():
            on_device = torch.from_numpy(inputs[0]).to(device, next(users.parameters()).dtype)
            _users_run(function, users, on_device, user_tolerance)  # the default stream
            # The user's memory now takes what torch freed (cuBLAS workspaces, cached blocks): a graph
            # of inferplex's that still used some of it would write here, or read the 7s.
            filler = torch.full((256 << 20,), 7, dtype=torch.uint8, device=device) if cuda else None
            _serve_sync(compiled, inputs, wants, _F16)
            _serve_async(compiled, inputs * 2, wants * 2, _F16)
            if filler is not None:
                assert bool((filler == 7).all()), "an inferplex run wrote into the user's memory"
                del filler
            if user_stream is not None:
                with torch.cuda.stream(user_stream):
                    mine = torch.from_numpy(inputs[1]).to(device)
                    _users_run(function, users, mine.to(torch.float16), user_tolerance)
                    # inferplex takes the user's device tensor, made on the user's stream
                    _serve_sync(compiled, [mine], [wants[1]], _F16)
                    base = torch.from_numpy(inputs[2]).to(device)
                    torch.cuda._sleep(100_000_000)  # noqa: SLF001 - torch's own tests keep a stream busy so
                    late = base * 1.0  # written once the user's stream gets past the sleep
                    _serve_async(compiled, [late] * 4, [wants[2]] * 4, _F16)  # runs start on other threads
                user_stream.synchronize()
            _serve_sync(compiled, inputs, wants, _F16)
            _serve_async(compiled, inputs * 2, wants * 2, _F16)
            print(f"{type(module).__name__}, batch {batch}, {mode}: ok", flush=True)  # shown on a failure


def _workspaces_child(batches: list[int]) -> None:
    """Serve, free torch's cuBLAS workspaces and cache (as ``torch.compile``'s CUDA-graph trees do
    before each warm-up and recording), fill the freed memory, serve again."""
    import inferplex as ov

    module, example = _transformer("cuda")
    onnx_model = _export(module, example)
    compiled = ov.Core().compile_model(onnx_model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f16",
                                                              "PERFORMANCE_HINT": "THROUGHPUT"})
    rng = np.random.default_rng(11)
    for batch in batches:
        inputs = [rng.standard_normal((batch, *example.shape[1:])).astype(np.float32) for _ in range(4)]
        wants = [_ort(onnx_model, x) for x in inputs]
        _serve_async(compiled, inputs * 8, wants * 8, _F16)  # every worker's graph captured
        torch._C._cuda_clearCublasWorkspaces()  # noqa: SLF001 - what the CUDA-graph trees call
        torch.cuda.empty_cache()
        filler = torch.full((1 << 30,), 7, dtype=torch.uint8, device="cuda")
        _serve_sync(compiled, inputs, wants, _F16)
        _serve_async(compiled, inputs * 8, wants * 8, _F16)
        assert bool((filler == 7).all()), "an inferplex run wrote into the user's memory"
    compiled.release()
    torch.cuda.synchronize()
    print(_OK, flush=True)  # read by the test


def _child(kind: str, batches: list[int]) -> None:
    import inferplex as ov

    if kind == "workspaces":
        _workspaces_child(batches)
        return
    core = ov.Core()
    config = {"INFERENCE_PRECISION_HINT": "f16", "PERFORMANCE_HINT": "THROUGHPUT"}
    for make in (_transformer, _cnn):
        module, example = make(kind)
        onnx_model = _export(module, example)
        compiled = core.compile_model(onnx_model, "GPU.0", config)
        _interleave(kind, compiled, module, example, onnx_model, batches)
        last = np.random.default_rng(9).standard_normal(tuple(example.shape)).astype(np.float32)
        _serve_sync(compiled, [last], [_ort(onnx_model, last)], _F16)  # after
        compiled.release()
    if kind == "cuda":
        torch.cuda.synchronize()
    print(_OK, flush=True)  # read by the test


if __name__ == "__main__":
    _child(sys.argv[1], [int(b) for b in sys.argv[2:]])
