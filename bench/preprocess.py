"""Preprocessing in the model (PrePostProcessor) against preprocessing on the host or in torch.

OpenVINO's Deployment Optimization Guide case: 1080p video frames arrive as u8
NHWC (1080x1920x3) and the model takes f32 NCHW 224x224, normalized with
ImageNet's mean and standard deviation.  Three ways to feed it, side by side in
one run, at batch 1 and batch 8, on ``GPU.0`` and ``CPU``:

(a) ``ppp``   - ``ov.preprocess.PrePostProcessor`` adds u8->f32, bilinear resize,
                mean, scale and NHWC->NCHW to the model; the device is fed the raw
                u8 frames.
(b) ``numpy`` - the host resizes (cv2 when importable, else a separable numpy
                bilinear with OpenVINO's half-pixel coordinates), normalizes and
                transposes, then feeds f32 NCHW to the plain model on the same device.
(c) ``torch`` - on the GPU device only: the frames go to the GPU as u8 and torch
                preprocesses them there (``torch.nn.functional.interpolate``), then
                the torch tensor feeds the plain model, as a torch user would do it.

Every runner goes from host u8 frames to host results through the public API
(``compiled(inputs)``).  Runners alternate round by round (ABC, BCA, ...); the
figure per runner is the median of its per-round medians, and ratios are paired
round by round, so that load drifting between rounds hits them alike.

Two checks of agreement, reported as max abs differences under a loose bound
(bilinear implementations differ in rounding and at the edges): the preprocessed
tensor alone (the same steps on an Identity model, against the numpy reference)
and the model's outputs of (a) against (b).

The model is ResNet-50 from torchvision (random weights) exported to ONNX where
torchvision imports, else the onnx wheel's ``light_resnet50``; ``--quick`` uses a
small CNN exported by torch (or ``light_squeezenet`` without torch), an emulated
GPU where CUDA is missing, and short timings.  JSON goes to
``$OUT/preprocess.json`` when ``OUT`` is set.

    python bench/preprocess.py            # on a CUDA machine (< 4 minutes on 16 cores)
    python bench/preprocess.py --quick    # small model, emulated GPU without CUDA (< 2 minutes)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HEIGHT, WIDTH, SIDE = 1080, 1920, 224
MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
# Loose bounds: bilinear implementations round differently (cv2 uses fixed point).
PREPROCESS_BOUND = 0.05  # on the normalized tensor, whose values span about [-2.2, 2.7]
OUTPUT_BOUND = 0.05  # relative to the largest output magnitude
Runner = Callable[[], Any]


# ---------------------------------------------------------------- models


def _small_cnn() -> Any:
    import torch

    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10),
    )


def load_model(quick: bool) -> tuple[Any, str]:
    """(ONNX model as ModelProto or path, its label); input NCHW f32 [N, 3, 224, 224]."""
    has_torch = importlib.util.find_spec("torch") is not None
    if has_torch and (quick or importlib.util.find_spec("torchvision") is not None):
        import torch
        from torch_export import export_onnx

        torch.manual_seed(0)
        if quick:
            module, label = _small_cnn(), "small-cnn (torch export)"
        else:
            import torchvision

            module, label = torchvision.models.resnet50(weights=None), "resnet50 (torchvision, random)"
        example = (torch.randn(1, 3, SIDE, SIDE),)
        return export_onnx(module, example, ["x"], output_names=["y"], dynamic_batch=True), label
    from inferplex.cli.inputs import sample_model_path

    name = "light_squeezenet" if quick else "light_resnet50"
    return str(sample_model_path(name)), f"{name} (onnx wheel)"


def _identity_proto() -> Any:
    """An Identity model on [N, 3, 224, 224] f32: with the PPP steps, it outputs the preprocessed tensor."""
    from onnx import TensorProto, helper

    shape = ["N", 3, SIDE, SIDE]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def plain_model(core: Any, source: Any, batch: int) -> Any:
    """The model read by inferplex, its input made static at ``batch``."""
    model = core.read_model(source)
    model.reshape({model.inputs[0].get_any_name(): [batch, 3, SIDE, SIDE]})
    return model


def with_preprocessing(model: Any, spatial: str) -> Any:
    """``model`` with the Deployment Optimization Guide's PrePostProcessor steps built in."""
    import inferplex as ov
    from inferplex.preprocess import PrePostProcessor, ResizeAlgorithm

    ppp = PrePostProcessor(model)
    tensor = ppp.input().tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC"))
    if spatial == "dynamic":
        tensor.set_spatial_dynamic_shape()
    else:
        tensor.set_spatial_static_shape(HEIGHT, WIDTH)
    ppp.input().preprocess().convert_element_type(ov.Type.f32).resize(
        ResizeAlgorithm.RESIZE_LINEAR).mean(list(MEAN)).scale(list(STD))
    ppp.input().model().set_layout(ov.Layout("NCHW"))
    return ppp.build()


# ---------------------------------------------------------- host and torch preprocessing


