"""The ONNX backend conformance suite of the onnx wheel, as cases any device's test can run.

The CPU and GPU conformance tests run the same cases, read the same reference
data and compare like ``onnx.backend.test.runner``; only what they do around a
case differs (how a device is asked, which tolerances its arithmetic earns,
what counts as a skip).  Keeping collection, loading and comparison here means
a fix to how the suite is read reaches every device at once.

Cases (this onnx wheel ships the ``node`` cases as Python generators, not
files; the other kinds are folders under ``onnx/backend/test/data``):

- ``node``: ``onnx.backend.test.loader.load_model_tests(kind="node")``;
- ``simple``, ``pytorch-converted``, ``pytorch-operator``: ``model.onnx`` and
  ``test_data_set_*/{input,output}_*.pb``;
- ``light``: ``real/<case>/data.json`` points at ``light/light_<name>.onnx``;
  as in the onnx runner, the inputs are ``arange(n) / n`` and the reference is
  ``light_<name>_output_0.pb``.
"""

from __future__ import annotations

import functools
import glob
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.backend.test.loader as loader
from onnx import numpy_helper

DATA = Path(loader.DATA_DIR)
DIR_KINDS = ("simple", "pytorch-converted", "pytorch-operator")
KINDS = ("node", *DIR_KINDS, "light")

DataSets = list[tuple[dict[str, Any], list[Any]]]
"""A case's data sets: ``(inputs by name, reference outputs in model order)``."""


@dataclass(frozen=True)
class Case:
    kind: str
    name: str
    rtol: float = 1e-3
    atol: float = 1e-7
    model_dir: str | None = None  # folder with model.onnx and test_data_set_*
    light_model: str | None = None  # light/light_<name>.onnx
    index: int = -1  # position in node_tests()

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.name}"


@functools.cache
def node_tests() -> list[Any]:
    """The node cases, generated once per process: the generators take seconds."""
    with warnings.catch_warnings():  # the generators cast out-of-range values on purpose
        warnings.simplefilter("ignore")
        return sorted(loader.load_model_tests(str(DATA), kind="node"), key=lambda t: t.name)


@functools.cache
def cases() -> tuple[Case, ...]:
    """Every case of every kind, sorted by id so that test ids are stable across runs."""
    found = [Case("node", t.name, t.rtol, t.atol, index=i) for i, t in enumerate(node_tests())]
    for kind in DIR_KINDS:
        found += [Case(kind, t.name, t.rtol, t.atol, t.model_dir)
                  for t in loader.load_model_tests(str(DATA), kind=kind)]
    for test in loader.load_model_tests(str(DATA), kind="real"):
        # only the light models ship with the wheel; the other real models are downloads
        if test.url and test.url.startswith("onnx/backend/test/data/light/"):
            model = str(DATA / "light" / Path(test.url).name)
            found.append(Case("light", test.model_name, test.rtol, test.atol, light_model=model))
    return tuple(sorted(found, key=lambda c: c.id))


# --- loading a case ---------------------------------------------------------------------------


def as_value(item: Any) -> Any:
    """A node case's input or output as the runtime sees it (tensors as arrays, the rest as is)."""
    return numpy_helper.to_array(item) if isinstance(item, onnx.TensorProto) else item


def _read_pb(path: str, type_proto: onnx.TypeProto) -> Any:
    """A ``.pb`` data file, parsed by the graph's declared type (the file does not say)."""
    data = Path(path).read_bytes()
    if type_proto.HasField("sequence_type"):
        sequence = onnx.SequenceProto()
        sequence.ParseFromString(data)
        return numpy_helper.to_list(sequence)
    if type_proto.HasField("optional_type"):
        optional = onnx.OptionalProto()
        optional.ParseFromString(data)
        return numpy_helper.to_optional(optional)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return numpy_helper.to_array(tensor)


