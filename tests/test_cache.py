"""The model cache (CACHE_DIR, LOADED_FROM_CACHE) and export_model/import_model, through the public API.

Results are checked against ONNX Runtime on the whole model; cache behaviour
against OpenVINO's documented behaviour: the first compile writes, the second
loads (LOADED_FROM_CACHE True), a bad entry is compiled again.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import CompileError, ModelError, PropertyError

from conftest import make_model, ort_run

_RNG = np.random.default_rng(7)
_W1 = _RNG.standard_normal((16, 32)).astype(np.float32)
_W2 = _RNG.standard_normal((32, 8)).astype(np.float32)
_X = _RNG.standard_normal((2, 16)).astype(np.float32)


def _mlp() -> onnx.ModelProto:
    """``y = softmax(relu(x @ W1) @ W2)``: weights inside, three ops to split over devices."""
    return make_model(
        [helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("MatMul", ["r", "W2"], ["z"], name="mm2"),
         helper.make_node("Softmax", ["z"], ["y"], name="softmax")],
        [("x", TensorProto.FLOAT, [2, 16])], [("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(_W1, "W1"), numpy_helper.from_array(_W2, "W2")])


_REFERENCE = ort_run(_mlp(), {"x": _X})[0]


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _compile(folder: Path, device: str, config: dict | None = None, model: object = None) -> ov.CompiledModel:
    core = ov.Core()
    core.set_property({"CACHE_DIR": str(folder)})
    return core.compile_model(model if model is not None else _mlp(), device, config or {})


def _check(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    request.start_async({"x": _X})
    request.wait()
    np.testing.assert_allclose(request.results[0], _REFERENCE, rtol=1e-4, atol=1e-5)


@pytest.fixture
def emulated_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "2")


@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
def test_cpu_warm_compile_loads_from_cache(tmp_path: Path, engine: str) -> None:
    config = {"ENGINE": engine, "INFERENCE_PRECISION_HINT": "f32"}
    cold = _compile(tmp_path, "CPU", config)
    assert cold.get_property("LOADED_FROM_CACHE") is False
    assert len(_entries(tmp_path)) == 1
    warm = _compile(tmp_path, "CPU", config)
    assert warm.get_property("LOADED_FROM_CACHE") is True
    assert warm.get_property("ENGINE") == engine
    assert "LOADED_FROM_CACHE" in warm.get_property("SUPPORTED_PROPERTIES")
    _check(cold)
    _check(warm)
    assert len(_entries(tmp_path)) == 1


def test_cache_dir_per_compile_and_without_it(tmp_path: Path) -> None:
    core = ov.Core()
    first = core.compile_model(_mlp(), "CPU", {"CACHE_DIR": tmp_path})  # a pathlib.Path is taken
    assert first.get_property("CACHE_DIR") == str(tmp_path)
    assert core.compile_model(_mlp(), "CPU", {"CACHE_DIR": str(tmp_path)}).get_property("LOADED_FROM_CACHE")
    assert core.compile_model(_mlp(), "CPU").get_property("LOADED_FROM_CACHE") is False


def test_cache_dir_is_private(tmp_path: Path) -> None:
    folder = tmp_path / "made" / "here"
    _compile(folder, "CPU")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    (entry,) = _entries(folder)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_cache_dir_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(PropertyError, match=rf"CACHE_DIR '{folder}' is writable by other users.*chmod go-w"):
        _compile(folder, "CPU")
    assert not list(folder.iterdir())


def test_entry_others_can_write_is_not_loaded(tmp_path: Path) -> None:
    _compile(tmp_path, "CPU")
    (entry,) = _entries(tmp_path)
    entry.chmod(0o666)
    warm = _compile(tmp_path, "CPU")
    assert warm.get_property("LOADED_FROM_CACHE") is False
    _check(warm)
    (entry,) = _entries(tmp_path)  # written again, privately
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def _corrupt(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    data[-100] ^= 0xFF
    entry.write_bytes(bytes(data))


def _truncate(entry: Path) -> None:
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])


def _other_version(entry: Path) -> None:
    """The same entry as another engine version would have written it (its checksum still right)."""
    data = entry.read_bytes()
    marker = b'"fingerprint": "'
    at = data.index(marker) + len(marker)
    entry.write_bytes(data[:at] + (b"X" if data[at:at + 1] != b"X" else b"Y") + data[at + 1:])


def _not_an_entry(entry: Path) -> None:
    entry.write_bytes(b"\x80\x04 not a cache entry")


@pytest.mark.parametrize("damage", [_corrupt, _truncate, _other_version, _not_an_entry])
def test_bad_entry_is_compiled_again(tmp_path: Path, damage: object) -> None:
    _compile(tmp_path, "CPU")
    (entry,) = _entries(tmp_path)
    damage(entry)  # type: ignore[operator]
    rebuilt = _compile(tmp_path, "CPU")
    assert rebuilt.get_property("LOADED_FROM_CACHE") is False
    _check(rebuilt)
    again = _compile(tmp_path, "CPU")  # the entry was written again
    assert again.get_property("LOADED_FROM_CACHE") is True
    _check(again)


def test_different_properties_make_different_entries(tmp_path: Path) -> None:
    latency = _compile(tmp_path, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
    throughput = _compile(tmp_path, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert not latency.get_property("LOADED_FROM_CACHE")
    assert not throughput.get_property("LOADED_FROM_CACHE")
    assert len(_entries(tmp_path)) == 2
    warm = _compile(tmp_path, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert warm.get_property("LOADED_FROM_CACHE") is True
    assert warm.get_property("PERFORMANCE_HINT") == "THROUGHPUT"
    other_model = _mlp()
    other_model.graph.initializer[0].raw_data = (_W1 + 1).tobytes()  # other weights: another entry
    assert not _compile(tmp_path, "CPU", model=other_model).get_property("LOADED_FROM_CACHE")
    assert len(_entries(tmp_path)) == 3


@pytest.mark.parametrize("device", ["HETERO:CPU", "MULTI:CPU", "AUTO:CPU", "AUTO"])
def test_virtual_devices_load_their_members_from_cache(tmp_path: Path, device: str) -> None:
    cold = _compile(tmp_path, device)
    assert cold.get_property("LOADED_FROM_CACHE") is False
    warm = _compile(tmp_path, device)
    if device != "AUTO":  # AUTO picks among the devices present; a GPU here is not cached
        assert warm.get_property("LOADED_FROM_CACHE") is True
    _check(cold)
    _check(warm)


class _Cipher:
    """OpenVINO's CACHE_ENCRYPTION_CALLBACKS as a program writes them: ``[encrypt, decrypt]`` (here an
    XOR with a key, so what the cache holds is unreadable without it), counting the calls."""

    def __init__(self, key: int) -> None:
        self.key, self.encrypted, self.decrypted = key, 0, 0

    def _xor(self, data: bytes) -> bytes:
        return (np.frombuffer(data, np.uint8) ^ np.uint8(self.key)).tobytes()

    def encrypt(self, data: bytes) -> bytes:
        self.encrypted += 1
        return self._xor(data)

    def decrypt(self, data: bytes) -> bytes:
        self.decrypted += 1
        return self._xor(data)

    def callbacks(self) -> dict:
        return {"CACHE_ENCRYPTION_CALLBACKS": [self.encrypt, self.decrypt]}


@pytest.mark.parametrize("device", ["CPU", "AUTO:CPU", "MULTI:CPU"])
def test_cache_entries_are_written_encrypted_and_read_through_the_callbacks(tmp_path: Path,
                                                                            device: str) -> None:
    """As in OpenVINO's docs: CACHE_DIR with CACHE_ENCRYPTION_CALLBACKS caches encrypted programs."""
    folder = tmp_path / "encrypted"
    cipher = _Cipher(0x5A)
    cold = _compile(folder, device, cipher.callbacks())
    assert cold.get_property("LOADED_FROM_CACHE") is False and cipher.encrypted == 1
    plain_dir = tmp_path / "plain"
    _compile(plain_dir, "CPU")  # the same program, cached without the callbacks
    (encrypted_entry,), (plain_entry,) = _entries(folder), _entries(plain_dir)
    program = plain_entry.read_bytes()[-256:]  # the end of the cached program, as stored in clear
    assert program not in encrypted_entry.read_bytes()
    warm = _compile(folder, device, cipher.callbacks())
    assert warm.get_property("LOADED_FROM_CACHE") is True and cipher.decrypted == 1
    _check(cold)
    _check(warm)
    # without the callbacks the encrypted entry is not read: a cold compile, and an entry of its own
    assert _compile(folder, device).get_property("LOADED_FROM_CACHE") is False
    # with other callbacks (another key) the entry does not import: compiled again, never an error
    other = _Cipher(0x33)
    _check(_compile(folder, device, other.callbacks()))
    assert other.decrypted == 1


