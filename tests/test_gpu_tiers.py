"""The GPU's compiled tier (``TORCH_COMPILE``): the eager lowering serves while torch.compile builds
the forward in the background, then new runs switch to it.

On the emulated GPU (torch's CPU device, inductor compiling C++ with the host's
compiler) unless marked ``gpu``.  References are raw ONNX Runtime on the whole
model.  Each compile here is a real torch.compile, seconds long on a CPU: the
tests share what they can.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from torch_export import export_onnx

import inferplex as ov
from inferplex.errors import PropertyError

from conftest import ort_run, queued_results

torch = pytest.importorskip("torch")
nn = torch.nn
tiers = pytest.importorskip("inferplex.devices.gpu.tiers")

_SWITCH_DEADLINE = 240.0
"""Seconds a test waits for the compiled tier (a cold inductor compile on a loaded CPU)."""


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


class _Cnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, stride=2), nn.Hardswish(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(8, 5))

    def forward(self, x: Any) -> Any:
        return self.body(x)


class _Attention(nn.Module):
    """One self-attention block written out: MatMul, scale, additive mask, Softmax, MatMul."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: Any, mask: Any) -> Any:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).reshape(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-1, -2)) / (dim // self.heads) ** 0.5
        scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(context.transpose(1, 2).reshape(batch, seq, dim))


def _cnn(batch: int = 2) -> onnx.ModelProto:
    torch.manual_seed(0)
    return export_onnx(_Cnn(), (torch.randn(batch, 3, 12, 12),), ["x"])


def _attention(batch: int = 2, seq: int = 6) -> onnx.ModelProto:
    torch.manual_seed(1)
    return export_onnx(_Attention(), (torch.randn(batch, seq, 16), torch.ones(batch, seq)), ["x", "mask"])


def _cnn_feeds(seed: int, batch: int = 2) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((batch, 3, 12, 12)).astype(np.float32)}


def _attention_feeds(seed: int, batch: int = 2, seq: int = 6) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.float32)
    mask[:, seq - 1 - seed % 3:] = 0.0  # padded keys
    return {"x": rng.standard_normal((batch, seq, 16)).astype(np.float32), "mask": mask}


def _wait_for_switch(compiled: ov.CompiledModel, deadline: float = _SWITCH_DEADLINE) -> str:
    """The COMPILED_TIER once it is no longer COMPILING (or when the deadline passes)."""
    end = time.monotonic() + deadline
    while (tier := compiled.get_property("COMPILED_TIER")) == "COMPILING" and time.monotonic() < end:
        time.sleep(0.1)
    return str(tier)


def test_cnn_results_equal_onnx_runtime_before_and_after_the_switch_under_async_load(core: ov.Core) -> None:
    model = _cnn()
    compiled = core.compile_model(model, "GPU.0", {"TORCH_COMPILE": "YES", "PERFORMANCE_HINT": "THROUGHPUT"})
    assert compiled.get_property("TORCH_COMPILE") is True
    assert compiled.get_property("COMPILED_TIER") == "COMPILING"
    first = compiled({"x": _cnn_feeds(0)["x"]})[0]  # served at once, by the eager tier
    np.testing.assert_allclose(first, ort_run(model, _cnn_feeds(0))[0], rtol=1e-4, atol=1e-5)

    queue = ov.AsyncInferQueue(compiled, 4)
    seen: dict[int, list[np.ndarray]] = {}
    served_by: set[str] = set()
    lock = threading.Lock()

    def done(request: ov.InferRequest, job: int) -> None:
        with lock:
            seen.setdefault(job, []).append(request.results[0].copy())

    queue.set_callback(done)
    jobs, end = 0, time.monotonic() + _SWITCH_DEADLINE
    while time.monotonic() < end:  # requests all through the switch, and a few after it
        tier = compiled.get_property("COMPILED_TIER")
        served_by.add(tier)
        queue.start_async(_cnn_feeds(jobs), jobs)
        jobs += 1
        if tier != "COMPILING" and jobs % 8 == 0:
            break
    queue.wait_all()
    assert compiled.get_property("COMPILED_TIER") == "COMPILED"
    assert "COMPILED" in served_by  # requests went on after the switch
    assert sorted(seen) == list(range(jobs)) and all(len(v) == 1 for v in seen.values())
    for job in (*range(min(jobs, 12)), *range(jobs - 8, jobs)):
        np.testing.assert_allclose(seen[job][0], ort_run(model, _cnn_feeds(job))[0], rtol=1e-4, atol=1e-5)
    after = compiled({"x": _cnn_feeds(99)["x"]})[0]
    np.testing.assert_allclose(after, ort_run(model, _cnn_feeds(99))[0], rtol=1e-4, atol=1e-5)


