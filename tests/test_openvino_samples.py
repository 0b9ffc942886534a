"""OpenVINO's Python samples, run end to end on inferplex.

Each sample below is OpenVINO's own (``samples/python/`` in openvinotoolkit/openvino),
changed only where this file says so: ``import inferplex as ov`` (and
``inferplex.utils.types`` for ``openvino.utils.types``), a model from the onnx
wheel (``light_squeezenet``), and random images made with numpy instead of
files read with cv2.  The tests read what the samples log (or the requests they
made) and compare it with ONNX Runtime on the same model and data.  Benchmarks
run on a fast clock, so their timed loops end after their minimum iterations.
"""
# ruff: noqa: E501, E721, RUF059, SIM300 - the samples' own lines are kept as they are

from __future__ import annotations

import argparse
import itertools
import logging as log
import re
import signal
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex.utils.types import get_dtype

from conftest import ONNX_BACKEND_DATA, ort_run

MODEL = ONNX_BACKEND_DATA / "light" / "light_squeezenet.onnx"


def _image(path: str) -> np.ndarray:
    """Stands in for ``cv2.imread(path)``: a random u8 BGR image at the model's size."""
    seed = sum(path.encode())
    return np.random.default_rng(seed).integers(0, 256, (224, 224, 3), dtype=np.uint8)


def _reference(image: np.ndarray) -> np.ndarray:
    """ONNX Runtime's class probabilities for an NHWC u8 image (the samples' NCHW f32 input)."""
    data = image[None].transpose(0, 3, 1, 2).astype(np.float32)
    return np.asarray(ort_run(MODEL, {"data_0": data})[0]).reshape(-1)


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


def test_hello_classification(logs: pytest.LogCaptureFixture) -> None:
    assert hello_classification(["hello_classification.py", str(MODEL), "cat.bmp", "CPU"]) == 0
    tops = _logged_tops(logs.messages)
    _check_top10(tops["cat.bmp"], _reference(_image("cat.bmp")))


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
    assert classification_sample_async(["-m", str(MODEL), "-i", *paths, "-d", "CPU"]) == 0
    tops = _logged_tops(logs.messages)
    assert sorted(tops) == paths
    for path in paths:
        _check_top10(tops[path], _reference(_image(path)))


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


def test_the_samples_model_is_the_onnx_wheels() -> None:
    assert Path(MODEL).is_file()
    assert [p.any_name for p in ov.Core().read_model(MODEL).inputs] == ["data_0"]