# --- the GPU device (emulated on torch's CPU) ------------------------------------------


_RNG_GPU = np.random.default_rng(11)
_CONV_W = _RNG_GPU.standard_normal((4, 3, 3, 3)).astype(np.float32)
_CONV_B = _RNG_GPU.standard_normal(4).astype(np.float32)
_BN = [_RNG_GPU.uniform(0.5, 2, 4), _RNG_GPU.uniform(-1, 1, 4), _RNG_GPU.uniform(-1, 1, 4),
       _RNG_GPU.uniform(0.05, 3, 4)]
_DENSE_W = _RNG_GPU.standard_normal((144, 5)).astype(np.float32) * 0.1
_DENSE_B = _RNG_GPU.standard_normal(5).astype(np.float32)


def _cnn() -> onnx.ModelProto:
    """What the GPU's cold compile rewrites: a Conv + BatchNormalization pair (folded into one Conv),
    shape arithmetic on a dynamic batch (folded per input shape), a weight computed by
    ConstantOfShape + Add (folded at lowering time), MatMul + Add (one GEMM)."""
    bn = [numpy_helper.from_array(a.astype(np.float32), n) for a, n in zip(_BN, ["s", "b", "m", "v"],
                                                                           strict=True)]
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], name="bn", epsilon=1e-3),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("Shape", ["r"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["r", "flat_shape"], ["flat"]),
        helper.make_node("ConstantOfShape", ["dense_shape"], ["offset"],
                         value=numpy_helper.from_array(np.array([0.01], np.float32))),
        helper.make_node("Add", ["offset", "dw"], ["dense"]),
        helper.make_node("MatMul", ["flat", "dense"], ["mm"]),
        helper.make_node("Add", ["mm", "db"], ["y"]),
    ]
    weights = [numpy_helper.from_array(_CONV_W, "cw"), numpy_helper.from_array(_CONV_B, "cb"), *bn,
               numpy_helper.from_array(np.array(0, np.int64), "zero"),
               numpy_helper.from_array(np.array([0], np.int64), "axes"),
               numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
               numpy_helper.from_array(np.array([144, 5], np.int64), "dense_shape"),
               numpy_helper.from_array(_DENSE_W, "dw"), numpy_helper.from_array(_DENSE_B, "db")]
    return make_model(nodes, [("x", TensorProto.FLOAT, ["N", 3, 6, 6])], [("y", TensorProto.FLOAT, ["N", 5])],
                      weights)


