"""ov.Type, ov.Shape/PartialShape/Dimension, ov.Layout and ov.layout_helpers, as OpenVINO documents them.

Where OpenVINO is installed, a few checks also run the same calls on it and
compare; the expected values here come from OpenVINO's docs and Python API tests.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.errors import InputError

from conftest import make_model

FLOAT = TensorProto.FLOAT

# --- Type ------------------------------------------------------------------------------------------

NUMPY_TYPES = [
    (np.float16, "f16"), (np.float32, "f32"), (np.float64, "f64"), (np.int8, "i8"),
    (np.int16, "i16"), (np.int32, "i32"), (np.int64, "i64"), (np.uint8, "u8"),
    (np.uint16, "u16"), (np.uint32, "u32"), (np.uint64, "u64"), (bool, "boolean"),
]


@pytest.mark.parametrize(("dtype", "name"), NUMPY_TYPES)
def test_type_from_numpy_and_back(dtype: type, name: str) -> None:
    element = getattr(ov.Type, name)
    assert ov.Type(dtype) == element and ov.Type(np.dtype(dtype)) is element
    assert ov.Type(np.dtype(dtype).name) == element  # numpy's spelling, "float32"
    assert ov.Type(name) == element  # the short name to_string() prints
    assert element.to_dtype() == np.dtype(dtype)
    assert element.get_type_name() == element.type_name == element.to_string() == name
    assert element.size == element.get_size() == np.dtype(dtype).itemsize
    assert element.bitwidth == element.get_bitwidth() == 8 * np.dtype(dtype).itemsize


@pytest.mark.parametrize("dtype", [str, bytes, np.str_, np.bytes_, np.dtype("U"), np.dtype("S"),
                                   "string"])
def test_string_types(dtype: object) -> None:
    assert ov.Type(dtype) == ov.Type.string
    assert ov.Type.string.to_dtype().kind == "S"


@pytest.mark.parametrize(
    ("element", "real", "integral", "signed", "quantized"),
    [("f16", True, False, True, False), ("bf16", True, False, True, False),
     ("f32", True, False, True, False), ("i8", False, True, True, True),
     ("i16", False, True, True, False), ("i32", False, True, True, True),
     ("u8", False, True, False, True), ("u64", False, True, False, False),
     ("boolean", False, True, True, False)])
def test_type_flags(element: str, real: bool, integral: bool, signed: bool, quantized: bool) -> None:
    t = getattr(ov.Type, element)
    assert (t.is_real(), t.real) == (real, real)
    assert (t.is_integral(), t.integral) == (integral, integral)
    assert (t.is_signed(), t.signed) == (signed, signed)
    assert (t.is_quantized(), t.quantized) == (quantized, quantized)
    assert t.is_static() and not t.is_dynamic()


def test_dynamic_type() -> None:
    t = ov.Type.dynamic
    assert t.is_dynamic() and not t.is_static() and t.get_type_name() == "dynamic"
    assert t.size == 0 and t.bitwidth == 0
    assert ov.Type.f32.compatible(t) and t.compatible(ov.Type.f32)
    assert not ov.Type.f32.compatible(ov.Type.f16)
    assert t.merge(ov.Type.f32) == ov.Type.f32 and ov.Type.i16.merge(ov.Type.f32) is None
    with pytest.raises(InputError, match="dynamic"):
        t.to_dtype()


def test_type_is_onnx_irs_table() -> None:
    """bf16 and sub-byte types come from onnx-ir's DataType: ml_dtypes' numpy types."""
    assert ov.Type(ml_dtypes.bfloat16) == ov.Type.bf16 and ov.Type.bf16.size == 2
    assert ov.Type.bf16.to_dtype() == np.dtype(ml_dtypes.bfloat16)
    assert ov.Type.u4.bitwidth == 4 and ov.Type.u4.size == 1
    assert ov.Type(ir.DataType.FLOAT) is ov.Type.f32 and ov.Type.f32.data_type == ir.DataType.FLOAT
    assert ov.ElementType is ov.Type


def test_type_equality_hash_and_text() -> None:
    assert ov.Type("float32") is ov.Type.f32 and hash(ov.Type(np.float32)) == hash(ov.Type.f32)
    assert {ov.Type.f32: 1}[ov.Type("f32")] == 1
    assert ov.Type.f32 != np.float32 and ov.Type.f32 != ov.Type.f16  # as OpenVINO: Types only
    assert repr(ov.Type.f32) == "<Type: 'float32'>" and str(ov.Type.i64) == "<Type: 'int64_t'>"  # OpenVINO's
    assert f"{ov.Type.i64}" == "<Type: 'int64_t'>" and ov.Type.boolean.get_type_name() == "boolean"
    assert ov.Type(float) == ov.Type.f64 and ov.Type(int) == ov.Type.i64


@pytest.mark.parametrize("bad", ["nope", "float33", 3.5])
def test_bad_type_names_the_accepted_ones(bad: object) -> None:
    with pytest.raises(InputError, match=r"accepted.*f32"):
        ov.Type(bad)


def test_ports_return_types_and_partial_shapes(core: ov.Core) -> None:
    model = core.read_model(make_model(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64)],
        [("x", FLOAT, ["N", 3])], [("y", TensorProto.INT64, ["N", 3])]))
    assert model.input().element_type is ov.Type.f32 and model.output().get_element_type() == ov.Type.i64
    assert model.input().partial_shape == ov.PartialShape("?,3")
    assert model.input().get_partial_shape().is_dynamic
    with pytest.raises(InputError, match=r"dynamic shape \[\?,3\]"):
        model.input().get_shape()
    model.reshape([2, 3])
    assert model.input().get_shape() == ov.Shape([2, 3]) and model.input().shape == [2, 3]
    assert isinstance(model.input().shape, ov.Shape)


# --- Dimension -----------------------------------------------------------------------------------


def test_static_dimension() -> None:
    d = ov.Dimension(3)
    assert d.is_static and not d.is_dynamic and d.get_length() == 3
    assert d.get_min_length() == d.get_max_length() == 3 == d.min_length == d.max_length
    assert d == 3 and d == ov.Dimension("3") and str(d) == "3" and repr(d) == "<Dimension: 3>"


@pytest.mark.parametrize("d", [ov.Dimension(), ov.Dimension(-1), ov.Dimension("?"),
                               ov.Dimension("-1"), ov.Dimension(0, -1), ov.Dimension.dynamic()])
def test_dynamic_dimension(d: ov.Dimension) -> None:
    assert d.is_dynamic and d.to_string() == "?"
    assert d.get_min_length() == 0 and d.get_max_length() == -1
    with pytest.raises(InputError, match="dynamic"):
        d.get_length()


@pytest.mark.parametrize(("dim", "text", "low", "high"), [
    (ov.Dimension(1, 8), "1..8", 1, 8), (ov.Dimension("1..8"), "1..8", 1, 8),
    (ov.Dimension(2, -1), "2..", 2, -1), (ov.Dimension("..5"), "..5", 0, 5)])
def test_interval_dimension(dim: ov.Dimension, text: str, low: int, high: int) -> None:
    assert dim.is_dynamic and str(dim) == text
    assert (dim.get_min_length(), dim.get_max_length()) == (low, high)


def test_dimension_relations() -> None:
    assert ov.Dimension(3).compatible(ov.Dimension(1, 8)) and not ov.Dimension(3).compatible(4)
    assert ov.Dimension(3).refines(ov.Dimension(1, 8)) and ov.Dimension(1, 8).refines(ov.Dimension())
    assert ov.Dimension().relaxes(ov.Dimension(3)) and not ov.Dimension(3).relaxes(ov.Dimension())
    assert ov.Dimension(1, 4).compatible(ov.Dimension(3, 9))
    assert not ov.Dimension(1, 2).compatible(ov.Dimension(3, 9))
    assert ov.Dimension(1, 4).same_scheme(ov.Dimension()) and not ov.Dimension(3).same_scheme(4)


@pytest.mark.parametrize("args", [(-2,), (5, 2), ("x",), ("1..x",), (1.5,)])
def test_bad_dimensions(args: tuple[object, ...]) -> None:
    with pytest.raises(InputError):
        ov.Dimension(*args)


# --- Shape and PartialShape ------------------------------------------------------------------------


def test_shape_is_a_mutable_list_of_ints() -> None:
    s = ov.Shape([1, 3, 224, 224])
    assert len(s) == 4 and list(s) == [1, 3, 224, 224] and s[-1] == 224
    assert s == [1, 3, 224, 224] and s == (1, 3, 224, 224) and s[1:] == ov.Shape([3, 224, 224])
    assert str(s) == s.to_string() == "[1,3,224,224]" and repr(s) == "<Shape: [1,3,224,224]>"
    s[0] = 8
    assert s == [8, 3, 224, 224] and ov.Shape() == []
    assert np.zeros(ov.Shape([2, 3])).shape == (2, 3)
    assert ov.Shape(np.array([2, 3])) == [2, 3]
    with pytest.raises(InputError, match="PartialShape"):
        ov.Shape([-1, 3])


@pytest.mark.parametrize(("source", "text"), [
    ([1, 3, -1, -1], "[1,3,?,?]"), ("1,3,?,?", "[1,3,?,?]"), ("[1,3,?,?]", "[1,3,?,?]"),
    ("1..8,3,224,224", "[1..8,3,224,224]"), ((1, 2), "[1,2]"),
    ([ov.Dimension(1, 8), 3], "[1..8,3]"), (ov.Shape([1, 2]), "[1,2]"), ("...", "[...]"),
    ("[]", "[]"), ("-1, 3", "[?,3]"), ("..8,3", "[..8,3]")])
def test_partial_shape_forms(source: object, text: str) -> None:
    shape = ov.PartialShape(source)
    assert str(shape) == shape.to_string() == text and repr(shape) == f"<PartialShape: {text}>"
    assert ov.PartialShape(text) == shape  # the printed form reads back


def test_partial_shape_queries() -> None:
    p = ov.PartialShape("1..8,3,?,224")
    assert p.is_dynamic and not p.is_static and p.rank == 4 and len(p) == 4
    assert p[0] == ov.Dimension(1, 8) and p[1] == 3 and p.get_dimension(2).is_dynamic
    assert p.get_min_shape() == [1, 3, 0, 224]
    assert p.get_max_shape() == [8, 3, np.iinfo(np.int64).max, 224]
    assert list(p)[1] == ov.Dimension(3) and p[1:] == ov.PartialShape("3,?,224")
    with pytest.raises(InputError, match="dynamic"):
        p.to_shape()
    static = ov.PartialShape([1, 2])
    assert static.is_static and static.to_shape() == ov.Shape([1, 2]) == static.get_shape()
    assert static == ov.Shape([1, 2]) and static == [1, 2] and static == (1, 2)
    p[2] = 16
    assert p == ov.PartialShape("1..8,3,16,224")


def test_dynamic_rank() -> None:
    p = ov.PartialShape.dynamic()
    assert p.rank.is_dynamic and p.is_dynamic and str(p) == "[...]"
    assert p.get_min_shape() == [] and p.compatible(ov.PartialShape([1, 2, 3]))
    with pytest.raises(InputError, match="rank"):
        len(p)
    assert ov.PartialShape.dynamic(3) == ov.PartialShape("?,?,?")


def test_partial_shape_relations() -> None:
    assert ov.PartialShape("?,3").compatible(ov.PartialShape("2,3"))
    assert ov.PartialShape("2,3").refines(ov.PartialShape("?,3"))
    assert ov.PartialShape("?,3").relaxes(ov.PartialShape("2,3"))
    assert ov.PartialShape("?,3").same_scheme(ov.PartialShape("?,3"))
    assert not ov.PartialShape("2,3").compatible(ov.PartialShape("2"))
    assert not ov.PartialShape("2,3").compatible(ov.PartialShape("2,4"))


# --- Layout ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "shown"), [
    ("NCHW", "[N,C,H,W]"), ("nchw", "[N,C,H,W]"), ("[N,C,H,W]", "[N,C,H,W]"),
    ("NC...", "[N,C,...]"), ("...C", "[...,C]"), ("[N,...,C]", "[N,...,C]"),
    ("N?HW", "[N,?,H,W]"), ("[batch, channels, height, width]", "[N,C,H,W]"),
    ("[custom, x]", "[CUSTOM,X]"), ("", "[...]")])
def test_layout_forms(text: str, shown: str) -> None:
    layout = ov.Layout(text)
    assert layout.to_string() == str(layout) == shown and repr(layout) == f"<Layout: {shown}>"
    assert layout == ov.Layout(shown) and hash(layout) == hash(ov.Layout(shown))


def test_layout_indices() -> None:
    nchw = ov.Layout("NCHW")
    assert not nchw.empty and ov.Layout().empty and ov.Layout() == ov.Layout("")
    assert nchw.has_name("C") and not nchw.has_name("D") and nchw.get_index_by_name("W") == 3
    assert nchw == "NCHW" and nchw != ov.Layout("NHWC")
    assert ov.Layout("...C").get_index_by_name("C") == -1
    assert ov.Layout("[N,...,H,W]").get_index_by_name("H") == -2
    with pytest.raises(InputError, match="no dimension named 'X'"):
        nchw.get_index_by_name("X")


@pytest.mark.parametrize("bad", ["NN", "[N,N]", "N...C...", "[N,C", "N,C", "[N...]"])
def test_bad_layouts(bad: str) -> None:
    with pytest.raises(InputError, match="layout"):
        ov.Layout(bad)


def test_layout_helpers_indices() -> None:
    lh = ov.layout_helpers
    nchw, nhwc = ov.Layout("NCHW"), ov.Layout("NHWC")
    assert (lh.batch_idx(nchw), lh.channels_idx(nchw), lh.height_idx(nchw), lh.width_idx(nchw)) == \
        (0, 1, 2, 3)
    assert (lh.channels_idx(nhwc), lh.height_idx(nhwc), lh.width_idx(nhwc)) == (3, 1, 2)
    assert lh.has_batch(nchw) and lh.has_channels(nchw) and lh.has_height(nchw)
    assert lh.has_width(nchw) and not lh.has_depth(nchw)
    assert lh.depth_idx(ov.Layout("NCDHW")) == 2 and lh.channels_idx(ov.Layout("...C")) == -1
    with pytest.raises(InputError):
        lh.height_idx(ov.Layout("NC"))


def test_layout_on_a_model_input_survives_save_and_compile(core: ov.Core, tmp_path: object) -> None:
    model = core.read_model(make_model([helper.make_node("Relu", ["x"], ["y"])],
                                       [("x", FLOAT, [1, 3, 4, 4])], [("y", FLOAT, [1, 3, 4, 4])]))
    lh = ov.layout_helpers
    assert lh.get_layout(model.input()).empty
    lh.set_layout(model.input(), ov.Layout("NCHW"))
    lh.set_layout(model.output(), "NCHW")
    assert lh.get_layout(model.input()) == ov.Layout("NCHW")
    assert lh.get_layout(model.clone().input()) == ov.Layout("NCHW")
    path = f"{tmp_path}/m.onnx"
    ov.save_model(model, path)
    assert lh.get_layout(core.read_model(path).output()) == "NCHW"
    x = np.linspace(-1, 1, 48, dtype=np.float32).reshape(1, 3, 4, 4)
    np.testing.assert_array_equal(core.compile_model(model, "CPU")(x)[0], np.maximum(x, 0))
    with pytest.raises(InputError, match="rank 4"):
        lh.set_layout(model.input(), ov.Layout("NC"))


def test_same_answers_as_openvino() -> None:
    """Where OpenVINO is installed, it agrees on string forms and intervals."""
    ref = pytest.importorskip("openvino")
    for text in ["1,3,?,?", "1..8,3,224,224", "..8,2..", "..."]:
        assert str(ov.PartialShape(text)) == str(ref.PartialShape(text))
        assert ov.PartialShape(text).is_dynamic == ref.PartialShape(text).is_dynamic
    for text in ["NCHW", "[batch,channels,h,w]", "N...C", "[N,?,H,W]"]:
        assert ov.Layout(text).to_string() == ref.Layout(text).to_string()
    for name in ["f32", "bf16", "u8", "i64", "boolean", "f16"]:
        ours, theirs = getattr(ov.Type, name), getattr(ref.Type, name)
        assert (ours.size, ours.bitwidth, ours.is_signed(), ours.is_quantized(), ours.to_string()) == \
            (theirs.size, theirs.bitwidth, theirs.is_signed(), theirs.is_quantized(), theirs.to_string())
