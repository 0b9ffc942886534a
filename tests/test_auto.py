"""AUTO: candidate order, selection by hint, startup hand-over, runtime fallback.

Test devices (multi_plugins) registered on an ``ov.Core``; everything through the public API.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from inferplex.errors import CompileError, DeviceNameError

from multi_plugins import (
    Faults,
    FaultyPlugin,
    input_for,
    linear_model,
    make_core,
    run_program,
    submit_many,
)

pytestmark = pytest.mark.timeout(60)


def devices(gpu_faults: dict | None = None, cpu_faults: Faults | None = None,
            gpu_type: str | None = "discrete", cpu_type: str | None = "host"):  # type: ignore[no-untyped-def]
    gpu = FaultyPlugin("GPU", ("GPU.0", "GPU.1"), dict(gpu_faults or {}), device_type=gpu_type)
    cpu = FaultyPlugin("CPU", ("CPU",), {"CPU": cpu_faults or Faults(workers=1)}, device_type=cpu_type)
    return gpu, cpu, make_core(cpu, gpu)  # CPU registered first, as the Core does


def auto(core: Any, text: str = "AUTO", **config: Any) -> Any:
    return core.compile_model(linear_model(), text, config)


def devices_of(compiled: Any) -> list[str]:
    return list(compiled.get_property("EXECUTION_DEVICES"))


def wait_ready(compiled: Any, timeout: float) -> bool:
    """Whether the startup hand-over ended within ``timeout`` s (EXECUTION_DEVICES loses its "()")."""
    deadline = time.monotonic() + timeout
    while any(name.startswith("(") for name in devices_of(compiled)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def device_of_one_inference(compiled: Any, index: int = 1) -> str:
    request = compiled.create_infer_request()
    request.infer({"x": input_for(index)})
    return str(request.device)


def test_default_candidates_put_gpus_before_the_host() -> None:
    _, _, core = devices()
    assert list(core.get_versions("AUTO")) == ["AUTO", "GPU.0", "GPU.1", "CPU"]


def test_without_device_types_candidates_keep_registration_order() -> None:
    _, _, core = devices(gpu_type=None, cpu_type=None)
    assert list(core.get_versions("AUTO")) == ["AUTO", "CPU", "GPU.0", "GPU.1"]


SINGLE = [
    ("AUTO", "LATENCY", "GPU.0"),
    ("AUTO", "THROUGHPUT", "GPU.0"),
    ("AUTO:GPU.1,GPU.0,CPU", "LATENCY", "GPU.1"),
    ("AUTO:CPU,GPU.0", "THROUGHPUT", "CPU"),
    ("AUTO:-GPU", "LATENCY", "CPU"),
    ("AUTO:-GPU.0", "THROUGHPUT", "GPU.1"),
    ("AUTO:-CPU", "LATENCY", "GPU.0"),
]
CUMULATIVE = [
    ("AUTO", ["GPU.0", "GPU.1", "CPU"]),
    ("AUTO:-CPU", ["GPU.0", "GPU.1"]),
    ("AUTO:GPU.1,CPU", ["GPU.1", "CPU"]),
    ("AUTO:-GPU.1", ["GPU.0", "CPU"]),
]


@pytest.mark.parametrize(("text", "hint", "chosen"), SINGLE)
@pytest.mark.parametrize("startup", [False, True])
def test_latency_and_throughput_pick_one_device(text: str, hint: str, chosen: str, startup: bool) -> None:
    _, _, core = devices()
    compiled = auto(core, text, PERFORMANCE_HINT=hint, ENABLE_STARTUP_FALLBACK=startup)
    assert wait_ready(compiled, 10)
    assert devices_of(compiled) == [chosen]
    assert device_of_one_inference(compiled) == chosen
    compiled.release()


@pytest.mark.parametrize(("text", "chosen"), CUMULATIVE)
def test_cumulative_throughput_is_multi_over_the_candidates(text: str, chosen: list[str]) -> None:
    _, _, core = devices()
    compiled = auto(core, text, PERFORMANCE_HINT="CUMULATIVE_THROUGHPUT")
    assert devices_of(compiled) == chosen
    submit_many(compiled, 200).wait(10)
    compiled.release()


def test_selection_skips_devices_that_lack_an_op_or_fail_to_compile() -> None:
    faults = {"GPU.0": Faults(unsupported_ops={"Relu"}), "GPU.1": Faults(compile_error="no memory")}
    _, _, core = devices(faults)
    compiled = auto(core, ENABLE_STARTUP_FALLBACK=False)
    assert devices_of(compiled) == ["CPU"]
    compiled.release()
    compiled = auto(core, PERFORMANCE_HINT="CUMULATIVE_THROUGHPUT")
    assert devices_of(compiled) == ["CPU"]
    compiled.release()


def test_when_no_candidate_works_the_error_lists_each() -> None:
    faults = {"GPU.0": Faults(unsupported_ops={"Relu"}), "GPU.1": Faults(compile_error="no memory")}
    _, _, core = devices(faults, Faults(compile_error="bad alloc"))
    with pytest.raises(CompileError) as error:
        auto(core)
    text = str(error.value)
    assert "GPU.0: does not support Relu (relu)" in text
    assert re.search(r"GPU\.1: .*RuntimeError: no memory", text) and "bad alloc" in text
    with pytest.raises(DeviceNameError, match="no candidate"):
        auto(core, "AUTO:-GPU,-CPU")


def test_startup_fallback_serves_from_the_host_then_hands_over_under_load() -> None:
    _, _, core = devices({"GPU.0": Faults(compile_delay=0.6, workers=2)},
                             Faults(workers=1, delay=0.002))
    started = time.monotonic()
    compiled = auto(core)
    assert time.monotonic() - started < 0.5  # did not wait for GPU.0
    assert devices_of(compiled) == ["(CPU)"]
    assert device_of_one_inference(compiled, 0) == "CPU" and time.monotonic() - started < 0.5
    collector = submit_many(compiled, 400, pause=0.003)  # spans the hand-over
    collector.wait(20)
    per_device = collector.check_results()
    assert wait_ready(compiled, 5) and devices_of(compiled) == ["GPU.0"]
    assert per_device["CPU"] > 0 and per_device["GPU.0"] > 0
    assert per_device["CPU"] + per_device["GPU.0"] == 400
    after = submit_many(compiled, 100)
    after.wait(10)
    assert set(after.check_results()) == {"GPU.0"}
    compiled.release()


def test_startup_fallback_off_waits_for_the_chosen_device() -> None:
    _, _, core = devices({"GPU.0": Faults(compile_delay=0.3)})
    started = time.monotonic()
    compiled = auto(core, ENABLE_STARTUP_FALLBACK=False)
    assert time.monotonic() - started >= 0.3
    assert devices_of(compiled) == ["GPU.0"]
    compiled.release()


def test_host_keeps_serving_when_the_chosen_device_fails_late() -> None:
    faults = {"GPU.0": Faults(compile_delay=0.2, compile_error="capture failed"),
              "GPU.1": Faults(compile_error="capture failed")}
    _, _, core = devices(faults)
    compiled = auto(core)
    collector = submit_many(compiled, 100, pause=0.003)
    collector.wait(10)
    assert set(collector.check_results()) == {"CPU"}
    assert wait_ready(compiled, 5) and devices_of(compiled) == ["CPU"]
    compiled.release()


def test_runtime_fallback_reruns_failures_on_the_host() -> None:
    _, _, core = devices({"GPU.0": Faults(fail_every=5, workers=2)})
    compiled = auto(core, MULTI_QUARANTINE_TIME=0.05)
    assert wait_ready(compiled, 10)
    time.sleep(0.1)  # the host compiled too and stays as the fallback device
    collector = submit_many(compiled, 200)
    collector.wait(10)
    per_device = collector.check_results()
    assert per_device["GPU.0"] + per_device.get("CPU", 0) == 200 and per_device["CPU"] > 0
    assert devices_of(compiled) == ["GPU.0"]  # the only serving device is never quarantined
    compiled.release()


_SHORT_PROGRAM = """
import numpy as np
import inferplex as ov
from multi_plugins import relu_stack, relu_stack_reference

