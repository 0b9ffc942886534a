"""OpenVINO's Python samples, run end to end on inferplex.

Each sample below is OpenVINO's own (``samples/python/`` in openvinotoolkit/openvino),
changed only where this file says so: ``import inferplex as ov`` (and
``inferplex.utils.types`` for ``openvino.utils.types``, ``inferplex`` for
``openvino.runtime``), ``argv`` for ``sys.argv``, a model from the onnx wheel
(``light_squeezenet``) or built here (hello_reshape_ssd's SSD-like model,
model_creation_sample's weights file), and random images made with numpy instead
of files read with cv2 (or the sample's ``data.digits``).  The tests read what
the samples log (or the requests they made) and compare it with ONNX Runtime on
the same model and data.  Benchmarks run on a fast clock, so their timed loops
end after their minimum iterations.
"""
# ruff: noqa: E501, E721, RUF059, SIM300, UP006 - the samples' own lines are kept as they are

from __future__ import annotations

import argparse
import functools
import itertools
import logging as log
import os
import re
import signal
import statistics
import sys
import tempfile
import typing
from collections.abc import Iterator
from functools import reduce
from math import ceil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

import inferplex as ov
from inferplex import Core, Layout, PartialShape, Type, get_version, op, opset1, opset8
from inferplex.preprocess import PrePostProcessor
from inferplex.utils.types import get_dtype

from conftest import ONNX_BACKEND_DATA, ort_run

MODEL = ONNX_BACKEND_DATA / "light" / "light_squeezenet.onnx"


def _image(path: str) -> np.ndarray:
    """Stands in for ``cv2.imread(path)``: a random u8 BGR image at the model's size."""
    seed = sum(path.encode())
    return np.random.default_rng(seed).integers(0, 256, (224, 224, 3), dtype=np.uint8)


@functools.cache
def _classifier() -> Path:
    """``MODEL`` with its last convolution's weight and bias times 1e-9, for the samples whose top 10
    are checked: ``MODEL``'s logits are all about 1e10, so its probabilities are those of each
    engine's float rounding; these logits (about 10, the Relu and pool after the convolution keep
    the scale) give probabilities the rounding moves by a millionth of themselves."""
    model = onnx.load(MODEL)
    last = [node for node in model.graph.node if node.op_type == "Conv"][-1]
    fills = {node.output[0]: node for node in model.graph.node if node.op_type == "ConstantOfShape"}
    for name in last.input[1:]:  # the light models fill their weights with ConstantOfShape
        value = next(attribute for attribute in fills[name].attribute if attribute.name == "value")
        scaled = onnx.numpy_helper.to_array(value.t) * np.float32(1e-9)
        value.t.CopyFrom(onnx.numpy_helper.from_array(scaled.astype(np.float32), value.t.name))
    path = Path(tempfile.mkdtemp()) / "classifier.onnx"
    onnx.save(model, path)
    return path


def _reference(image: np.ndarray, model: Path = MODEL) -> np.ndarray:
    """ONNX Runtime's class probabilities for an NHWC u8 image (the samples' NCHW f32 input)."""
    data = image[None].transpose(0, 3, 1, 2).astype(np.float32)
    return np.asarray(ort_run(model, {"data_0": data})[0]).reshape(-1)


def _logged_tops(messages: list[str]) -> dict[str, dict[int, float]]:
    """``{image path: {class id: probability}}`` from the samples' "Top 10 results" log messages."""
    tops: dict[str, dict[int, float]] = {}
    current: dict[int, float] = {}
    for line in messages:
        if line.startswith("Image path: "):
            current = tops.setdefault(line.removeprefix("Image path: "), {})
        elif match := re.fullmatch(r"(\d+) +(\d+\.\d{7})", line):
            current[int(match.group(1))] = float(match.group(2))
    return tops


def _check_top10(logged: dict[int, float], reference: np.ndarray) -> None:
    assert len(logged) == 10
    tenth = np.sort(reference)[-10]
    for class_id, probability in logged.items():
        assert probability == pytest.approx(reference[class_id], abs=2e-6)
        assert reference[class_id] >= tenth - 2e-6  # among ONNX Runtime's top 10


