"""The model cache (``CACHE_DIR``) and the blobs of ``export_model`` / ``import_model``.

With ``CACHE_DIR`` set (``core.set_property({"CACHE_DIR": path})``, per device,
or in a compile config), every device program compiled through
:meth:`DeviceRegistry.compile <inferplex.devices.registry.DeviceRegistry.compile>`
(a single device, each HETERO subgraph, each MULTI/AUTO member) is looked up in
the cache first and written there after a cold compile.  A plugin takes part
through three optional methods of :class:`~inferplex.devices.base.DevicePlugin`:
``cache_fingerprint`` (what a program depends on besides the model and the
config: engine versions, the hardware; None: not cacheable), ``export_program``
and ``import_program``.

Keys.  An entry's key is the SHA-256 of the model's bytes (the serialized ONNX
with every weight, external ones included: :func:`model_digest`), the full
device name, the plugin's fingerprint and every compile property (``CACHE_DIR``
aside).  A change to any of them is another entry.

Trust.  A cache entry is code waiting to run, so:

- the cache directory is created ``0o700``; a directory that another user owns
  or that group or others may write to is refused (PropertyError naming the
  path and the fix), since whoever can write there chooses what runs;
- entries are written ``0o600`` to a temporary file and renamed into place, so
  a reader never sees half an entry;
- an entry is read only when it is a regular file owned by this user and not
  group/world-writable, its header names the same key, format and fingerprint,
  and the SHA-256 of its payload matches the header.  Anything else (truncated,
  corrupt, from another version) is logged, removed and compiled again: never
  trusted, never fatal.

Nothing here is unpickled: OpenVINO's blobs are OpenVINO's own format, read by
OpenVINO's ``import_model``; the header is JSON.  A plugin whose format were a
pickle would be unpickled only after the checks above, inside its
``import_program``.

``export_model`` blobs (:func:`pack_export` / :func:`unpack_export`) carry the
model (ONNX, weights included: the compiled model's ports and runtime model come
from it), the device, the fingerprint, the compile config and the program's
own blob, under one SHA-256.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inferplex.errors import CompileError, PropertyError

if TYPE_CHECKING:
    import onnx_ir as ir

    from inferplex.devices.base import DevicePlugin, DeviceProgram

__all__ = [
    "CacheRecord",
    "CompileLedger",
    "ExportedModel",
    "cache_directory",
    "compile_through_cache",
    "entry_key",
    "exporting",
    "model_bytes",
    "model_digest",
    "pack_export",
    "unpack_export",
]

_log = logging.getLogger("inferplex")

_ENTRY_MAGIC = b"INFERPLEX-CACHE\x00"
_EXPORT_MAGIC = b"INFERPLEX-MODEL\x00"
_FORMAT = 1
_SUFFIX = ".blob"
_UNSAFE_BITS = stat.S_IWGRP | stat.S_IWOTH
_EXPORTING: contextvars.ContextVar[bool] = contextvars.ContextVar("inferplex_cache_exporting", default=False)


def exporting() -> bool:
    """Whether the plugin's ``compile`` running now (on this thread) is a cold compile for the
    cache, whose program ``export_program`` will be asked for next: a plugin may then prepare
    its exported form while it compiles (the GPU keeps its optimised model and records
    torch.compile's artefacts), and skip that work otherwise."""
    return _EXPORTING.get()


# --- the directory -------------------------------------------------------------------


def cache_directory(path: str | os.PathLike[str]) -> Path:
    """``path`` made (0o700) where missing and checked safe; raise PropertyError where it is not.

    Safe: a directory owned by this user that neither group nor others may write to.
    """
    root = Path(path).expanduser()
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = root.stat()
    except OSError as error:
        raise PropertyError(f"CACHE_DIR {str(root)!r} cannot be used: {error}; give a directory "
                            "this user can create and write") from error
    if not stat.S_ISDIR(info.st_mode):
        raise PropertyError(f"CACHE_DIR {str(root)!r} is not a directory; give a directory path")
    if info.st_uid != os.getuid():
        raise PropertyError(f"CACHE_DIR {str(root)!r} is owned by another user (uid {info.st_uid}): "
                            "its entries are code this process would run; use a directory you own")
    if info.st_mode & _UNSAFE_BITS:
        raise PropertyError(f"CACHE_DIR {str(root)!r} is writable by other users (mode "
                            f"{stat.S_IMODE(info.st_mode):o}): they could plant entries this process "
                            f"would run; fix it with 'chmod go-w {root}' or use a private directory")
    return root


# --- keys ------------------------------------------------------------------------------


def model_bytes(model: ir.Model) -> bytes:
    """The model as ONNX bytes with every weight inside (external weights read in)."""
    import onnx_ir as ir

    from inferplex._serialize import serialize_leaving_out

    proto, external = serialize_leaving_out(
        model, lambda value: isinstance(value.const_value, ir.ExternalTensor))
    for value in external:
        tensor = value.const_value
        assert tensor is not None  # serialize_leaving_out leaves out constants only
        inline = ir.Tensor(tensor.numpy(), dtype=tensor.dtype, name=value.name)
        proto.graph.initializer.append(ir.serde.serialize_tensor(inline))
    return bytes(proto.SerializeToString(deterministic=True))


def model_digest(model: ir.Model) -> str:
    """The hex SHA-256 of the model with every weight (external ones read in).

    The same bytes as :func:`model_bytes` are hashed, in another order: the
    model's protobuf without its initializers, then each initializer's name,
    type, shape and raw bytes.  Serializing the weights into a protobuf first
    would copy them twice, which for a model of hundreds of MiB costs more than
    hashing them.
    """
    from inferplex._serialize import serialize_leaving_out

    proto, weights = serialize_leaving_out(model, lambda value: True)
    digest = hashlib.sha256(proto.SerializeToString(deterministic=True))
    for value in weights:
        tensor = value.const_value
        assert tensor is not None  # serialize_leaving_out leaves out constants only
        described = json.dumps([value.name, int(tensor.dtype), [int(d) for d in tensor.shape.numpy()]])
        digest.update(len(described).to_bytes(8, "little") + described.encode())
        data = tensor.tobytes()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _canonical(config: Mapping[str, Any]) -> str:
    return json.dumps({str(k): config[k] for k in sorted(config)}, sort_keys=True, default=str)


def entry_key(model_digest: str, device: str, fingerprint: str, config: Mapping[str, Any]) -> str:
    """The hex SHA-256 naming an entry (see the module docstring)."""
    text = json.dumps([_FORMAT, model_digest, device, fingerprint, _canonical(config)])
    return hashlib.sha256(text.encode()).hexdigest()


# --- entries ---------------------------------------------------------------------------


def _pack(magic: bytes, header: Mapping[str, Any], payload: bytes) -> bytes:
    head = json.dumps(dict(header), sort_keys=True).encode()
    return magic + len(head).to_bytes(8, "little") + head + payload


def _unpack(magic: bytes, blob: bytes) -> tuple[dict[str, Any], bytes]:
    """Header and payload; raise ValueError saying what is wrong."""
    if not blob.startswith(magic):
        raise ValueError("it does not start with inferplex's marker")
    at = len(magic) + 8
    size = int.from_bytes(blob[len(magic):at], "little")
    if len(blob) < at + size:
        raise ValueError("it is truncated")
    try:
        header = json.loads(blob[at:at + size])
    except ValueError:
        raise ValueError("its header is not readable") from None
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        found = header.get("format") if isinstance(header, dict) else "?"
        raise ValueError(f"it is of another format ({found}, this version reads {_FORMAT})")
    payload = blob[at + size:]
    if len(payload) != header.get("payload_bytes") or \
            hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
        raise ValueError("its checksum does not match (truncated or corrupt)")
    return header, payload


def _read_private(path: Path) -> bytes | None:
    """The file's bytes when it is a regular file of this user that others cannot write; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & _UNSAFE_BITS:
            raise ValueError("it is not a private file of this user")
        return handle.read()


def _read_entry(root: Path, key: str, fingerprint: str) -> bytes | None:
    """The payload of entry ``key``, or None; an entry that fails a check is removed."""
    path = root / (key + _SUFFIX)
    try:
        blob = _read_private(path)
        if blob is None:
            return None
        header, payload = _unpack(_ENTRY_MAGIC, blob)
        if header.get("key") != key or header.get("fingerprint") != fingerprint:
            raise ValueError("it was written for another key or engine version")
    except (OSError, ValueError) as error:
        _discard(path, str(error))
        return None
    return payload


def _discard(path: Path, why: str) -> None:
    _log.warning("inferplex: ignoring cache entry %s: %s; compiling again", path, why)
    with contextlib.suppress(OSError):
        path.unlink()


def _write_entry(root: Path, key: str, fingerprint: str, device: str, payload: bytes) -> None:
    """Write entry ``key`` atomically (0o600 temporary file, then rename); failures are logged."""
    from inferplex import __version__

    header = {"format": _FORMAT, "key": key, "fingerprint": fingerprint, "device": device,
              "inferplex": __version__, "payload_bytes": len(payload),
              "payload_sha256": hashlib.sha256(payload).hexdigest()}
    try:
        fd, temporary = tempfile.mkstemp(dir=root, prefix=".tmp-", suffix=_SUFFIX)  # mode 0o600
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_pack(_ENTRY_MAGIC, header, payload))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, root / (key + _SUFFIX))
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as error:
        _log.warning("inferplex: could not write cache entry in %s: %s", root, error)


# --- compiling through the cache ---------------------------------------------------------


@dataclass
class CacheRecord:
    """One device program compiled for a compiled model, and whether it came from the cache."""

    device: str
    plugin: DevicePlugin
    config: dict[str, Any]
    """The config it was compiled with (CACHE_DIR left out)."""
    program: DeviceProgram
    loaded: bool
    """Whether it was imported from a cache entry."""


@dataclass
class CompileLedger:
    """The programs one ``compile_model`` made, wherever (any thread) they were compiled."""

    records: list[CacheRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, record: CacheRecord) -> None:
        with self._lock:
            self.records.append(record)

    def snapshot(self) -> list[CacheRecord]:
        with self._lock:
            return list(self.records)

    def loaded_from_cache(self) -> bool:
        """True when there were programs and every one came from the cache (OpenVINO's LOADED_FROM_CACHE)."""
        records = self.snapshot()
        return bool(records) and all(record.loaded for record in records)


Encryption = tuple[Callable[[bytes], Any], Callable[[bytes], Any]]
"""OpenVINO's ``CACHE_ENCRYPTION_CALLBACKS``: ``(encrypt, decrypt)``, each bytes -> bytes."""


def compile_through_cache(plugin: DevicePlugin, model: ir.Model, device: str, config: Mapping[str, Any],
                          cache_dir: str, compile_cold: Callable[[], DeviceProgram],
                          encryption: Encryption | None = None) -> tuple[DeviceProgram, bool]:
    """``(program, loaded from cache)``: the entry's program where a good one exists, else a cold compile.

    A program the plugin does not cache (no fingerprint, or ``export_program``
    returns None) is compiled cold each time.  An entry the plugin cannot import
    is discarded and compiled again.  With ``encryption`` the entry's program is
    written as ``encrypt(program)`` and read through ``decrypt`` (the entry's own
    header, with its checksum of what was written, stays readable); such entries
    have keys of their own, so compiles with and without the callbacks do not
    read each other's.
    """
    root = cache_directory(cache_dir)
    fingerprint = plugin.cache_fingerprint(device, config)
    if fingerprint is None:
        return compile_cold(), False
    key = entry_key(model_digest(model), device, fingerprint, config) + ("-encrypted" if encryption else "")
    payload = _read_entry(root, key, fingerprint)
    if payload is not None:
        try:
            plain = bytes(encryption[1](payload)) if encryption else payload
            return plugin.import_program(plain, device, dict(config)), True
        except Exception as error:  # noqa: BLE001 - a bad entry is compiled again, never fatal
            _discard(root / (key + _SUFFIX), f"{type(plugin).__name__}.import_program failed: {error}")
    token = _EXPORTING.set(True)
    try:
        program = compile_cold()
    finally:
        _EXPORTING.reset(token)
    try:
        blob = plugin.export_program(program)
    except Exception as error:  # noqa: BLE001 - the program runs; only its entry is missing
        _log.warning("inferplex: %s could not export its program for the cache: %s", device, error)
        blob = None
    if blob is not None:
        try:
            stored = _encrypted(encryption, bytes(blob))
        except PropertyError:
            program.close()  # the compile fails: its program is not handed out
            raise
        _write_entry(root, key, fingerprint, device, stored)
    return program, False


def _encrypted(encryption: Encryption | None, blob: bytes) -> bytes:
    """``encrypt(blob)``; a PropertyError naming the callback where it raises or returns no bytes."""
    if encryption is None:
        return blob
    try:
        stored = encryption[0](blob)
    except Exception as error:  # noqa: BLE001 - the user's callback: named, with what it raised
        raise PropertyError(f"CACHE_ENCRYPTION_CALLBACKS' encrypt raised {type(error).__name__}: {error}; "
                            "it takes the cache entry's bytes and returns bytes") from error
    if not isinstance(stored, (bytes, bytearray, memoryview)):
        raise PropertyError(f"CACHE_ENCRYPTION_CALLBACKS' encrypt returned {type(stored).__name__}; "
                            "it takes the cache entry's bytes and returns bytes")
    return bytes(stored)


def export_anew(plugin: DevicePlugin, model: ir.Model, device: str,
                config: Mapping[str, Any]) -> bytes | None:
    """The blob of a program compiled cold for ``export_model`` (a program imported from the cache
    may not keep its own form: the GPU's would hold a second copy of its weights meanwhile)."""
    token = _EXPORTING.set(True)
    try:
        program = plugin.compile(model, device, dict(config))
    finally:
        _EXPORTING.reset(token)
    try:
        blob = plugin.export_program(program)
    finally:
        program.close()
    return None if blob is None else bytes(blob)


# --- export_model / import_model -------------------------------------------------------


@dataclass(frozen=True)
class ExportedModel:
    """What an ``export_model`` blob holds."""

    device: str
    """Full device name it was compiled for."""
    fingerprint: str
    """The plugin's cache fingerprint then (engine versions, hardware)."""
    config: dict[str, Any]
    """The compile config."""
    model: bytes
    """The model as ONNX bytes, weights included."""
    program: bytes
    """The plugin's own blob of the compiled program."""


def pack_export(exported: ExportedModel) -> bytes:
    """An ``export_model`` blob (see the module docstring)."""
    from inferplex import __version__

    payload = exported.model + exported.program
    header = {"format": _FORMAT, "device": exported.device, "fingerprint": exported.fingerprint,
              "config": json.loads(json.dumps(exported.config, default=str)), "inferplex": __version__,
              "model_bytes": len(exported.model), "payload_bytes": len(payload),
              "payload_sha256": hashlib.sha256(payload).hexdigest()}
    return _pack(_EXPORT_MAGIC, header, payload)


def unpack_export(blob: bytes) -> ExportedModel:
    """The parts of an ``export_model`` blob; raise CompileError saying why it cannot be imported."""
    try:
        header, payload = _unpack(_EXPORT_MAGIC, blob)
    except ValueError as error:
        raise CompileError(f"import_model cannot read the blob: {error}; import_model takes what "
                           "CompiledModel.export_model() wrote, unchanged") from None
    split = int(header["model_bytes"])
    return ExportedModel(str(header["device"]), str(header["fingerprint"]), dict(header["config"]),
                         payload[:split], payload[split:])