def _dummy_input(value_info: onnx.ValueInfoProto) -> np.ndarray:
    """The onnx runner's input for light models (``generate_dummy_data(random=False)``): the light
    models ship a reference output but no input."""
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                  for d in value_info.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def load_case(case: Case) -> tuple[onnx.ModelProto, DataSets]:
    """The case's model and its data sets as ``(inputs by name, reference outputs)``."""
    if case.light_model is not None:
        model = onnx.load(case.light_model)
        initializers = {i.name for i in model.graph.initializer}
        feeds = {vi.name: _dummy_input(vi) for vi in model.graph.input if vi.name not in initializers}
        prefix = case.light_model[: -len(".onnx")]
        refs = [_read_pb(f"{prefix}_output_{i}.pb", vi.type) for i, vi in enumerate(model.graph.output)]
        return model, [(feeds, refs)]
    if case.model_dir is not None:
        model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
        inputs, outputs = model.graph.input, model.graph.output
        data_sets = []
        for folder in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set*"))):
            n_in = len(glob.glob(os.path.join(folder, "input_*.pb")))
            n_out = len(glob.glob(os.path.join(folder, "output_*.pb")))
            feeds = {inputs[i].name: _read_pb(os.path.join(folder, f"input_{i}.pb"), inputs[i].type)
                     for i in range(n_in)}
            refs = [_read_pb(os.path.join(folder, f"output_{i}.pb"), outputs[i].type) for i in range(n_out)]
            data_sets.append((feeds, refs))
        return model, data_sets
    test = node_tests()[case.index]
    names = [vi.name for vi in test.model.graph.input]
    return test.model, [({names[i]: as_value(v) for i, v in enumerate(ins)}, [as_value(v) for v in outs])
                        for ins, outs in test.data_sets]


def model_path(case: Case, model: onnx.ModelProto, workdir: Path) -> str:
    """A file holding the case's model, for tests that load models by path as users do; node
    cases exist only in memory, so they are saved under ``workdir`` first."""
    if case.light_model is not None:
        return case.light_model
    if case.model_dir is not None:
        return os.path.join(case.model_dir, "model.onnx")
    path = str(workdir / f"{case.name}.onnx")
    onnx.save(model, path)
    return path


# --- comparing like onnx.backend.test.runner ----------------------------------------------------

NARROW_RTOL: Mapping[str, float] = {"bfloat16": 2**-6}
"""The least rtol per output dtype: bfloat16 keeps 8 significant bits, so the suite's default 1e-3
asks for more precision than the type holds."""


def assert_similar(refs: list[Any], outputs: list[Any], rtol: float, atol: float,
                   min_rtol: Mapping[str, float] = NARROW_RTOL) -> None:
    """Same output count, shapes and dtypes, strings equal, numbers within rtol/atol (raised to
    ``min_rtol[dtype]`` for narrow types), NaN where the reference has NaN; sequence outputs
    element by element, optional outputs by presence then value."""
    assert len(outputs) == len(refs), f"{len(outputs)} outputs, the reference has {len(refs)}"
    for index, (ref, out) in enumerate(zip(refs, outputs, strict=True)):
        _assert_similar_value(ref, out, rtol, atol, min_rtol, f"output {index}")


def _assert_similar_value(ref: Any, out: Any, rtol: float, atol: float,
                          min_rtol: Mapping[str, float], where: str) -> None:
    if ref is None or out is None:  # an optional output: present in both or in neither
        assert ref is None and out is None, f"{where}: reference {type(ref)}, got {type(out)}"
        return
    if isinstance(ref, (list, tuple)):
        assert isinstance(out, (list, tuple)), f"{where}: a sequence expected, got {type(out)}"
        assert len(out) == len(ref), f"{where}: sequence of {len(out)}, reference {len(ref)}"
        for j, (r, o) in enumerate(zip(ref, out, strict=True)):
            _assert_similar_value(r, o, rtol, atol, min_rtol, f"{where}[{j}]")
        return
    ref, out = np.asarray(ref), np.asarray(out)
    np.testing.assert_array_equal(out.shape, ref.shape, err_msg=f"{where} has a wrong shape")
    if ref.dtype == object:
        np.testing.assert_array_equal(out, ref, err_msg=f"{where} differs")
        return
    assert out.dtype == ref.dtype, f"{where} has dtype {out.dtype}, the reference {ref.dtype}"
    rtol = max(rtol, min_rtol.get(out.dtype.name, rtol))
    # ml_dtypes (bfloat16, float8, float4, int4, ...) in float32, where numpy's arithmetic is exact;
    # float8_e5m2 passes for a numpy float, but differences taken in it would round
    if out.dtype.kind not in "biufc" or out.dtype.name.startswith(("float8", "float4")):
        out, ref = out.astype(np.float32), ref.astype(np.float32)
    # assert_allclose: NaN must sit where the reference has NaN (equal_nan=True)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, err_msg=f"{where} differs")