@pytest.fixture(params=["CPU", "GPU"])
def device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The device a sample is given: the CPU, or a GPU (emulated on torch's CPU where there is no CUDA)."""
    if request.param == "GPU":
        monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    return str(request.param)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(log.INFO)
    yield caplog


# --- hello_classification ------------------------------------------------------------------------


def hello_classification(argv: list[str]) -> int:
    """OpenVINO's hello_classification.py ``main()`` (cv2.imread -> _image)."""
    log.basicConfig(format='[ %(levelname)s ] %(message)s', level=log.INFO, stream=sys.stdout)
    if len(argv) != 4:
        log.info(f'Usage: {argv[0]} <path_to_model> <path_to_image> <device_name>')
        return 1
    model_path = argv[1]
    image_path = argv[2]
    device_name = argv[3]
    log.info('Creating OpenVINO Runtime Core')
    core = ov.Core()
    log.info(f'Reading the model: {model_path}')
    model = core.read_model(model_path)
    if len(model.inputs) != 1:
        log.error('Sample supports only single input topologies')
        return -1
    if len(model.outputs) != 1:
        log.error('Sample supports only single output topologies')
        return -1
    image = _image(image_path)
    input_tensor = np.expand_dims(image, 0)
    ppp = ov.preprocess.PrePostProcessor(model)
    _, h, w, _ = input_tensor.shape
    ppp.input().tensor() \
        .set_shape(input_tensor.shape) \
        .set_element_type(ov.Type.u8) \
        .set_layout(ov.Layout('NHWC'))  # noqa: N400
    ppp.input().preprocess().resize(ov.preprocess.ResizeAlgorithm.RESIZE_LINEAR)
    ppp.input().model().set_layout(ov.Layout('NCHW'))
    ppp.output().tensor().set_element_type(ov.Type.f32)
    model = ppp.build()
    log.info('Loading the model to the plugin')
    compiled_model = ov.compile_model(model, device_name)
    log.info('Starting inference in synchronous mode')
    results = compiled_model.infer_new_request({0: input_tensor})
    predictions = next(iter(results.values()))
    probs = predictions.reshape(-1)
    top_10 = np.argsort(probs)[-10:][::-1]
    header = 'class_id probability'
    log.info(f'Image path: {image_path}')
    log.info('Top 10 results: ')
    log.info(header)
    log.info('-' * len(header))
    for class_id in top_10:
        probability_indent = ' ' * (len('class_id') - len(str(class_id)) + 1)
        log.info(f'{class_id}{probability_indent}{probs[class_id]:.7f}')
    log.info('')
    log.info('This sample is an API example, for any performance measurements please use the dedicated benchmark_app tool\n')
    return 0


def test_hello_classification(logs: pytest.LogCaptureFixture, device: str) -> None:
    """On a GPU too: the u8 image is resized on the device, as the sample's PrePostProcessor asks."""
    assert hello_classification(["hello_classification.py", str(_classifier()), "cat.bmp", device]) == 0
    tops = _logged_tops(logs.messages)
    _check_top10(tops["cat.bmp"], _reference(_image("cat.bmp"), _classifier()))


# --- classification_sample_async -----------------------------------------------------------------


def _completion_callback(infer_request: ov.InferRequest, image_path: str) -> None:
    predictions = next(iter(infer_request.results.values()))
    probs = predictions.reshape(-1)
    top_10 = np.argsort(probs)[-10:][::-1]
    header = 'class_id probability'
    log.info(f'Image path: {image_path}')
    log.info('Top 10 results: ')
    log.info(header)
    log.info('-' * len(header))
    for class_id in top_10:
        probability_indent = ' ' * (len('class_id') - len(str(class_id)) + 1)
        log.info(f'{class_id}{probability_indent}{probs[class_id]:.7f}')
    log.info('')


def classification_sample_async(argv: list[str]) -> int:
    """OpenVINO's classification_sample_async.py ``main()`` (cv2.imread/resize -> _image)."""
    parser = argparse.ArgumentParser(add_help=False)
    args_group = parser.add_argument_group('Options')
    args_group.add_argument('-m', '--model', type=str, required=True)
    args_group.add_argument('-i', '--input', type=str, required=True, nargs='+')
    args_group.add_argument('-d', '--device', type=str, default='CPU')
    args = parser.parse_args(argv)
    log.info('Creating OpenVINO Runtime Core')
    core = ov.Core()
    log.info(f'Reading the model: {args.model}')
    model = core.read_model(args.model)
    if len(model.inputs) != 1:
        log.error('Sample supports only single input topologies')
        return -1
    if len(model.outputs) != 1:
        log.error('Sample supports only single output topologies')
        return -1
    ppp = ov.preprocess.PrePostProcessor(model)
    ppp.input().tensor() \
        .set_element_type(ov.Type.u8) \
        .set_layout(ov.Layout('NHWC'))  # noqa: N400
    ppp.input().model().set_layout(ov.Layout('NCHW'))
    ppp.output().tensor().set_element_type(ov.Type.f32)
    model = ppp.build()
    images = (_image(image_path) for image_path in args.input)
    _, h, w, _ = model.input().shape
    resized_images = (image[:h, :w] for image in images)
    input_tensors = (np.expand_dims(image, 0) for image in resized_images)
    log.info('Loading the model to the plugin')
    compiled_model = core.compile_model(model, args.device)
    log.info('Starting inference in asynchronous mode')
    infer_queue = ov.AsyncInferQueue(compiled_model)
    infer_queue.set_callback(_completion_callback)
    for i, input_tensor in enumerate(input_tensors):
        infer_queue.start_async({0: input_tensor}, args.input[i])
    infer_queue.wait_all()
    log.info('This sample is an API example, for any performance measurements please use the dedicated benchmark_app tool\n')
    return 0


def test_classification_sample_async(logs: pytest.LogCaptureFixture) -> None:
    paths = ["a.bmp", "b.bmp", "c.bmp"]
    assert classification_sample_async(["-m", str(_classifier()), "-i", *paths, "-d", "CPU"]) == 0
    tops = _logged_tops(logs.messages)
    assert sorted(tops) == paths
    for path in paths:
        _check_top10(tops[path], _reference(_image(path), _classifier()))


# --- hello_query_device --------------------------------------------------------------------------


def _param_to_string(parameters: Any) -> str:
    if isinstance(parameters, (list, tuple)):
        return ', '.join([str(x) for x in parameters])
    return str(parameters)


def hello_query_device() -> int:
    """OpenVINO's hello_query_device.py ``main()``."""
    core = ov.Core()
    log.info('Available devices:')
    for device in core.available_devices:
        log.info(f'{device} :')
        log.info('\tSUPPORTED_PROPERTIES:')
        for property_key in core.get_property(device, 'SUPPORTED_PROPERTIES'):
            if property_key not in ('SUPPORTED_PROPERTIES'):
                try:
                    property_val = core.get_property(device, property_key)
                except TypeError:
                    property_val = 'UNSUPPORTED TYPE'
                log.info(f'\t\t{property_key}: {_param_to_string(property_val)}')
        log.info('')
    return 0


def test_hello_query_device(logs: pytest.LogCaptureFixture) -> None:
    assert hello_query_device() == 0
    core = ov.Core()
    for device in core.available_devices:
        assert f"{device} :" in logs.text
        for key in core.get_property(device, "SUPPORTED_PROPERTIES"):
            assert f"\t\t{key}: " in logs.text or key == "SUPPORTED_PROPERTIES"
    # settings never set read as OpenVINO's CPU defaults; a setting once set reads back
    assert core.get_property("CPU", "PERFORMANCE_HINT") == "LATENCY"
    assert core.get_property("CPU", "INFERENCE_NUM_THREADS") == 0
    assert core.get_property("CPU", "PERFORMANCE_HINT_NUM_REQUESTS") == 0
    core.set_property("CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert core.get_property("CPU", "PERFORMANCE_HINT") == "THROUGHPUT"


# --- sync_benchmark and throughput_benchmark -----------------------------------------------------


_clock = itertools.count(0.0, 0.5)


def perf_counter() -> float:
    """The benchmarks' clock here: half a second per reading, so their timed loops end fast."""
    return next(_clock)


def fill_tensor_random(tensor: Any) -> None:
    dtype = get_dtype(tensor.element_type)
    rand_min, rand_max = (0, 1) if dtype == bool else (np.iinfo(np.uint8).min, np.iinfo(np.uint8).max)
    if np.dtype(dtype).kind in ['i', 'u', 'b']:
        rand_max += 1
    rs = np.random.RandomState(np.random.MT19937(np.random.SeedSequence(0)))
    if 0 == tensor.get_size():  # noqa: SIM300
        raise RuntimeError("Models with dynamic shapes aren't supported. Input tensors must have specific shapes before inference")
    tensor.data[:] = rs.uniform(rand_min, rand_max, list(tensor.shape)).astype(dtype)


def sync_benchmark(argv: list[str]) -> int:
    """OpenVINO's sync_benchmark.py ``main()``."""
    log.info('OpenVINO:')
    log.info(f"{'Build ':.<39} {ov.__version__}")
    device_name = 'CPU'
    if len(argv) == 3:
        device_name = argv[2]
    elif len(argv) != 2:
        log.info(f'Usage: {argv[0]} <path_to_model> <device_name>(default: CPU)')
        return 1
    latency = {'PERFORMANCE_HINT': 'LATENCY'}
    core = ov.Core()
    compiled_model = core.compile_model(argv[1], device_name, latency)
    ireq = compiled_model.create_infer_request()
    for model_input in compiled_model.inputs:
        fill_tensor_random(ireq.get_tensor(model_input))
    ireq.infer()
    seconds_to_run = 10
    niter = 10
    latencies = []
    start = perf_counter()
    time_point = start
    time_point_to_finish = start + seconds_to_run
    while time_point < time_point_to_finish or len(latencies) < niter:
        ireq.infer()
        iter_end = perf_counter()
        latencies.append((iter_end - time_point) * 1e3)
        time_point = iter_end
    end = time_point
    duration = end - start
    fps = len(latencies) / duration
    log.info(f'Count:          {len(latencies)} iterations')
    log.info(f'Duration:       {duration * 1e3:.2f} ms')
    log.info('Latency:')
    log.info(f'    Median:     {statistics.median(latencies):.2f} ms')
    log.info(f'    Average:    {sum(latencies) / len(latencies):.2f} ms')
    log.info(f'    Min:        {min(latencies):.2f} ms')
    log.info(f'    Max:        {max(latencies):.2f} ms')
    log.info(f'Throughput: {fps:.2f} FPS')
    return 0


stop_requested = False


def _signal_handler(sig: int, frame: Any) -> None:
    global stop_requested
    log.info('Stop signal received, finishing in-flight requests and reporting stats...')
    stop_requested = True


def throughput_benchmark(argv: list[str]) -> int:
    """OpenVINO's throughput_benchmark.py ``main()``."""
    parser = argparse.ArgumentParser()
    parser.add_argument('model', help='Path to model')
    parser.add_argument('device_name', nargs='?', default='CPU')
    parser.add_argument('--seconds-to-run', type=int, default=10)
    parser.add_argument('--niter', type=int, default=10)
    args = parser.parse_args(argv)
    log.info('OpenVINO:')
    log.info(f"{'Build ':.<39} {ov.__version__}")
    tput = {'PERFORMANCE_HINT': 'THROUGHPUT'}
    core = ov.Core()
    compiled_model = core.compile_model(args.model, args.device_name, tput)
    ireqs = ov.AsyncInferQueue(compiled_model)
    for ireq in ireqs:
        for model_input in compiled_model.inputs:
            fill_tensor_random(ireq.get_tensor(model_input))
    for _ in range(len(ireqs)):
        ireqs.start_async()
    ireqs.wait_all()
    seconds_to_run = args.seconds_to_run
    niter = args.niter
    latencies = []
    in_fly = set()
    if hasattr(signal, 'SIGBREAK'):
        signal.signal(signal.SIGBREAK, _signal_handler)
    signal.signal(signal.SIGINT, _signal_handler)
    start = perf_counter()
    time_point_to_finish = start + seconds_to_run
    log.info("Starting inference loop")
    while not stop_requested:
        if seconds_to_run != 0 and perf_counter() >= time_point_to_finish and len(latencies) + len(in_fly) >= niter:
            break
        idle_id = ireqs.get_idle_request_id()
        if idle_id in in_fly:
            latencies.append(ireqs[idle_id].latency)
        else:
            in_fly.add(idle_id)
        ireqs.start_async()
    ireqs.wait_all()
    duration = perf_counter() - start
    for infer_request_id in in_fly:
        latencies.append(ireqs[infer_request_id].latency)
    if not latencies:
        log.info('No completed iterations to report.')
        return 0
    fps = len(latencies) / duration
    log.info(f'Count:          {len(latencies)} iterations')
    log.info(f'Duration:       {duration * 1e3:.2f} ms')
    log.info('Latency:')
    log.info(f'    Median:     {statistics.median(latencies):.2f} ms')
    log.info(f'    Average:    {sum(latencies) / len(latencies):.2f} ms')
    log.info(f'    Min:        {min(latencies):.2f} ms')
    log.info(f'    Max:        {max(latencies):.2f} ms')
    log.info(f'Throughput: {fps:.2f} FPS')
    return 0


@pytest.fixture
def requests_made(monkeypatch: pytest.MonkeyPatch) -> list[ov.InferRequest]:
    """Every request a sample creates, to read its inputs and results afterwards."""
    made: list[ov.InferRequest] = []
    create = ov.CompiledModel.create_infer_request

    def recording(self: ov.CompiledModel) -> ov.InferRequest:
        made.append(create(self))
        return made[-1]

    monkeypatch.setattr(ov.CompiledModel, "create_infer_request", recording)
    return made


def _check_results(request: ov.InferRequest) -> None:
    data = np.array(request.get_tensor("data_0").data)
    assert data.min() >= 0 and data.max() <= 256 and data.std() > 10  # the sample's random fill
    reference = ort_run(MODEL, {"data_0": data})[0]
    np.testing.assert_allclose(request.results[0], reference, rtol=1e-4, atol=1e-6)


def test_sync_benchmark(logs: pytest.LogCaptureFixture, requests_made: list[ov.InferRequest]) -> None:
    assert sync_benchmark(["sync_benchmark.py", str(MODEL), "CPU"]) == 0
    count = int(re.search(r"Count: +(\d+) iterations", logs.text).group(1))  # type: ignore[union-attr]
    assert count >= 10 and "Throughput: " in logs.text
    (request,) = requests_made
    _check_results(request)


def test_throughput_benchmark(logs: pytest.LogCaptureFixture, requests_made: list[ov.InferRequest]) -> None:
    before = signal.getsignal(signal.SIGINT)
    try:
        assert throughput_benchmark([str(MODEL), "CPU", "--seconds-to-run", "1", "--niter", "12"]) == 0
    finally:
        signal.signal(signal.SIGINT, before)
    count = int(re.search(r"Count: +(\d+) iterations", logs.text).group(1))  # type: ignore[union-attr]
    assert count >= 12 and "Throughput: " in logs.text
    assert len(requests_made) >= 1
    for request in requests_made:
        _check_results(request)


# --- sync_benchmark2 -----------------------------------------------------------------------------


def percentile(values: list[float], percent: int) -> float:
    return values[ceil(len(values) * percent / 100) - 1]


def get_random_inputs(compiled_model: ov.CompiledModel) -> dict[str, np.ndarray]:
    """OpenVINO's sync_benchmark2.py ``get_random_inputs()``."""
    random_inputs = {}
    for model_input in compiled_model.inputs:
        tensor_descr = model_input.tensor
        dtype = get_dtype(tensor_descr.element_type)
        rand_min, rand_max = (0, 1) if dtype == np.bool else (np.iinfo(np.uint8).min, np.iinfo(np.uint8).max)
        if np.dtype(dtype).kind in ['i', 'u', 'b']:
            rand_max += 1
        rs = np.random.RandomState(np.random.MT19937(np.random.SeedSequence(0)))
        if 0 == tensor_descr.size:  # noqa: SIM300
            raise RuntimeError("Models with dynamic shapes aren't supported. Input tensors must have specific shapes before inference")
        random_inputs[model_input.any_name] = rs.uniform(rand_min, rand_max, list(tensor_descr.shape)).astype(dtype)
    return random_inputs


def sync_benchmark2(argv: list[str]) -> int | None:
    """OpenVINO's sync_benchmark2.py ``main()`` (``sys.argv`` -> ``argv``; ``openvino.runtime`` -> ``inferplex``)."""
    log.basicConfig(format='[ %(levelname)s ] %(message)s', level=log.INFO, stream=sys.stdout)
    log.info(f"OpenVINO:\n{'': <9}{'API version':.<24} {get_version()}")
    if len(argv) != 2:
        log.info(f'Usage: {argv[0]} <path_to_model>')
        return 1
    latency = {'PERFORMANCE_HINT': 'LATENCY'}
    core = Core()
    compiled_model = core.compile_model(argv[1], 'CPU', latency)
    random_inputs = get_random_inputs(compiled_model)
    compiled_model.infer_new_request(random_inputs)
    seconds_to_run = 15
    niter = 10
    latencies = []
    start = perf_counter()
    time_point = start
    time_point_to_finish = start + seconds_to_run
    while time_point < time_point_to_finish or len(latencies) < niter:
        compiled_model.infer_new_request(random_inputs)
        iter_end = perf_counter()
        latencies.append((iter_end - time_point) * 1e3)
        time_point = iter_end
    end = time_point
    duration = end - start
    latencies.sort()
    percent = 50
    percentile_latency_ms = percentile(latencies, percent)
    avg_latency_ms = sum(latencies) / len(latencies)
    min_latency_ms = latencies[0]
    max_latency_ms = latencies[-1]
    fps = len(latencies) / duration
    log.info(f'Count:          {len(latencies)} iterations')
    log.info(f'Duration:       {duration * 1e3:.2f} ms')
    log.info('Latency:')
    if percent == 50:
        log.info(f'    Median:     {percentile_latency_ms:.2f} ms')
    else:
        log.info(f'({percent} percentile):     {percentile_latency_ms:.2f} ms')
    log.info(f'    AVG:        {avg_latency_ms:.2f} ms')
    log.info(f'    MIN:        {min_latency_ms:.2f} ms')
    log.info(f'    MAX:        {max_latency_ms:.2f} ms')
    log.info(f'Throughput: {fps:.2f} FPS')
    return None


def test_sync_benchmark2(logs: pytest.LogCaptureFixture, requests_made: list[ov.InferRequest]) -> None:
    assert sync_benchmark2(["sync_benchmark2.py", str(MODEL)]) is None
    count = int(re.search(r"Count: +(\d+) iterations", logs.text).group(1))  # type: ignore[union-attr]
    assert count >= 10 and "Throughput: " in logs.text and "API version" in logs.text
    assert len(requests_made) == count + 1  # the warm-up, then one new request an iteration
    inputs = [np.array(r.get_tensor("data_0").data) for r in requests_made]
    assert all(np.array_equal(x, inputs[0]) for x in inputs)  # the one seeded random input, every time
    _check_results(requests_made[-1])


def test_the_samples_model_is_the_onnx_wheels() -> None:
    assert Path(MODEL).is_file()
    assert [p.any_name for p in ov.Core().read_model(MODEL).inputs] == ["data_0"]


# --- model_creation_sample -----------------------------------------------------------------------


_LENET_SIZES = {"conv_1": 20 * 1 * 5 * 5, "add_1": 20, "conv_2": 50 * 20 * 5 * 5, "add_2": 50, "reshape": 4,
                "matmul_1": 500 * 800, "add_3": 500, "matmul_2": 10 * 500, "add_4": 10}
"""The f32 slots of the sample's ``lenet.bin``, in file order (the reshape's two i64 take four)."""

def _digits() -> np.ndarray:
    """Ten 28x28 u8 images, one a row, each with its own share of lit pixels (so top-1s differ)."""
    rng = np.random.default_rng(2)
    lit = rng.random((10, 28 * 28)) < rng.random((10, 1))
    return (lit * rng.integers(0, 256, (10, 28 * 28))).astype(np.uint8)


digits = _digits()
"""Stands in for the sample's ``data.digits``."""


def _lenet_weights() -> dict[str, np.ndarray]:
    """Seeded random LeNet weights at the sample's offsets; the reshape target is ``[0, -1]``."""
    rng = np.random.default_rng(11)
    weights = {name: (rng.standard_normal(size) * 0.02).astype(np.float32) for name, size in _LENET_SIZES.items()}
    weights["reshape"] = np.array([0, -1], dtype=np.int64).view(np.float32)
    return weights


def _write_lenet_bin(path: Path) -> None:
    np.concatenate(list(_lenet_weights().values())).tofile(path)


def _lenet_reference(images: np.ndarray) -> np.ndarray:
    """ONNX Runtime's softmax for ``images`` (N, 1, 28, 28) through the sample's LeNet, built with onnx."""
    from onnx import TensorProto, helper, numpy_helper

    w = _lenet_weights()
    shapes = {"conv_1": [20, 1, 5, 5], "add_1": [1, 20, 1, 1], "conv_2": [50, 20, 5, 5], "add_2": [1, 50, 1, 1],
              "matmul_1": [500, 800], "add_3": [1, 500], "matmul_2": [10, 500], "add_4": [1, 10]}
    inits = [numpy_helper.from_array(w[k].reshape(s), k) for k, s in shapes.items()]
    inits.append(numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat"))
    pool = {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}
    nodes = [
        helper.make_node("Conv", ["x", "conv_1"], ["c1"]), helper.make_node("Add", ["c1", "add_1"], ["a1"]),
        helper.make_node("MaxPool", ["a1"], ["p1"], **pool),
        helper.make_node("Conv", ["p1", "conv_2"], ["c2"]), helper.make_node("Add", ["c2", "add_2"], ["a2"]),
        helper.make_node("MaxPool", ["a2"], ["p2"], **pool),
        helper.make_node("Reshape", ["p2", "flat"], ["r1"]),
        helper.make_node("Gemm", ["r1", "matmul_1", "add_3"], ["g1"], transB=1),
        helper.make_node("Relu", ["g1"], ["relu"]),
        helper.make_node("Gemm", ["relu", "matmul_2", "add_4"], ["g2"], transB=1),
        helper.make_node("Softmax", ["g2"], ["y"], axis=1),
    ]
    graph = helper.make_graph(nodes, "lenet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 28, 28])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return np.asarray(ort_run(model, {"x": images.astype(np.float32)})[0])


def create_model(model_path: str) -> ov.Model:
    """OpenVINO's model_creation_sample.py ``create_model()``."""

    def shape_and_length(shape: list) -> typing.Tuple[list, int]:
        length = reduce(lambda x, y: x * y, shape)
        return shape, length

    weights = np.fromfile(model_path, dtype=np.float32)
    weights_offset = 0
    padding_begin = padding_end = [0, 0]
    input_shape = [64, 1, 28, 28]
    param_node = op.Parameter(ov.Type.f32, ov.Shape(input_shape))
    conv_1_kernel_shape, conv_1_kernel_length = shape_and_length([20, 1, 5, 5])
    conv_1_kernel = op.Constant(ov.Type.f32, ov.Shape(conv_1_kernel_shape), weights[0:conv_1_kernel_length].tolist())
    weights_offset += conv_1_kernel_length
    conv_1_node = opset8.convolution(param_node, conv_1_kernel, [1, 1], padding_begin, padding_end, [1, 1])
    add_1_kernel_shape, add_1_kernel_length = shape_and_length([1, 20, 1, 1])
    add_1_kernel = op.Constant(ov.Type.f32, ov.Shape(add_1_kernel_shape),
                               weights[weights_offset : weights_offset + add_1_kernel_length])
    weights_offset += add_1_kernel_length
    add_1_node = opset8.add(conv_1_node, add_1_kernel)
    maxpool_1_node = opset1.max_pool(add_1_node, [2, 2], padding_begin, padding_end, [2, 2], 'ceil')
    conv_2_kernel_shape, conv_2_kernel_length = shape_and_length([50, 20, 5, 5])
    conv_2_kernel = op.Constant(ov.Type.f32, ov.Shape(conv_2_kernel_shape),
                                weights[weights_offset : weights_offset + conv_2_kernel_length],
                                )
    weights_offset += conv_2_kernel_length
    conv_2_node = opset8.convolution(maxpool_1_node, conv_2_kernel, [1, 1], padding_begin, padding_end, [1, 1])
    add_2_kernel_shape, add_2_kernel_length = shape_and_length([1, 50, 1, 1])
    add_2_kernel = op.Constant(ov.Type.f32, ov.Shape(add_2_kernel_shape),
                               weights[weights_offset : weights_offset + add_2_kernel_length],
                               )
    weights_offset += add_2_kernel_length
    add_2_node = opset8.add(conv_2_node, add_2_kernel)
    maxpool_2_node = opset1.max_pool(add_2_node, [2, 2], padding_begin, padding_end, [2, 2], 'ceil')
    reshape_1_dims, reshape_1_length = shape_and_length([2])
    dtype_weights = np.frombuffer(
        weights[weights_offset : weights_offset + 2 * reshape_1_length],
        dtype=np.int64,
    )
    reshape_1_kernel = op.Constant(ov.Type.i64, ov.Shape(list(dtype_weights.shape)), dtype_weights)
    weights_offset += 2 * reshape_1_length
    reshape_1_node = opset8.reshape(maxpool_2_node, reshape_1_kernel, True)
    matmul_1_kernel_shape, matmul_1_kernel_length = shape_and_length([500, 800])
    matmul_1_kernel = op.Constant(ov.Type.f32, ov.Shape(matmul_1_kernel_shape),
                                  weights[weights_offset : weights_offset + matmul_1_kernel_length],
                                  )
    weights_offset += matmul_1_kernel_length
    matmul_1_node = opset8.matmul(reshape_1_node, matmul_1_kernel, False, True)
    add_3_kernel_shape, add_3_kernel_length = shape_and_length([1, 500])
    add_3_kernel = op.Constant(ov.Type.f32, ov.Shape(add_3_kernel_shape),
                               weights[weights_offset : weights_offset + add_3_kernel_length],
                               )
    weights_offset += add_3_kernel_length
    add_3_node = opset8.add(matmul_1_node, add_3_kernel)
    relu_node = opset8.relu(add_3_node)
    reshape_2_kernel = op.Constant(ov.Type.i64, ov.Shape(list(dtype_weights.shape)), dtype_weights)
    reshape_2_node = opset8.reshape(relu_node, reshape_2_kernel, True)
    matmul_2_kernel_shape, matmul_2_kernel_length = shape_and_length([10, 500])
    matmul_2_kernel = op.Constant(ov.Type.f32, ov.Shape(matmul_2_kernel_shape),
                                  weights[weights_offset : weights_offset + matmul_2_kernel_length],
                                  )
    weights_offset += matmul_2_kernel_length
    matmul_2_node = opset8.matmul(reshape_2_node, matmul_2_kernel, False, True)
    add_4_kernel_shape, add_4_kernel_length = shape_and_length([1, 10])
    add_4_kernel = op.Constant(ov.Type.f32, ov.Shape(add_4_kernel_shape),
                               weights[weights_offset : weights_offset + add_4_kernel_length],
                               )
    weights_offset += add_4_kernel_length
    add_4_node = opset8.add(matmul_2_node, add_4_kernel)
    softmax_axis = 1
    softmax_node = opset8.softmax(add_4_node, softmax_axis)
    return ov.Model(softmax_node, [param_node], 'lenet')


def model_creation_sample(argv: list[str]) -> int:
    """OpenVINO's model_creation_sample.py ``main()`` (``sys.argv`` -> ``argv``)."""
    log.basicConfig(format='[ %(levelname)s ] %(message)s', level=log.INFO, stream=sys.stdout)
    if len(argv) != 3:
        log.info(f'Usage: {argv[0]} <path_to_model> <device_name>')
        return 1
    model_path = argv[1]
    device_name = argv[2]
    labels = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']
    number_top = 1
    log.info('Creating OpenVINO Runtime Core')
    log.info(f'Loading the model using openvino with weights from {model_path}')
    model = create_model(model_path)
    ppp = ov.preprocess.PrePostProcessor(model)
    ppp.input().tensor() \
        .set_element_type(ov.Type.u8) \
        .set_layout(ov.Layout('NHWC'))  # noqa: N400
    ppp.input().model().set_layout(ov.Layout('NCHW'))
    ppp.output().tensor().set_element_type(ov.Type.f32)
    model = ppp.build()
    ov.set_batch(model, digits.shape[0])
    log.info('Loading the model to the plugin')
    core = ov.Core()
    compiled_model = core.compile_model(model, device_name)
    n, c, h, w = model.input().shape
    input_data = np.ndarray(shape=(n, c, h, w))
    for i in range(n):
        image = digits[i].reshape(28, 28)
        image = image[:, :, np.newaxis]
        input_data[i] = image
    log.info('Starting inference in synchronous mode')
    results = compiled_model.infer_new_request({0: input_data})
    predictions = next(iter(results.values()))
    log.info(f'Top {number_top} results: ')
    for i in range(n):
        probs = predictions[i]
        top_n_idexes = np.argsort(probs)[-number_top :][::-1]
        header = 'classid probability'
        header = header + ' label' if labels else header
        log.info(f'Image {i}')
        log.info('')
        log.info(header)
        log.info('-' * len(header))
        for class_id in top_n_idexes:
            probability_indent = ' ' * (len('classid') - len(str(class_id)) + 1)
            label_indent = ' ' * (len('probability') - 8) if labels else ''
            label = labels[class_id] if labels else ''
            log.info(f'{class_id}{probability_indent}{probs[class_id]:.7f}{label_indent}{label}')
        log.info('')
    log.info('This sample is an API example, for any performance measurements please use the dedicated benchmark_app tool\n')
    return 0


def _check_lenet_tops(messages: list[str]) -> None:
    """The logged "classid probability label" rows are ONNX Runtime's top-1 for each digit."""
    reference = _lenet_reference(digits.reshape(-1, 1, 28, 28))
    logged = [re.fullmatch(r"(\d) +(\d\.\d{7}) +(\d)", line) for line in messages]
    tops = [(int(m.group(1)), float(m.group(2))) for m in logged if m and m.group(1) == m.group(3)]
    assert len(tops) == len(digits) == len(reference)
    for (class_id, probability), probs in zip(tops, reference, strict=True):
        assert class_id == int(np.argmax(probs))
        assert probability == pytest.approx(float(probs.max()), abs=2e-6)


def test_model_creation_sample(logs: pytest.LogCaptureFixture, tmp_path: Path, device: str) -> None:
    _write_lenet_bin(tmp_path / "lenet.bin")
    assert model_creation_sample(["model_creation_sample.py", str(tmp_path / "lenet.bin"), device]) == 0
    _check_lenet_tops(logs.messages)


# --- ngraph_function_creation_sample -------------------------------------------------------------


create_ngraph_function = create_model
"""The older sample's builder: the same calls as ``create_model``, spelled ``openvino.runtime.op.Constant``,
``openvino.runtime.opset8.convolution``, ... (``inferplex.op``, ``inferplex.opset8`` here)."""


def ngraph_function_creation_sample(argv: list[str]) -> int:
    """OpenVINO's ngraph_function_creation_sample.py ``main()`` (``sys.argv`` -> ``argv``; ``openvino.runtime``
    -> ``inferplex``): it sets the batch with ``Model.reshape`` of a PartialShape, where the newer sample calls
    ``set_batch``."""
    log.basicConfig(format='[ %(levelname)s ] %(message)s', level=log.INFO, stream=sys.stdout)
    if len(argv) != 3:
        log.info('Usage: <path_to_model> <device_name>')
        return 1
    model_path = argv[1]
    device_name = argv[2]
    labels = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']
    number_top = 1
    log.info('Creating OpenVINO Runtime Core')
    core = Core()
    log.info(f'Loading the network using ngraph function with weights from {model_path}')
    model = create_ngraph_function(model_path)
    ppp = PrePostProcessor(model)
    ppp.input().tensor() \
        .set_element_type(Type.u8) \
        .set_layout(Layout('NHWC'))  # noqa: N400
    ppp.input().model().set_layout(Layout('NCHW'))
    ppp.output().tensor().set_element_type(Type.f32)
    model = ppp.build()
    model.reshape({model.input().get_any_name(): PartialShape((digits.shape[0], model.input().shape[1], model.input().shape[2], model.input().shape[3]))})
    log.info('Loading the model to the plugin')
    compiled_model = core.compile_model(model, device_name)
    n, c, h, w = model.input().shape
    input_data = np.ndarray(shape=(n, c, h, w))
    for i in range(n):
        image = digits[i].reshape(28, 28)
        image = image[:, :, np.newaxis]
        input_data[i] = image
    log.info('Starting inference in synchronous mode')
    results = compiled_model.infer_new_request({0: input_data})
    predictions = next(iter(results.values()))
    log.info(f'Top {number_top} results: ')
    for i in range(n):
        probs = predictions[i]
        top_n_idexes = np.argsort(probs)[-number_top :][::-1]
        header = 'classid probability'
        header = header + ' label' if labels else header
        log.info(f'Image {i}')
        log.info('')
        log.info(header)
        log.info('-' * len(header))
        for class_id in top_n_idexes:
            probability_indent = ' ' * (len('classid') - len(str(class_id)) + 1)
            label_indent = ' ' * (len('probability') - 8) if labels else ''
            label = labels[class_id] if labels else ''
            log.info(f'{class_id}{probability_indent}{probs[class_id]:.7f}{label_indent}{label}')
        log.info('')
    log.info('This sample is an API example, for any performance measurements please use the dedicated benchmark_app tool\n')
    return 0


def test_ngraph_function_creation_sample(logs: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    _write_lenet_bin(tmp_path / "lenet.bin")
    assert ngraph_function_creation_sample(["ngraph_function_creation_sample.py", str(tmp_path / "lenet.bin"), "CPU"]) == 0
    _check_lenet_tops(logs.messages)


# --- hello_reshape_ssd ---------------------------------------------------------------------------


_SSD_BOXES = 6
"""Detections the SSD-like model gives for any image."""


def _ssd_model(path: Path, height: int | str, width: int | str) -> Path:
    """An SSD-like ONNX model over an NCHW f32 image of ``height`` x ``width`` (numbers, or names for
    dynamic dims): its one output is ``[1, 1, N, 7]`` rows of (image_id, label, confidence, xmin, ymin,
    xmax, ymax), as OpenVINO's DetectionOutput gives.

    A strided convolution and a global average pool make five numbers per box from the image; a sigmoid
    brings them into (0, 1) as the confidence and the normalized corners; each box's label is
    constant.  The confidence biases straddle 0, so that some boxes pass the sample's 0.5 threshold.
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    channels = _SSD_BOXES * 5
    bias = rng.standard_normal(channels).astype(np.float32)
    bias[::5] = np.linspace(-3, 3, _SSD_BOXES)
    inits = [numpy_helper.from_array((rng.standard_normal((channels, 3, 3, 3)) * 0.003).astype(np.float32), "w"),
             numpy_helper.from_array(bias, "b"),
             numpy_helper.from_array(np.array([_SSD_BOXES, 5], dtype=np.int64), "boxes"),
             numpy_helper.from_array(np.zeros((_SSD_BOXES, 1), np.float32), "image_id"),
             numpy_helper.from_array(np.arange(1, _SSD_BOXES + 1, dtype=np.float32).reshape(-1, 1), "labels"),
             numpy_helper.from_array(np.array([1, 1, _SSD_BOXES, 7], dtype=np.int64), "out_shape")]
    nodes = [helper.make_node("Conv", ["image", "w", "b"], ["conv"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["conv"], ["pooled"]),
             helper.make_node("Reshape", ["pooled", "boxes"], ["per_box"]),
             helper.make_node("Sigmoid", ["per_box"], ["scores"]),
             helper.make_node("Concat", ["image_id", "labels", "scores"], ["rows"], axis=1),
             helper.make_node("Reshape", ["rows", "out_shape"], ["detection_out"])]
    graph = helper.make_graph(
        nodes, "ssd_like", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, height, width])],
        [helper.make_tensor_value_info("detection_out", TensorProto.FLOAT, [1, 1, _SSD_BOXES, 7])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def _ssd_image(path: str) -> np.ndarray:
    """Stands in for ``cv2.imread(path)``: a random u8 BGR image, 120x160 (not the model's own size)."""
    return np.random.default_rng(sum(path.encode())).integers(0, 256, (120, 160, 3), dtype=np.uint8)


def _draw_rectangle(image: np.ndarray, top_left: tuple[int, int], bottom_right: tuple[int, int],
                    color: tuple[int, int, int], thickness: int) -> None:
    """Stands in for ``cv2.rectangle``: the box's outline, ``thickness`` pixels wide."""
    (x0, y0), (x1, y1) = top_left, bottom_right
    x0, x1 = sorted((x0, x1))
    y0, y1 = sorted((y0, y1))
    for rows, cols in ((slice(y0, y0 + thickness), slice(x0, x1 + 1)), (slice(y1 - thickness + 1, y1 + 1), slice(x0, x1 + 1)),
                       (slice(y0, y1 + 1), slice(x0, x0 + thickness)), (slice(y0, y1 + 1), slice(x1 - thickness + 1, x1 + 1))):
        image[rows, cols] = color


def _write_image(path: str, image: np.ndarray) -> bool:
    """Stands in for ``cv2.imwrite``: the pixels, saved as a .npy file under ``path``."""
    with open(path, "wb") as file:
        np.save(file, image, allow_pickle=False)
    return True


cv2 = SimpleNamespace(imread=_ssd_image, rectangle=_draw_rectangle, imwrite=_write_image)
"""The three OpenCV calls hello_reshape_ssd makes."""


def hello_reshape_ssd(argv: list[str]) -> int:
    """OpenVINO's hello_reshape_ssd.py ``main()`` (``sys.argv`` -> ``argv``)."""
    log.basicConfig(format='[ %(levelname)s ] %(message)s', level=log.INFO, stream=sys.stdout)
    if len(argv) != 4:
        log.info(f'Usage: {argv[0]} <path_to_model> <path_to_image> <device_name>')
        return 1
    model_path = argv[1]
    image_path = argv[2]
    device_name = argv[3]
    log.info('Creating OpenVINO Runtime Core')
    core = ov.Core()
    log.info(f'Reading the model: {model_path}')
    model = core.read_model(model_path)
    if len(model.inputs) != 1:
        log.error('Sample supports only single input topologies')
        return -1
    if len(model.outputs) != 1:
        log.error('Sample supports only single output topologies')
        return -1
    image = cv2.imread(image_path)
    input_tensor = np.expand_dims(image, 0)
    log.info('Reshaping the model to the height and width of the input image')
    n, h, w, c = input_tensor.shape
    model.reshape({model.input().get_any_name(): ov.PartialShape((n, c, h, w))})
    ppp = ov.preprocess.PrePostProcessor(model)
    ppp.input().tensor() \
        .set_element_type(ov.Type.u8) \
        .set_layout(ov.Layout('NHWC'))  # noqa: N400
    ppp.input().model().set_layout(ov.Layout('NCHW'))
    ppp.output().tensor().set_element_type(ov.Type.f32)
    model = ppp.build()
    log.info('Loading the model to the plugin')
    compiled_model = core.compile_model(model, device_name)
    log.info('Starting inference in synchronous mode')
    results = compiled_model.infer_new_request({0: input_tensor})
    predictions = next(iter(results.values()))
    detections = predictions.reshape(-1, 7)
    for detection in detections:
        confidence = detection[2]
        if confidence > 0.5:
            class_id = int(detection[1])
            xmin = int(detection[3] * w)
            ymin = int(detection[4] * h)
            xmax = int(detection[5] * w)
            ymax = int(detection[6] * h)
            log.info(f'Found: class_id = {class_id}, confidence = {confidence:.2f}, ' f'coords = ({xmin}, {ymin}), ({xmax}, {ymax})')
            cv2.rectangle(image, (xmin, ymin), (xmax, ymax), (0, 255, 0), 2)
    cv2.imwrite('out.bmp', image)
    if os.path.exists('out.bmp'):
        log.info('Image out.bmp was created!')
    else:
        log.error('Image out.bmp was not created. Check your permissions.')
    log.info('This sample is an API example, for any performance measurements please use the dedicated benchmark_app tool\n')
    return 0


@pytest.mark.parametrize("model_size", [("H", "W"), (300, 300)], ids=["dynamic", "static"])
def test_hello_reshape_ssd(logs: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           device: str, model_size: tuple[int | str, int | str]) -> None:
    """The sample reshapes the model to the image's size: from dynamic dims, or from SSD's usual 300x300."""
    model_path = _ssd_model(tmp_path / "ssd.onnx", *model_size)
    monkeypatch.chdir(tmp_path)
    assert hello_reshape_ssd(["hello_reshape_ssd.py", str(model_path), "street.bmp", device]) == 0
    image = _ssd_image("street.bmp")
    h, w = image.shape[:2]
    at_image_size = _ssd_model(tmp_path / "reference.onnx", h, w)  # the same weights, built at the image's size
    rows = np.asarray(ort_run(at_image_size, {"image": image[None].transpose(0, 3, 1, 2).astype(np.float32)})[0])
    assert rows.shape == (1, 1, _SSD_BOXES, 7)
    expected = [f"Found: class_id = {int(r[1])}, confidence = {r[2]:.2f}, "
                f"coords = ({int(r[3] * w)}, {int(r[4] * h)}), ({int(r[5] * w)}, {int(r[6] * h)})"
                for r in rows.reshape(-1, 7) if r[2] > 0.5]
    assert 0 < len(expected) < _SSD_BOXES  # the threshold keeps some boxes and drops others
    assert [m for m in logs.messages if m.startswith("Found: ")] == expected
    assert "Image out.bmp was created!" in logs.messages
    drawn = np.load(tmp_path / "out.bmp")
    assert drawn.shape == image.shape and (drawn != image).any(axis=-1).sum() > 0