def test_attention_results_equal_onnx_runtime_before_and_after_the_switch(core: ov.Core) -> None:
    model = _attention()
    compiled = core.compile_model(model, "GPU.0", {"TORCH_COMPILE": True})
    request = compiled.create_infer_request()
    before = request.infer(_attention_feeds(0))[0].copy()
    assert _wait_for_switch(compiled) == "COMPILED"
    for seed in range(3):
        want = ort_run(model, _attention_feeds(seed))[0]
        np.testing.assert_allclose(request.infer(_attention_feeds(seed))[0], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(before, ort_run(model, _attention_feeds(0))[0], rtol=1e-4, atol=1e-5)


def test_default_auto_does_not_compile_on_an_emulated_gpu(core: ov.Core) -> None:
    model = _cnn(batch=tiers.TIERED_MIN_BATCH)
    compiled = core.compile_model(model, "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert core.get_property("GPU.0", "TORCH_COMPILE") == "AUTO"
    assert compiled.get_property("TORCH_COMPILE") is False
    assert compiled.get_property("COMPILED_TIER") == "EAGER"
    feeds = _cnn_feeds(3, tiers.TIERED_MIN_BATCH)
    np.testing.assert_allclose(compiled(feeds)[0], ort_run(model, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("key", "value", "accepted"), [
    ("TORCH_COMPILE", "SOMETIMES", "AUTO, YES, NO"),
    ("TORCH_COMPILE_MODE", "reduce-overhead", "max-autotune-no-cudagraphs"),
    ("TORCH_COMPILE_MODE", "max-autotune", "default"),
])
def test_bad_values_are_property_errors(core: ov.Core, key: str, value: str, accepted: str) -> None:
    with pytest.raises(PropertyError, match=f"{key}.*{value}.*{accepted}"):
        core.compile_model(_cnn(), "GPU.0", {key: value})


def test_a_failed_background_compile_keeps_the_eager_tier_serving(core: ov.Core,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_compile(module: Any, **options: Any) -> Any:
        def forward(*args: Any) -> Any:
            raise RuntimeError("inductor is broken here")
        return forward

    monkeypatch.setattr(torch, "compile", broken_compile)
    model = _cnn()
    compiled = core.compile_model(model, "GPU.0", {"TORCH_COMPILE": "YES"})
    assert _wait_for_switch(compiled, 30.0) == "FAILED"
    feeds = _cnn_feeds(5)
    np.testing.assert_allclose(compiled(feeds)[0], ort_run(model, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("release", [True, False])
def test_release_or_exit_during_the_compile_neither_waits_for_it_nor_hangs(tmp_path: Path,
                                                                           release: bool) -> None:
    script = textwrap.dedent("""
        import sys, time
        import onnx
        import inferplex as ov
        model = onnx.load(sys.argv[1])
        core = ov.Core()
        config = {"TORCH_COMPILE": "YES", "TORCH_COMPILE_MODE": "default"}
        compiled = core.compile_model(model, "GPU.0", config)
        assert compiled.get_property("COMPILED_TIER") == "COMPILING"
        start = time.monotonic()
        if sys.argv[2] == "release":
            compiled.release()
        print("released in", time.monotonic() - start)
    """)
    path = tmp_path / "cnn.onnx"
    onnx.save(_cnn(), path)
    env = {**os.environ, "INFERPLEX_EMULATED_GPUS": "1"}
    # Exit waits for a compile still running up to TIER_EXIT_WAIT s (30), then leaves it.
    how = "release" if release else "exit"
    done = subprocess.run([sys.executable, "-c", script, str(path), how], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "torch.compile in the background failed" not in done.stderr, done.stderr[-2000:]
    assert float(done.stdout.split("released in")[1]) < 5.0


def test_a_cold_cache_compiles_before_returning_and_a_warm_one_serves_at_once_then_switches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    model = _cnn()
    feeds = _cnn_feeds(7)
    want = ort_run(model, feeds)[0]
    config = {"TORCH_COMPILE": "YES", "CACHE_DIR": str(tmp_path)}
    cold = ov.Core().compile_model(model, "GPU.0", config)
    assert cold.get_property("LOADED_FROM_CACHE") is False
    assert cold.get_property("COMPILED_TIER") == "COMPILED"  # compiled for the entry before returning
    np.testing.assert_allclose(cold(feeds)[0], want, rtol=1e-4, atol=1e-5)
    cold.release()
    warm = ov.Core().compile_model(model, "GPU.0", config)
    assert warm.get_property("LOADED_FROM_CACHE") is True
    first = warm(feeds)[0]  # served by the eager tier while torch loads the entry's artefacts
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-5)
    assert _wait_for_switch(warm) == "COMPILED"
    np.testing.assert_allclose(warm(feeds)[0], want, rtol=1e-4, atol=1e-5)
    warm.release()


_HOT = tiers.HOT_RUNS


@pytest.mark.parametrize(("setting", "hint", "cuda", "shapes", "how", "measured", "after_runs"), [
    ("AUTO", "THROUGHPUT", True, [(8, 3, 4, 4)], "tiered", True, 0),
    ("AUTO", "CUMULATIVE_THROUGHPUT", True, [(32, 128), (32, 128)], "tiered", True, 0),
    ("AUTO", "THROUGHPUT", True, [(4, 3, 4, 4)], "tiered", True, _HOT),
    ("AUTO", "LATENCY", True, [(64, 3, 4, 4)], "tiered", True, _HOT),
    ("AUTO", "LATENCY", True, [(1, 3, 4, 4)], "tiered", True, _HOT),
    ("AUTO", "THROUGHPUT", False, [(64, 3, 4, 4)], "off", False, 0),
    ("AUTO", "THROUGHPUT", True, [("N", 3, 4, 4)], "off", False, 0),
    ("YES", "LATENCY", False, [(1, 3)], "tiered", False, 0),
    ("YES", "LATENCY", True, [("N", 3)], "inline", False, 0),
    ("NO", "THROUGHPUT", True, [(64, 3, 4, 4)], "off", False, 0),
])
def test_compile_plan_rule(setting: str, hint: str, cuda: bool, shapes: list[tuple[Any, ...]],
                           how: str, measured: bool, after_runs: int) -> None:
    plan = tiers.plan_compile(setting, "default", hint, cuda, shapes, False, False)
    assert (plan.how, plan.measured, plan.after_runs) == (how, measured, after_runs)


def test_compile_plan_for_the_cache_is_inline() -> None:
    assert tiers.plan_compile("YES", "default", "LATENCY", True, [(8, 3)], False, True).how == "inline"
    assert tiers.plan_compile("AUTO", "default", "THROUGHPUT", True, [(8, 3)], False, True).how == "inline"
    assert tiers.plan_compile("AUTO", "default", "LATENCY", True, [(8, 3)], False, True).how == "off"


def test_the_measured_switch_takes_only_a_faster_forward() -> None:
    def slow() -> None:
        time.sleep(0.002)

    def fast() -> None:
        pass

    assert tiers.measured_faster(fast, slow, lambda: None, rounds=3)[0]
    assert not tiers.measured_faster(slow, fast, lambda: None, rounds=3)[0]


# --- on CUDA -------------------------------------------------------------------------

_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@_cuda
@pytest.mark.parametrize("precision", ["f16", "bf16"])
def test_cuda_throughput_large_batch_switches_to_the_compiled_tier_by_default(precision: str) -> None:
    model = _cnn(batch=tiers.TIERED_MIN_BATCH)
    compiled = ov.Core().compile_model(model, "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT",
                                                         "INFERENCE_PRECISION_HINT": precision,
                                                         "TORCH_COMPILE_MODE": "default"})
    assert compiled.get_property("TORCH_COMPILE") is True
    feeds = [_cnn_feeds(seed, tiers.TIERED_MIN_BATCH) for seed in range(4)]
    wants = [ort_run(model, f)[0] for f in feeds]
    bound = 2e-2 if precision == "f16" else 1e-1
    for f, want in zip(feeds, wants, strict=True):
        np.testing.assert_allclose(compiled(f)[0], want, rtol=bound, atol=bound)
    assert _wait_for_switch(compiled) in ("COMPILED", "KEPT_EAGER")  # whichever measured faster
    for job, result in queued_results(compiled, feeds).items():
        np.testing.assert_allclose(result, wants[job % 4], rtol=bound, atol=bound)
    statistics = compiled.get_property("GPU_PROGRAM_STATISTICS")
    assert statistics.workers and all(w.captured_signatures for w in statistics.workers)


@pytest.mark.gpu
@_cuda
def test_cuda_latency_program_compiles_once_hot_and_keeps_the_faster_tier() -> None:
    model = _cnn(batch=1)
    compiled = ov.Core().compile_model(model, "GPU.0", {"PERFORMANCE_HINT": "LATENCY",
                                                         "INFERENCE_PRECISION_HINT": "f16"})
    feeds = [_cnn_feeds(seed, 1) for seed in range(4)]
    wants = [ort_run(model, f)[0] for f in feeds]
    request = compiled.create_infer_request()
    np.testing.assert_allclose(request.infer(feeds[0])[0], wants[0], rtol=2e-2, atol=2e-2)
    assert compiled.get_property("COMPILED_TIER") == "EAGER"  # not hot yet: nothing compiles
    # Hot means HOT_RUNS runs served and HOT_SECONDS passed since the compile: serve until then.
    hot_by = time.monotonic() + tiers.HOT_SECONDS + 10.0
    run = 0
    while run < tiers.HOT_RUNS or (compiled.get_property("COMPILED_TIER") == "EAGER"
                                    and time.monotonic() < hot_by):
        request.infer(feeds[run % 4])
        run += 1
    assert _wait_for_switch(compiled) in ("COMPILED", "KEPT_EAGER")
    for f, want in zip(feeds, wants, strict=True):
        np.testing.assert_allclose(request.infer(f)[0], want, rtol=2e-2, atol=2e-2)
    compiled.release()


@pytest.mark.gpu
@_cuda
def test_cuda_attention_switches_in_the_auto_mode_and_equals_onnx_runtime() -> None:
    model = _attention(batch=tiers.TIERED_MIN_BATCH, seq=32)
    compiled = ov.Core().compile_model(model, "GPU.0", {"TORCH_COMPILE": "YES",
                                                         "INFERENCE_PRECISION_HINT": "f16"})
    assert compiled.get_property("TORCH_COMPILE_MODE") == "default"  # what AUTO takes
    feeds = _attention_feeds(1, tiers.TIERED_MIN_BATCH, 32)
    want = ort_run(model, feeds)[0]
    np.testing.assert_allclose(compiled(feeds)[0], want, rtol=2e-2, atol=2e-2)
    assert _wait_for_switch(compiled) == "COMPILED"
    np.testing.assert_allclose(compiled(feeds)[0], want, rtol=2e-2, atol=2e-2)


# --- kernel choices: attention as one scaled_dot_product_attention ------------------------


class _Sdpa(nn.Module):
    """torch's own scaled_dot_product_attention: exported with the scale on Q and K^T."""

    def forward(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _fused(compiled: ov.CompiledModel) -> bool:
    return "scaled_dot_product_attention" in compiled.get_property("GPU_PROGRAM_STATISTICS").calls


@pytest.mark.parametrize(("precision", "bound"), [("f32", 1e-5), ("f16", 5e-3), ("bf16", 3e-2)])
def test_written_out_attention_runs_fused_and_equals_onnx_runtime(core: ov.Core, precision: str,
                                                                   bound: float) -> None:
    model = _attention()
    compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
    assert _fused(compiled)
    for seed in range(3):
        feeds = _attention_feeds(seed)
        np.testing.assert_allclose(compiled(feeds)[0], ort_run(model, feeds)[0], rtol=bound, atol=bound)


class _WrittenOut(nn.Module):
    """MatMul, Add of a mask, Softmax, MatMul: ONNX broadcasting lets the mask make the scores bigger."""

    def forward(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)) + mask, dim=-1), v)


@pytest.mark.parametrize(("module", "mask_shape", "fused"), [
    (_Sdpa, (2, 1, 5, 5), True), (_Sdpa, (2, 2, 5, 5), True), (_WrittenOut, (2, 2, 5, 5), True),
    (_WrittenOut, (3, 2, 5, 5), False),  # scores [2, ...] + mask [3, ...]: not an attention mask
])
def test_exported_attention_fuses_unless_the_mask_broadcasts_the_scores_up(
        core: ov.Core, module: type[nn.Module], mask_shape: tuple[int, ...], fused: bool) -> None:
    torch.manual_seed(2)
    batch = 1 if mask_shape[0] == 3 else 2
    args = (*(torch.randn(batch, 2, 5, 8) for _ in range(3)), torch.randn(*mask_shape))
    model = export_onnx(module(), args, ["q", "k", "v", "mask"])
    compiled = core.compile_model(model, "GPU.0")
    assert _fused(compiled) is fused
    feeds = {name: a.numpy() for name, a in zip(["q", "k", "v", "mask"], args, strict=True)}
    got = compiled(feeds)[0]
    want = ort_run(model, feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