model, weights = relu_stack(24, 1024, 4)  # 100 MB of weights: the other device still compiles at exit
compiled = ov.Core().compile_model(model, "AUTO", {"ENABLE_STARTUP_FALLBACK": True})
x = np.random.default_rng(1).standard_normal((4, 1024)).astype(np.float32)
np.testing.assert_allclose(compiled({"x": x})["y"], relu_stack_reference(x, weights), rtol=1e-4, atol=1e-5)
print("served by", compiled.get_property("EXECUTION_DEVICES"), flush=True)
compiled.release()
"""


def test_a_short_program_exits_cleanly_while_auto_still_compiles() -> None:
    """The first result comes while the other device still compiles; exit then waits for that
    compile instead of tearing native threads down under it (it aborted the interpreter)."""
    done = run_program(_SHORT_PROGRAM, emulated_gpus=1, timeout=50)
    assert done.returncode == 0, f"exit code {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.startswith("served by")


def test_cumulative_throughput_takes_a_family_name_as_all_its_devices() -> None:
    _, _, core = devices()
    compiled = auto(core, "AUTO:GPU,CPU", PERFORMANCE_HINT="CUMULATIVE_THROUGHPUT")
    assert devices_of(compiled) == ["GPU.0", "GPU.1", "CPU"]
    compiled.release()
    compiled = auto(core, "AUTO:GPU.1,GPU", PERFORMANCE_HINT="CUMULATIVE_THROUGHPUT")  # GPU.1 keeps its place
    assert devices_of(compiled) == ["GPU.1", "GPU.0"]
    compiled.release()
    compiled = auto(core, "AUTO:GPU,CPU", PERFORMANCE_HINT="LATENCY", ENABLE_STARTUP_FALLBACK=False)
    assert devices_of(compiled) == ["GPU.0"]  # one device: the family's first
    compiled.release()


def test_remote_devices_come_after_the_host() -> None:
    remote = FaultyPlugin("NODE", ("NODE.0",), device_type="remote")
    gpu = FaultyPlugin("GPU", ("GPU.0",), device_type="discrete")
    cpu = FaultyPlugin("CPU", ("CPU",), {"CPU": Faults(workers=1)}, device_type="host")
    core = make_core(cpu, remote, gpu)
    assert list(core.get_versions("AUTO")) == ["AUTO", "GPU.0", "CPU", "NODE.0"]
