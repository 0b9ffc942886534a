"""Byte-level mutants of real small ONNX models, for fuzzing ``read_model`` and ``compile_model``.

The seeds are small models of the onnx wheel's ``light`` set (their weights are
ConstantOfShape ops, so the files are a few KiB to a few hundred) and a model
built here with a bit of everything a reader walks: initializers, value_info,
a Constant, an If with two subgraphs, metadata and a local function.

Mutants are deterministic for a seed: bit flips, truncations, byte insertions,
deletions, random overwrites, and varint-sized fields rewritten to huge or
negative values (the fields a crafted file lies in: sizes, dims, types).  Most
byte-level mutants break the protobuf wire format; :func:`field_mutants` edits
one field of the built model through protobuf instead (a number, a name, an
element dropped or doubled), so most of them parse and many reach a compile.
``bench/fuzz_models.py`` prints counts of what they end as; ``tests/test_model_fuzz.py``
checks that only ``inferplex.errors`` escape.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import ONNX_BACKEND_DATA

LIGHT_SEEDS = ("light_bvlc_alexnet", "light_zfnet512", "light_vgg19", "light_squeezenet",
               "light_inception_v1")
"""The light models used as seeds: the smallest five (4 to 37 KiB)."""


def built_model() -> onnx.ModelProto:
    """x f32 [2, 3], flag bool [] -> y f32 [2, 3]: Add, MatMul, an If with two branches, a function."""
    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["s"], ["t_out"], name="then_relu")], "then",
        [], [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [2, 3])])
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["s"], ["e_out"], name="else_neg")], "else",
        [], [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [2, 3])])
    function = helper.make_function(
        "local", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)])
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["s0"], name="add"),
        helper.make_node("MatMul", ["s0", "w"], ["s1"], name="matmul"),
        helper.make_node("Constant", [], ["half"], name="const",
                         value=numpy_helper.from_array(np.array(0.5, np.float32), "half_value")),
        helper.make_node("Mul", ["s1", "half"], ["s"], name="scale"),
        helper.make_node("If", ["flag"], ["branch"], name="choose",
                         then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Twice", ["branch"], ["y"], name="twice", domain="local"),
    ]
    graph = helper.make_graph(
        nodes, "built",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "bias"),
                     numpy_helper.from_array(np.eye(3, dtype=np.float32), "w")],
        value_info=[helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("local", 1)],
                              functions=[function], producer_name="inferplex-fuzz")
    model.ir_version = 8
    helper.set_model_props(model, {"purpose": "fuzz seed"})
    onnx.checker.check_model(model)
    return model


def seeds() -> dict[str, bytes]:
    """Seed name -> serialized model: the built model and the light models of LIGHT_SEEDS."""
    found = {"built": built_model().SerializeToString()}
    for name in LIGHT_SEEDS:
        found[name] = (ONNX_BACKEND_DATA / "light" / f"{name}.onnx").read_bytes()
    return found


def _flip_bits(rng: random.Random, data: bytearray) -> str:
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return "flip"


def _truncate(rng: random.Random, data: bytearray) -> str:
    del data[rng.randrange(len(data)):]
    return "truncate"


def _insert(rng: random.Random, data: bytearray) -> str:
    at = rng.randrange(len(data) + 1)
    data[at:at] = rng.randbytes(rng.randint(1, 8))
    return "insert"


def _delete(rng: random.Random, data: bytearray) -> str:
    at = rng.randrange(len(data))
    del data[at:at + rng.randint(1, 8)]
    return "delete"


def _overwrite(rng: random.Random, data: bytearray) -> str:
    at = rng.randrange(len(data))
    size = rng.randint(1, 8)
    data[at:at + size] = rng.randbytes(size)
    return "overwrite"


def _huge_varint(rng: random.Random, data: bytearray) -> str:
    """A byte that ends a varint (high bit clear) grown into a large or negative 64-bit varint."""
    ends = [i for i in range(1, len(data)) if data[i] < 0x80 and data[i - 1] < 0x80]
    at = rng.choice(ends) if ends else rng.randrange(len(data))
    value = rng.choice([(1 << 31) - 1, 1 << 40, (1 << 64) - 1, (1 << 64) - rng.randint(1, 100), 99])
    encoded = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        encoded.append(low | (0x80 if value else 0))
        if not value:
            break
    data[at:at + 1] = encoded
    return "varint"


_MUTATIONS: tuple[Callable[[random.Random, bytearray], str], ...] = (
    _flip_bits, _truncate, _insert, _delete, _overwrite, _huge_varint)


@dataclass(frozen=True)
class Mutant:
    """One mutant: the seed it came from, the mutations applied, and its bytes."""

    seed: str
    """Name of the seed model (``built`` or a light model's name)."""
    kind: str
    """The mutations applied, joined with ``+`` (``flip``, ``truncate+insert``, ...)."""
    data: bytes
    """The mutated file's bytes."""


def mutants(count: int, seed: int = 0) -> Iterator[Mutant]:
    """``count`` mutants, the same ones for the same ``seed``; one to three mutations each."""
    rng = random.Random(seed)
    sources = seeds()
    names = sorted(sources)
    for _ in range(count):
        name = rng.choice(names)
        data = bytearray(sources[name])
        kinds = [rng.choice(_MUTATIONS)(rng, data) for _ in range(rng.choice((1, 1, 2, 3)))
                 if data]
        yield Mutant(name, "+".join(kinds), bytes(data))


_NUMBERS = (0, 1, -1, 2, 99, 1 << 31, -(1 << 31), 1 << 40, (1 << 63) - 1, -(1 << 63))
_FLOATS = (0.0, -1.0, float("nan"), float("inf"), 1e38)


def _leaves(message: Any) -> list[tuple[Any, Any, int | None]]:
    """Every field set in ``message`` and below: (message, field descriptor, index or None)."""
    found: list[tuple[Any, Any, int | None]] = []
    stack = [message]
    while stack:
        current = stack.pop()
        for field, value in current.ListFields():
            if field.is_repeated:
                found.extend((current, field, index) for index in range(len(value)))
                if field.type == field.TYPE_MESSAGE:
                    stack.extend(value)
            else:
                found.append((current, field, None))
                if field.type == field.TYPE_MESSAGE:
                    stack.append(value)
    return found


def _edit_field(rng: random.Random, model: onnx.ModelProto, names: list[str]) -> str:
    """One field of ``model`` changed in place; returns ``<field>:<edit>``."""
    message, field, index = rng.choice(_leaves(model))
    container = getattr(message, field.name)
    if index is not None and rng.random() < 0.3:
        if rng.random() < 0.5 or field.type != field.TYPE_MESSAGE:
            del container[index]
            return f"{field.name}:drop"
        container.add().CopyFrom(container[index])
        return f"{field.name}:double"
    if field.type == field.TYPE_MESSAGE:
        (container[index] if index is not None else container).Clear()
        return f"{field.name}:clear"
    if field.type == field.TYPE_STRING:
        value: Any = rng.choice([*names, "", "x" * rng.randint(1, 300), "../" + rng.choice(names), "\0"])
    elif field.type == field.TYPE_BYTES:
        value = rng.randbytes(rng.randint(0, 16))
    elif field.cpp_type in (field.CPPTYPE_FLOAT, field.CPPTYPE_DOUBLE):
        value = rng.choice(_FLOATS)
    else:
        value = rng.choice(_NUMBERS)
        if field.cpp_type in (field.CPPTYPE_INT32, field.CPPTYPE_UINT32, field.CPPTYPE_ENUM):
            value = (value if -(1 << 31) <= value < (1 << 31) else 99)
        if field.cpp_type in (field.CPPTYPE_UINT32, field.CPPTYPE_UINT64):
            value = abs(value)
    try:
        if index is None:
            setattr(message, field.name, value)
        else:
            container[index] = value
    except (ValueError, TypeError):  # a value protobuf itself refuses (an enum's unknown number)
        return f"{field.name}:kept"
    return f"{field.name}:{value!r}"[:60]


def field_mutants(count: int, seed: int = 0) -> Iterator[Mutant]:
    """``count`` mutants of the built model, one or two fields edited each; the same for one ``seed``."""
    rng = random.Random(seed)
    source = built_model()
    names = sorted({name for node in source.graph.node for name in (*node.input, *node.output)})
    for _ in range(count):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        kinds = [_edit_field(rng, model, names) for _ in range(rng.choice((1, 1, 2)))]
        yield Mutant("built", "+".join(kinds), model.SerializeToString())
