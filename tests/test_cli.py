"""The ``inferplex`` command, run in-process: benchmark, devices, query, and user mistakes."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.cli import devices as devices_cli
from inferplex.cli.benchmark_options import read_inputs
from inferplex.cli.inputs import parse_shapes, sample_model_path
from inferplex.cli.main import main
from inferplex.devices.base import DevicePlugin, MemoryInfo
from inferplex.errors import CompileError, InputError

SQUEEZENET = str(sample_model_path("light_squeezenet"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _save(model: onnx.ModelProto, path: Path) -> str:
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture
def small_model(tmp_path: Path) -> str:
    """x[N,4] -> MatMul -> Relu -> y, with a dynamic batch dimension."""
    weight = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["y"], name="act")],
        "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return _save(model, tmp_path / "small.onnx")


@pytest.fixture
def two_input_model(tmp_path: Path) -> str:
    """ids[1,S] (int64) and scale[1,S] (float) -> Cast, Mul."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT, name="cast"),
         helper.make_node("Mul", ["f", "scale"], ["y"], name="mul")],
        "two", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "S"]),
                helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1, "S"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "S"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return _save(model, tmp_path / "two.onnx")


def _check_report(report: Mapping[str, Any], count: int) -> None:
    assert report["count"] == count
    assert report["throughput_fps"] > 0
    assert report["duration_ms"] > 0
    latency = report["latency_ms"]
    assert latency["min"] <= latency["median"] <= latency["max"]
    assert latency["min"] <= latency["average"] <= latency["max"]
    assert latency["median"] <= latency["p90"] <= latency["p99"] <= latency["max"]
    for key in ("read_ms", "compile_ms", "first_inference_ms"):
        assert report[key] > 0
    assert report["first_inference_device"] in [row["device"] for row in report["devices"]]
    assert sum(row["requests"] for row in report["devices"]) == count
    expected = count * report["batch"] / (report["duration_ms"] / 1e3)
    assert report["throughput_fps"] == pytest.approx(expected)


# --- benchmark -------------------------------------------------------------------------------