def _cnn_feeds() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.standard_normal((batch, 3, 6, 6)).astype(np.float32) for batch in (2, 5)]


def _gpu_results(compiled: ov.CompiledModel) -> list[np.ndarray]:
    request = compiled.create_infer_request()
    return [request.infer({"x": x})["y"].copy() for x in _cnn_feeds()]


@pytest.mark.usefixtures("emulated_gpus")
@pytest.mark.parametrize("config", [{}, {"INFERENCE_PRECISION_HINT": "bf16"}, {"GPU_CHANNELS_LAST": "YES"},
                                    {"SHAPE_SPECIALIZATION": False}])
def test_gpu_warm_compile_loads_from_cache_and_equals_the_cold_one(tmp_path: Path, config: dict) -> None:
    cold = _compile(tmp_path, "GPU.1", config, _cnn())
    assert cold.get_property("LOADED_FROM_CACHE") is False
    assert len(_entries(tmp_path)) == 1
    warm = _compile(tmp_path, "GPU.1", config, _cnn())
    assert warm.get_property("LOADED_FROM_CACHE") is True
    assert len(_entries(tmp_path)) == 1
    cold_results, warm_results = _gpu_results(cold), _gpu_results(warm)
    for x, got_cold, got_warm in zip(_cnn_feeds(), cold_results, warm_results, strict=True):
        np.testing.assert_array_equal(got_warm, got_cold)  # the same weights and kernels
        tolerance = 5e-2 if config.get("INFERENCE_PRECISION_HINT") == "bf16" else 1e-4
        np.testing.assert_allclose(got_warm, ort_run(_cnn(), {"x": x})[0], rtol=tolerance, atol=tolerance)
    for key in ("INFERENCE_PRECISION_HINT", "GPU_CHANNELS_LAST", "SHAPE_SPECIALIZATION"):
        assert warm.get_property(key) == cold.get_property(key)