def _axis_taps(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bilinear taps along one axis, half-pixel centres clamped to the edges (ONNX Resize, cv2, torch)."""
    source = (np.arange(size_out, dtype=np.float64) + 0.5) * (size_in / size_out) - 0.5
    source = np.clip(source, 0.0, size_in - 1)
    low = np.floor(source).astype(np.intp)
    high = np.minimum(low + 1, size_in - 1)
    return low, high, (source - low).astype(np.float32)


def resize_bilinear_numpy(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """u8 [N, H, W, C] -> f32 [N, height, width, C]: separable bilinear, rows first (they shrink most)."""
    y0, y1, wy = _axis_taps(frames.shape[1], height)
    x0, x1, wx = _axis_taps(frames.shape[2], width)
    top, bottom = frames[:, y0].astype(np.float32), frames[:, y1].astype(np.float32)
    rows = top + (bottom - top) * wy[None, :, None, None]
    left, right = rows[:, :, x0], rows[:, :, x1]
    return left + (right - left) * wx[None, None, :, None]


def _resize_cv2(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    import cv2

    return np.stack([cv2.resize(f, (width, height), interpolation=cv2.INTER_LINEAR)
                     for f in frames]).astype(np.float32)


def host_resizer() -> tuple[Callable[[np.ndarray, int, int], np.ndarray], str]:
    """cv2's resize when cv2 imports (what most users have), else the numpy bilinear."""
    if importlib.util.find_spec("cv2") is not None:
        return _resize_cv2, "cv2"
    return resize_bilinear_numpy, "numpy"


def preprocess_numpy(frames: np.ndarray, resize: Callable[..., np.ndarray]) -> np.ndarray:
    """u8 NHWC 1080p frames -> f32 NCHW 224x224, normalized, contiguous."""
    resized = resize(frames, SIDE, SIDE)
    normalized = (resized - np.float32(MEAN)) / np.float32(STD)
    return np.ascontiguousarray(normalized.transpose(0, 3, 1, 2), dtype=np.float32)


def preprocess_torch(frames: np.ndarray, device: Any) -> Any:
    """u8 NHWC host frames -> f32 NCHW 224x224 on ``device``: copy u8, then cast, resize, normalize there."""
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's own spelling

    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    pixels = torch.from_numpy(frames).to(device).permute(0, 3, 1, 2).float()
    resized = F.interpolate(pixels, size=(SIDE, SIDE), mode="bilinear", align_corners=False)
    return (resized - mean) / std


# ---------------------------------------------------------------- timing


def _time_calls(run: Runner, seconds: float, most: int) -> list[float]:
    """Latencies (ms) of back-to-back calls for about ``seconds`` (at least 2, at most ``most`` calls)."""
    samples: list[float] = []
    stop = time.perf_counter() + seconds
    while len(samples) < 2 or (time.perf_counter() < stop and len(samples) < most):
        began = time.perf_counter()
        run()
        samples.append((time.perf_counter() - began) * 1e3)
    return samples


def measure(runners: dict[str, Runner], rounds: int, seconds: float) -> dict[str, list[float]]:
    """Per-round median ms of each runner; runners rotate their order every round."""
    for run in runners.values():  # warm-up: first calls allocate, tune and capture
        _time_calls(run, 0.0, 2)
    labels = list(runners)
    per_round: dict[str, list[float]] = {label: [] for label in labels}
    for index in range(rounds):
        for label in labels[index % len(labels):] + labels[:index % len(labels)]:
            per_round[label].append(statistics.median(_time_calls(runners[label], seconds, 200)))
    return per_round


def _paired_ratio(numerators: list[float], denominators: list[float]) -> float:
    return statistics.median(n / d for n, d in zip(numerators, denominators, strict=True))


# ---------------------------------------------------------------- the comparison


def _output(result: Any) -> np.ndarray:
    value = result[0]
    return np.asarray(value.cpu() if hasattr(value, "cpu") else value, dtype=np.float32)


def check_preprocessing(core: Any, device: str, frames: np.ndarray, spatial: str,
                        resize: Callable[..., np.ndarray]) -> float:
    """Max abs difference of the PPP steps (on an Identity model) against the host's preprocessing."""
    model = plain_model(core, _identity_proto(), len(frames))
    compiled = core.compile_model(with_preprocessing(model, spatial), device)
    try:
        return float(np.max(np.abs(_output(compiled([frames])) - preprocess_numpy(frames, resize))))
    finally:
        compiled.release()


def compare(core: Any, source: Any, device: str, batch: int, frames: np.ndarray,
            args: argparse.Namespace, torch_device: Any) -> dict[str, Any]:
    """One (device, batch) cell: the runners' timings, ratios and the output agreement of (a) and (b)."""
    resize, resize_name = host_resizer()
    plain = core.compile_model(plain_model(core, source, batch), device)
    fused = core.compile_model(with_preprocessing(plain_model(core, source, batch), args.spatial), device)
    runners: dict[str, Runner] = {
        "ppp": lambda: fused([frames]),
        resize_name: lambda: plain([preprocess_numpy(frames, resize)]),
    }
    if torch_device is not None:
        runners["torch"] = lambda: plain([preprocess_torch(frames, torch_device)])
    try:
        reference = _output(runners[resize_name]())
        difference = float(np.max(np.abs(_output(runners["ppp"]()) - reference)))
        scale = float(np.max(np.abs(reference)))
        per_round = measure(runners, args.rounds, args.seconds)
    finally:
        plain.release()
        fused.release()
    ms = {label: statistics.median(values) for label, values in per_round.items()}
    cell: dict[str, Any] = {
        "device": device, "batch": batch, "host_resize": resize_name,
        "ms": ms, "frames_per_s": {label: batch * 1e3 / value for label, value in ms.items()},
        "per_round_ms": per_round,
        "ppp_over_host": _paired_ratio(per_round["ppp"], per_round[resize_name]),
        "output_max_abs_diff": difference, "output_max_abs": scale,
        "output_close": difference <= OUTPUT_BOUND * max(scale, 1e-6),
    }
    if "torch" in per_round:
        cell["ppp_over_torch"] = _paired_ratio(per_round["ppp"], per_round["torch"])
    return cell


def _print_cell(cell: dict[str, Any]) -> None:
    for label, value in cell["ms"].items():
        print(f"{cell['device']:<8}{cell['batch']:>6}  {label:<8}{value:>10.2f}"
              f"{cell['frames_per_s'][label]:>11.1f}")
    ratios = f"(a)/(b) {cell['ppp_over_host']:.2f}x"
    if "ppp_over_torch" in cell:
        ratios += f", (a)/(c) {cell['ppp_over_torch']:.2f}x"
    verdict = "ok" if cell["output_close"] else "NOT CLOSE"
    print(f"{'':<16}time ratios {ratios} (< 1: ppp faster); outputs (a) vs (b): max abs diff "
          f"{cell['output_max_abs_diff']:.2e} of max |y| {cell['output_max_abs']:.2e} ({verdict})",
          flush=True)


def _torch_device(device: str) -> Any:
    """The torch device that backs inferplex's ``device`` for runner (c), or None (CPU device)."""
    if not device.startswith("GPU"):
        return None
    import torch

    return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small model and short timings")
    parser.add_argument("--spatial", choices=("static", "dynamic"), default="static",
                        help="PPP tensor spatial shape: static 1080x1920 (default) or dynamic")
    parser.add_argument("--devices", default="GPU.0,CPU", help="comma-separated (default GPU.0,CPU)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per cell (default 5; 3 quick)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="seconds per runner per round (default 1.0; 0.3 quick)")
    args = parser.parse_args()
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.seconds = args.seconds if args.seconds is not None else (0.3 if args.quick else 1.0)
    return args


def main() -> int:
    args = _parse()
    cuda = importlib.util.find_spec("torch") is not None and __import__("torch").cuda.is_available()
    if not cuda and args.quick:
        os.environ.setdefault("INFERPLEX_EMULATED_GPUS", "1")
    import inferplex as ov

    # Model.reshape leaves inferred intermediate shapes without a type, and onnx_ir then logs
    # one warning per such value at every compile; they say nothing about this comparison.
    logging.getLogger("onnx_ir.serde").setLevel(logging.ERROR)
    started = time.perf_counter()
    core = ov.Core()
    listed = core.available_devices  # a lone GPU is listed as "GPU", several as "GPU.0", "GPU.1"
    devices = [d for d in args.devices.split(",") if d in listed or d.split(".")[0] in listed]
    skipped = sorted(set(args.devices.split(",")) - set(devices))
    source, label = load_model(args.quick)
    frames = np.random.default_rng(0).integers(0, 256, (8, HEIGHT, WIDTH, 3), dtype=np.uint8)
    print(f"model {label}; frames u8 NHWC {HEIGHT}x{WIDTH}x3 -> f32 NCHW {SIDE}x{SIDE}; "
          f"devices {devices}" + (f" (not present: {skipped})" if skipped else ""), flush=True)
    checks = {d: check_preprocessing(core, d, frames[:2], args.spatial, host_resizer()[0]) for d in devices}
    for device, difference in checks.items():
        verdict = "ok" if difference <= PREPROCESS_BOUND else "NOT CLOSE"
        print(f"preprocessed tensor, ppp on {device} vs {host_resizer()[1]}: max abs diff "
              f"{difference:.2e} (bound {PREPROCESS_BOUND}) {verdict}", flush=True)
    print(f"{'device':<8}{'batch':>6}  {'runner':<8}{'ms':>10}{'frames/s':>11}")
    cells = []
    for device in devices:
        for batch in (1, 8):
            cells.append(compare(core, source, device, batch, frames[:batch], args, _torch_device(device)))
            _print_cell(cells[-1])
    info = {"model": label, "quick": args.quick, "spatial": args.spatial, "cuda": cuda,
            "emulated_gpu": bool(os.environ.get("INFERPLEX_EMULATED_GPUS")) and not cuda,
            "cpu_count": os.cpu_count(), "preprocess_check_max_abs_diff": checks,
            "seconds": time.perf_counter() - started, "cells": cells}
    print(f"total {info['seconds']:.1f} s")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "preprocess.json"), "w") as handle:
            json.dump(info, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