def test_benchmark_sync_writes_a_consistent_report(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    report = tmp_path / "out" / "report.json"
    code, out, err = run(capsys, "benchmark", "-m", SQUEEZENET, "-api", "sync", "-niter", "5",
                         "--report", str(report))
    assert code == 0, err
    for text in ("Read model took", "Compile model took", "First inference took", "Count:",
                 "Median:", "p99:", "Throughput:"):
        assert text in out
    data = json.loads(report.read_text())
    _check_report(data, 5)
    assert data["api"] == "sync" and data["requests"] == 1
    assert data["config"]["PERFORMANCE_HINT"] == "LATENCY"
    assert data["inputs"] == {"data_0": {"shape": [1, 3, 224, 224], "element_type": "f32"}}


def test_benchmark_async_uses_the_requests_asked_for(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    code, out, err = run(capsys, "benchmark", "-m", SQUEEZENET, "-niter", "6", "-nireq", "3",
                         "-report_folder", str(tmp_path), "-json_stats", "--no-progress")
    assert code == 0, err
    data = json.loads((tmp_path / "benchmark_report.json").read_text())
    _check_report(data, 6)
    assert data["api"] == "async" and data["requests"] == 3
    assert data["config"]["PERFORMANCE_HINT"] == "THROUGHPUT"
    assert data["compiled_properties"]["PERFORMANCE_HINT"] == "THROUGHPUT"  # the text, not the enum's str()
    assert "PERFORMANCE_HINT=THROUGHPUT" in out
    assert "3 request(s)" in out


def test_benchmark_trace_writes_each_request_s_stages(capsys: pytest.CaptureFixture[str],
                                                     small_model: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    code, out, err = run(capsys, "benchmark", "-m", small_model, "-shape", "x[2,4]", "-niter", "8",
                         "-nireq", "2", "--trace", str(trace), "--no-progress")
    assert code == 0, err
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {"queued", "run", "callback"} <= {e["name"] for e in spans}
    assert len({e["args"]["request"] for e in spans}) >= 8  # the first (sync) inference and 8 more
    assert f"Trace written to {trace}" in out


def test_benchmark_perf_counts(capsys: pytest.CaptureFixture[str], small_model: str,
                               tmp_path: Path) -> None:
    report = tmp_path / "pc.json"
    code, out, err = run(capsys, "benchmark", "-m", small_model, "-shape", "x[2,4]", "-niter", "3",
                         "-api", "sync", "-pc", "--report", str(report))
    assert code == 0, err
    assert "Performance counters" in out and "Totals by op type" in out
    counters = json.loads(report.read_text())["perf_counters"]
    assert counters and {"node_name", "node_type", "exec_type", "real_time_ms"} <= set(counters[0])
    types = {c["node_type"] for c in counters}
    if ov.Core().get_property("CPU", "ENGINE") == "ONNXRUNTIME":
        assert types <= {"MatMul", "Relu"}
    else:  # OpenVINO's counters name its own ops, as its benchmark_app does (MatMul is FullyConnected)
        assert types and all(types) and all(c["exec_type"] for c in counters)


def test_benchmark_without_model_runs_the_sample(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "benchmark", "-niter", "1", "-api", "sync")
    assert code == 0, err
    assert "sample model light_resnet50" in out
    assert "Count:          1 iterations" in out


def test_benchmark_batch_and_shape_fix_dynamic_inputs(capsys: pytest.CaptureFixture[str],
                                                      small_model: str, two_input_model: str,
                                                      tmp_path: Path) -> None:
    report = tmp_path / "b.json"
    code, _, err = run(capsys, "benchmark", "-m", small_model, "-b", "3", "-niter", "4",
                       "--report", str(report))
    assert code == 0, err
    data = json.loads(report.read_text())
    assert data["batch"] == 3 and data["inputs"]["x"]["shape"] == [3, 4]
    _check_report(data, 4)
    code, _, err = run(capsys, "benchmark", "-m", two_input_model, "-shape", "ids[1,8],scale[1,8]",
                       "-niter", "2")
    assert code == 0, err


def test_benchmark_hetero_prints_the_subgraph_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "benchmark", "-m", SQUEEZENET, "-d", "HETERO:CPU", "-niter", "2")
    assert code == 0, err
    assert "HETERO subgraph plan" in out


def test_benchmark_multi_reports_requests_per_device(capsys: pytest.CaptureFixture[str],
                                                     small_model: str, tmp_path: Path) -> None:
    report = tmp_path / "m.json"
    code, out, err = run(capsys, "benchmark", "-m", small_model, "-shape", "[1,4]", "-d", "MULTI:CPU",
                         "-niter", "8", "--report", str(report))
    assert code == 0, err
    assert "Requests per device" in out
    data = json.loads(report.read_text())
    _check_report(data, 8)
    assert [row["device"] for row in data["devices"]] == ["CPU"]
    assert data["devices"][0]["share"] == pytest.approx(1.0)


def test_benchmark_auto_says_which_device_ran_the_first_inference(
        capsys: pytest.CaptureFixture[str], small_model: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With AUTO's startup fallback the CPU may serve it while the (emulated) GPU compiles."""
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    report = tmp_path / "auto.json"
    code, out, err = run(capsys, "benchmark", "-m", small_model, "-shape", "[1,4]", "-d", "AUTO",
                         "-niter", "4", "--report", str(report))
    # The GPU may still compile in the background: let it end while its emulated device exists.
    for thread in threading.enumerate():
        if thread.name.startswith("inferplex-auto"):
            thread.join(60)
    assert code == 0, err
    device = json.loads(report.read_text())["first_inference_device"]
    assert device in ("CPU", "GPU.0")
    assert re.search(rf"First inference took [0-9.]+ ms on {re.escape(device)}\n", out)


def test_benchmark_data_shape_keeps_inputs_dynamic(capsys: pytest.CaptureFixture[str], small_model: str,
                                                   tmp_path: Path) -> None:
    report = tmp_path / "d.json"
    code, _, err = run(capsys, "benchmark", "-m", small_model, "-data_shape", "[5,4]", "-niter", "3",
                         "--report", str(report))
    assert code == 0, err
    data = json.loads(report.read_text())
    assert data["batch"] == 5 and data["inputs"]["x"]["shape"] == [5, 4]
    _check_report(data, 3)


def test_benchmark_reads_inputs_from_npy_files(capsys: pytest.CaptureFixture[str], two_input_model: str,
                                               tmp_path: Path) -> None:
    np.save(tmp_path / "ids.npy", np.arange(6).reshape(1, 6))
    np.save(tmp_path / "scale.npy", np.linspace(0, 1, 6).reshape(1, 6))  # float64: cast to the input's f32
    report = tmp_path / "i.json"
    code, _, err = run(capsys, "benchmark", "-m", two_input_model, "-api", "sync", "-niter", "2",
                       "-i", f"ids:{tmp_path / 'ids.npy'},scale:{tmp_path / 'scale.npy'}",
                       "--report", str(report))
    assert code == 0, err
    assert json.loads(report.read_text())["inputs"] == {
        "ids": {"shape": [1, 6], "element_type": "i64"}, "scale": {"shape": [1, 6], "element_type": "f32"}}
    # What the run is fed is the files' data, cast to each input's type
    model = ov.Core().read_model(two_input_model)
    model.reshape({"ids": [1, 6], "scale": [1, 6]})
    fed = read_inputs(f"ids:{tmp_path / 'ids.npy'},scale:{tmp_path / 'scale.npy'}", model.inputs)
    assert fed["ids"].dtype == np.int64 and fed["scale"].dtype == np.float32
    np.testing.assert_array_equal(fed["ids"], np.arange(6).reshape(1, 6))
    np.testing.assert_allclose(fed["scale"], np.linspace(0, 1, 6).reshape(1, 6), rtol=1e-7)


def test_benchmark_input_and_output_precisions(capsys: pytest.CaptureFixture[str], small_model: str,
                                               tmp_path: Path) -> None:
    report = tmp_path / "p.json"
    code, out, err = run(capsys, "benchmark", "-m", small_model, "-shape", "[2,4]", "-ip", "f16",
                         "-op", "f16", "-niter", "2", "--report", str(report))
    assert code == 0, err
    assert json.loads(report.read_text())["inputs"]["x"]["element_type"] == "f16"
    assert "inputs: x f16 [2, 4]" in out


def test_benchmark_config_files_and_cache_dir(capsys: pytest.CaptureFixture[str], small_model: str,
                                              tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"CPU": {"NUM_STREAMS": "2", "PERFORMANCE_HINT": "THROUGHPUT"}}))
    dumped, report, cache = tmp_path / "dumped.json", tmp_path / "c.json", tmp_path / "cache"
    code, _, err = run(capsys, "benchmark", "-m", small_model, "-shape", "[1,4]", "-load_config", str(config),
                       "-cache_dir", str(cache), "-dump_config", str(dumped), "-niter", "2",
                       "--report", str(report))
    assert code == 0, err
    assert json.loads(report.read_text())["compiled_properties"]["NUM_STREAMS"] == 2
    assert any(cache.iterdir())  # the model cache was written
    written = json.loads(dumped.read_text())["CPU"]
    assert written["NUM_STREAMS"] == "2" and written["CACHE_DIR"] == str(cache)
    assert written["PERFORMANCE_HINT"] == "THROUGHPUT"
    code, _, err = run(capsys, "benchmark", "-m", small_model, "-shape", "[1,4]", "-load_config", str(dumped),
                       "-niter", "2", "--report", str(report))
    assert code == 0, err
    assert json.loads(report.read_text())["compiled_properties"]["NUM_STREAMS"] == 2


def test_benchmark_latency_percentile(capsys: pytest.CaptureFixture[str], small_model: str,
                                      tmp_path: Path) -> None:
    report = tmp_path / "l.json"
    code, out, err = run(capsys, "benchmark", "-m", small_model, "-shape", "[1,4]", "-niter", "20",
                         "-latency_percentile", "75", "--report", str(report))
    assert code == 0, err
    assert "75 percentile:" in out
    data = json.loads(report.read_text())
    latency = data["latency_ms"]
    assert data["latency_percentile"] == 75 and latency["median"] <= latency["p75"] <= latency["max"]


# --- user mistakes: one line on stderr, exit 2 ------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["-m", "missing.onnx"], "missing.onnx"),
    (["-d", "NOPE"], "unknown device 'NOPE'"),
    (["-d", "HETERO:CPU,,GPU"], "malformed device list"),
    (["-p", "NOT_A_KEY=1"], "unknown property 'NOT_A_KEY'"),
    (["-nstreams", "lots"], "NUM_STREAMS"),
    (["-shape", "[1,3,224"], "malformed -shape"),
    (["-shape", "nope[1,3,224,224]"], "no input named 'nope'"),
    (["-shape", "[1,3,224]"], "rank 3"),
    (["-niter", "0"], "-niter must be at least 1"),
    (["-nireq", "0"], "-nireq must be at least 1"),
    (["-latency_percentile", "0"], "-latency_percentile must be between 1 and 100"),
    (["-data_shape", "[1,3,224]"], "does not allow"),
    (["-ip", "f33"], "-ip 'f33'"),
    (["-iop", "nope:u8"], "-iop names ['nope']"),
    (["-i", "missing.npy"], "cannot be read as a .npy file"),
    (["-i", "data_0:x.txt"], "numpy .npy files"),
    (["-load_config", "missing.json"], "-load_config 'missing.json' cannot be read as JSON"),
])
def test_benchmark_user_mistakes_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                                        message: str) -> None:
    code, _, err = run(capsys, "benchmark", "-m", SQUEEZENET, "-niter", "1", *argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("layout", ['["CPU", {"NUM_STREAMS": "2"}]', '{"CPU": "NUM_STREAMS=2"}'])
def test_benchmark_load_config_of_the_wrong_layout_says_which_is_accepted(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, layout: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(layout, encoding="utf-8")
    code, _, err = run(capsys, "benchmark", "-m", SQUEEZENET, "-niter", "1", "-load_config", str(config))
    assert code == 2
    assert "one object of properties per device" in err and '{"CPU": {"NUM_STREAMS": "2"}}' in err
    assert "Traceback" not in err


def test_dynamic_input_without_shape_is_named(capsys: pytest.CaptureFixture[str],
                                              two_input_model: str) -> None:
    code, _, err = run(capsys, "benchmark", "-m", two_input_model, "-niter", "1")
    assert code == 2
    assert "dynamic input 'ids' [1,?], 'scale' [1,?]" in err and "-shape" in err


def test_bad_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "benchmark", "-hint", "fastest")
    assert code == 2 and "invalid choice" in err


def test_parse_shapes() -> None:
    assert parse_shapes("[1,3,224,224]") == {0: [1, 3, 224, 224]}
    assert parse_shapes("input_ids[1,128],mask[1,?]") == {"input_ids": [1, 128], "mask": [1, None]}
    assert parse_shapes("gpu_0/data_0[2,3,-1]") == {"gpu_0/data_0": [2, 3, None]}
    for bad in ("", "1,3", "a[1,x]", "a[1]b[2]", ",a[1]"):
        with pytest.raises(InputError):
            parse_shapes(bad)


# --- devices ---------------------------------------------------------------------------------


def test_devices_pass(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "devices")
    assert code == 0, err
    assert re.search(r"CPU\s.*PASS", out)
    assert "HETERO" in out and "MULTI" in out and "AUTO" in out


class _BrokenPlugin(DevicePlugin):
    family = "BROKEN"

    def devices(self) -> list[str]:
        return ["BROKEN"]

    def supported_properties(self) -> tuple[str, ...]:
        return ()

    def device_property(self, device: str, key: str) -> Any:
        if key == "FULL_DEVICE_NAME":
            return "a device that cannot compile"
        raise KeyError(key)

    def supported_nodes(self, model: Any, device: str, config: Mapping[str, Any]) -> set[str]:
        return set()

    def compile(self, model: Any, device: str, config: Mapping[str, Any]) -> Any:
        raise CompileError("this device is broken on purpose")

    def memory(self, device: str) -> MemoryInfo:
        return MemoryInfo(0, 0)


def test_devices_fail_exits_nonzero(capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    class CoreWithBrokenDevice(ov.Core):
        def __init__(self) -> None:
            super().__init__()
            self.register_plugin(_BrokenPlugin())

    monkeypatch.setattr(devices_cli, "Core", CoreWithBrokenDevice)
    code, out, err = run(capsys, "devices")
    assert code == 1
    assert re.search(r"CPU\s.*PASS", out)
    assert "FAIL" in out and "broken on purpose" in out
    assert "self-check failed on BROKEN" in err


# --- query -----------------------------------------------------------------------------------


def _total_row(out: str) -> list[int]:
    match = re.search(r"total\s*│\s*(\d+)\s*│\s*(\d+)?", out)
    assert match, out
    return [int(g) for g in match.groups() if g is not None]


def test_query_cpu_counts_every_op(capsys: pytest.CaptureFixture[str]) -> None:
    ops = len(ov.Core().read_model(SQUEEZENET).get_ops())
    code, out, err = run(capsys, "query", "-m", SQUEEZENET, "-d", "CPU")
    assert code == 0, err
    assert _total_row(out) == [ops, ops]
    assert f"CPU supports all {ops} ops" in out


def test_query_hetero_counts_and_dot(capsys: pytest.CaptureFixture[str], small_model: str,
                                     tmp_path: Path) -> None:
    dot = tmp_path / "placement.dot"
    code, out, err = run(capsys, "query", "-m", small_model, "-d", "HETERO:CPU", "--dot", str(dot))
    assert code == 0, err
    assert _total_row(out) == [2]
    assert dot.read_text().startswith("digraph")


def test_query_refuses_multi_and_policy_on_one_device(capsys: pytest.CaptureFixture[str],
                                                      small_model: str) -> None:
    code, _, err = run(capsys, "query", "-m", small_model, "-d", "MULTI:CPU")
    assert code == 2 and "query_model accepts" in err
    code, _, err = run(capsys, "query", "-m", small_model, "--policy", "PIPELINE_PARALLEL")
    assert code == 2 and "--policy PIPELINE_PARALLEL applies to HETERO" in err