@pytest.mark.usefixtures("emulated_gpus")
def test_gpu_warm_compile_profiles_the_same_nodes(tmp_path: Path) -> None:
    config = {"ENABLE_PROFILING": True}
    records = []
    for _ in range(2):
        request = _compile(tmp_path, "GPU.0", config, _cnn()).create_infer_request()
        request.infer({"x": _cnn_feeds()[0]})
        records.append(sorted((r.node_name, r.node_type, str(r.status)) for r in request.get_profiling_info()
                              if r.node_type != "Transfer"))
    assert any(status == "NOT_RUN" for _, _, status in records[0])  # the folded shape arithmetic
    assert records[1] == records[0]


@pytest.mark.usefixtures("emulated_gpus")
@pytest.mark.parametrize("damage", [_corrupt, _truncate, _other_version, _not_an_entry])
def test_bad_gpu_entry_is_compiled_again(tmp_path: Path, damage: object) -> None:
    _compile(tmp_path, "GPU.0", model=_cnn())
    (entry,) = _entries(tmp_path)
    damage(entry)  # type: ignore[operator]
    rebuilt = _compile(tmp_path, "GPU.0", model=_cnn())
    assert rebuilt.get_property("LOADED_FROM_CACHE") is False
    again = _compile(tmp_path, "GPU.0", model=_cnn())
    assert again.get_property("LOADED_FROM_CACHE") is True
    for x, got in zip(_cnn_feeds(), _gpu_results(again), strict=True):
        np.testing.assert_allclose(got, ort_run(_cnn(), {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("emulated_gpus")
def test_gpu_entry_per_device_and_property(tmp_path: Path) -> None:
    _compile(tmp_path, "GPU.0", model=_cnn())
    assert not _compile(tmp_path, "GPU.1", model=_cnn()).get_property("LOADED_FROM_CACHE")
    f16 = _compile(tmp_path, "GPU.0", {"INFERENCE_PRECISION_HINT": "f16"}, _cnn())
    assert not f16.get_property("LOADED_FROM_CACHE")
    assert len(_entries(tmp_path)) == 3
    assert _compile(tmp_path, "GPU.0", {"INFERENCE_PRECISION_HINT": "f16"}, _cnn()).get_property(
        "LOADED_FROM_CACHE")


@pytest.mark.usefixtures("emulated_gpus")
def test_hetero_over_gpu_and_cpu_loads_both_subgraphs(tmp_path: Path) -> None:
    model = ov.Core().read_model(_mlp())
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "GPU.0" if op.get_friendly_name() in ("mm1", "relu") else "CPU"
    cold = _compile(tmp_path, "HETERO:GPU.0,CPU", model=model)
    assert cold.get_property("HETERO_NUMBER_OF_SUBMODELS") == 2
    assert len(_entries(tmp_path)) == 2  # one per subgraph
    warm = _compile(tmp_path, "HETERO:GPU.0,CPU", model=model)
    _check(cold)
    _check(warm)
    assert cold.get_property("LOADED_FROM_CACHE") is False
    assert warm.get_property("LOADED_FROM_CACHE") is True
    assert len(_entries(tmp_path)) == 2


@pytest.mark.usefixtures("emulated_gpus")
@pytest.mark.parametrize(("device", "entries", "config"), [
    ("MULTI:GPU.0,GPU.1,CPU", 3, {}),
    ("MULTI:GPU.0,CPU", 2, {"WORKER_PROCESSES": "YES"}),  # the GPU compiles in a worker process
    ("AUTO:GPU.0,CPU", 1, {"ENABLE_STARTUP_FALLBACK": False}),  # AUTO picks GPU.0, with no CPU helper
])
def test_multi_and_auto_members_load_from_cache(tmp_path: Path, device: str, entries: int,
                                                config: dict) -> None:
    loaded = []
    for _ in range(2):
        compiled = _compile(tmp_path, device, config)
        requests = [compiled.create_infer_request() for _ in range(4)]
        for request in requests:
            request.start_async({"x": _X})
        for request in requests:
            request.wait()
            np.testing.assert_allclose(request.results[0], _REFERENCE, rtol=1e-4, atol=1e-5)
        loaded.append(compiled.get_property("LOADED_FROM_CACHE"))
        compiled.release()
    assert loaded == [False, True]
    assert len(_entries(tmp_path)) == entries


@pytest.mark.usefixtures("emulated_gpus")
def test_gpu_torch_compile_warm_start(tmp_path: Path) -> None:
    import torch

    def users_artifacts() -> bytes | None:
        saved = torch.compiler.save_cache_artifacts()
        return None if saved is None else saved[0]

    before = users_artifacts()
    config = {"TORCH_COMPILE": True}
    cold = _compile(tmp_path, "GPU.0", config)
    warm = _compile(tmp_path, "GPU.0", config)
    assert (cold.get_property("LOADED_FROM_CACHE"), warm.get_property("LOADED_FROM_CACHE")) == (False, True)
    assert warm.get_property("TORCH_COMPILE") is True
    _check(cold)
    _check(warm)
    # The artefacts went into the entry, not into the list the user's own save_cache_artifacts() reads.
    assert users_artifacts() == before


@pytest.mark.gpu
@pytest.mark.parametrize(("model", "config"), [(_cnn, {}), (_cnn, {"INFERENCE_PRECISION_HINT": "f16"}),
                                               (_mlp, {"TORCH_COMPILE": True})])
def test_cuda_warm_compile_loads_from_cache_and_equals_the_cold_one(tmp_path: Path, model: object,
                                                                   config: dict) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    make = model  # type: ignore[assignment]
    compiled = [_compile(tmp_path, "GPU.0", config, make()) for _ in range(2)]  # type: ignore[operator]
    assert [c.get_property("LOADED_FROM_CACHE") for c in compiled] == [False, True]
    assert len(_entries(tmp_path)) == 1
    if make is _mlp:
        results = [c.create_infer_request().infer({"x": _X})["y"].copy() for c in compiled]
        np.testing.assert_allclose(results[1], _REFERENCE, rtol=1e-3, atol=1e-4)
    else:
        results = [np.concatenate([r.reshape(-1) for r in _gpu_results(c)]) for c in compiled]
        want = np.concatenate([ort_run(_cnn(), {"x": x})[0].reshape(-1) for x in _cnn_feeds()])
        np.testing.assert_allclose(results[1], want, rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(results[1], results[0])


@pytest.mark.gpu
def test_cuda_multi_member_in_a_worker_process_loads_from_cache(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    loaded = []
    for _ in range(2):
        compiled = _compile(tmp_path, "MULTI:GPU.0,CPU", {"WORKER_PROCESSES": "YES"})
        _check(compiled)
        loaded.append(compiled.get_property("LOADED_FROM_CACHE"))
        compiled.release()
    assert loaded == [False, True]


def test_global_cache_dir_reads_back(tmp_path: Path) -> None:
    core = ov.Core()
    core.set_property({"CACHE_DIR": str(tmp_path)})
    assert core.get_property("CPU", "CACHE_DIR") == str(tmp_path)
    assert core.get_property("HETERO", "CACHE_DIR") == str(tmp_path)
    with pytest.raises(PropertyError, match=r"CACHE_DIR.*not accepted.*directory path"):
        core.set_property({"CACHE_DIR": 3})


@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
def test_export_import_round_trip(engine: str) -> None:
    core = ov.Core()
    compiled = core.compile_model(_mlp(), "CPU", {"ENGINE": engine, "INFERENCE_PRECISION_HINT": "f32"})
    blob = compiled.export_model()
    assert isinstance(blob, bytes)
    stream = io.BytesIO()
    assert compiled.export_model(stream) is None
    for source in (blob, io.BytesIO(stream.getvalue())):
        imported = ov.Core().import_model(source, "CPU")
        assert imported.get_property("ENGINE") == engine
        assert imported.get_property("LOADED_FROM_CACHE") is True
        assert [port.any_name for port in imported.inputs] == ["x"]
        _check(imported)


def test_exported_model_is_bytes_and_reads_as_a_stream(tmp_path: Path) -> None:
    # OpenVINO 2024 returns bytes (programs write them to a file as they are), 2026 an io.BytesIO
    blob = ov.Core().compile_model(_mlp(), "CPU").export_model()
    whole = bytes(blob)
    assert blob.getvalue() == whole and bytes(blob.getbuffer()) == whole
    assert blob.tell() == 0 and blob.read(8) == whole[:8] and blob.tell() == 8
    assert blob.read() == whole[8:] and blob.read() == b""
    assert blob.seek(-4, 2) == len(whole) - 4 and blob.read() == whole[-4:]
    for offset, whence in ((-1, 0), (0, 3)):
        with pytest.raises(ModelError, match=r"outside the exported model's bytes.*whence: 0 from the start"):
            blob.seek(offset, whence)
    path = tmp_path / "model.blob"
    path.write_bytes(blob)
    for source in (blob, path.read_bytes(), io.BytesIO(blob.getvalue())):  # read to its end: still whole
        _check(ov.Core().import_model(source, "CPU"))


@pytest.mark.usefixtures("emulated_gpus")
def test_import_refuses_other_devices_and_bad_blobs() -> None:
    blob = ov.Core().compile_model(_mlp(), "CPU").export_model()
    assert isinstance(blob, bytes)
    core = ov.Core()
    with pytest.raises(CompileError, match=r"exported from CPU; it cannot be imported on GPU.0"):
        core.import_model(blob, "GPU")
    with pytest.raises(CompileError, match="checksum does not match"):
        core.import_model(blob[:-10], "CPU")
    with pytest.raises(CompileError, match="does not start with inferplex's marker"):
        core.import_model(b"not a blob", "CPU")
    with pytest.raises(CompileError, match="single device"):
        core.import_model(blob, "MULTI:CPU")
    with pytest.raises(CompileError, match="virtual device"):
        core.compile_model(_mlp(), "MULTI:CPU").export_model()


@pytest.mark.usefixtures("emulated_gpus")
@pytest.mark.parametrize("cache", [False, True])
def test_gpu_export_import_round_trip(tmp_path: Path, cache: bool) -> None:
    config = {"CACHE_DIR": str(tmp_path)} if cache else {}
    compiled = ov.Core().compile_model(_cnn(), "GPU.0", config)
    blob = compiled.export_model()
    assert isinstance(blob, bytes)
    imported = ov.Core().import_model(io.BytesIO(blob), "GPU.0")
    assert imported.get_property("LOADED_FROM_CACHE") is True
    assert [port.any_name for port in imported.inputs] == ["x"]
    for got, want in zip(_gpu_results(imported), _gpu_results(compiled), strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(CompileError, match=r"exported from GPU.0; it cannot be imported on GPU.1"):
        ov.Core().import_model(blob, "GPU.1")


@pytest.mark.usefixtures("emulated_gpus")
def test_a_gpu_model_loaded_from_the_cache_exports_too(tmp_path: Path) -> None:
    cold = ov.Core().compile_model(_cnn(), "GPU.0", {"CACHE_DIR": str(tmp_path)})
    warm = ov.Core().compile_model(_cnn(), "GPU.0", {"CACHE_DIR": str(tmp_path)})
    assert warm.get_property("LOADED_FROM_CACHE") is True
    imported = ov.Core().import_model(warm.export_model(), "GPU.0")
    for got, want in zip(_gpu_results(imported), _gpu_results(cold), strict=True):
        np.testing.assert_array_equal(got, want)


def test_import_refuses_another_engine_version(tmp_path: Path) -> None:
    blob = ov.Core().compile_model(_mlp(), "CPU").export_model()
    assert isinstance(blob, bytes)
    marker = b'"fingerprint": "'
    at = blob.index(marker) + len(marker)
    changed = blob[:at] + b"X" + blob[at + 1:]
    with pytest.raises(CompileError, match="exported by another engine or build"):
        ov.Core().import_model(changed, "CPU")


def test_cache_dir_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("changing a folder's owner needs root")
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 12345, 12345)
    with pytest.raises(PropertyError, match=r"owned by another user.*a directory you own"):
        _compile(folder, "CPU")


def test_encryption_callbacks_that_fail_are_named(tmp_path: Path) -> None:
    def broken(data: bytes) -> bytes:
        raise ValueError("no key")

    with pytest.raises(PropertyError, match="encrypt raised ValueError: no key"):
        _compile(tmp_path, "CPU", {"CACHE_ENCRYPTION_CALLBACKS": [broken, bytes]})
    with pytest.raises(PropertyError, match="encrypt returned str"):
        _compile(tmp_path, "CPU", {"CACHE_ENCRYPTION_CALLBACKS": [lambda data: "text", bytes]})
    assert _entries(tmp_path) == []  # nothing written
    _check(_compile(tmp_path, "CPU"))  # the cache still serves a plain compile
