"""ov.Tensor as OpenVINO documents it: construction, memory sharing, shape changes, strings."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import inferplex as ov
from inferplex.errors import InputError


def _array() -> np.ndarray:
    return np.arange(6, dtype=np.float32).reshape(2, 3)


def test_from_numpy_copies_by_default() -> None:
    array = _array()
    tensor = ov.Tensor(array)
    assert not np.shares_memory(tensor.data, array)
    np.testing.assert_array_equal(tensor.data, array)
    tensor.data[0, 0] = 42
    assert array[0, 0] == 0
    assert tensor.element_type == ov.Type.f32 == tensor.get_element_type()
    assert tensor.shape == ov.Shape([2, 3]) == tensor.get_shape() and isinstance(tensor.shape, ov.Shape)
    assert tensor.size == tensor.get_size() == 6
    assert tensor.byte_size == tensor.get_byte_size() == 24
    assert tensor.strides == [12, 4] == tensor.get_strides()
    assert tensor.is_continuous() and repr(tensor) == "<Tensor: shape[2,3] type: f32>"


def test_shared_memory_views_the_array() -> None:
    array = _array()
    tensor = ov.Tensor(array, shared_memory=True)
    assert np.shares_memory(tensor.data, array)
    tensor.data[1, 2] = -1
    assert array[1, 2] == -1
    array[0, 0] = 7
    assert tensor.data[0, 0] == 7


def test_shared_memory_needs_a_contiguous_array() -> None:
    strided = _array()[:, ::2]
    with pytest.raises(InputError, match="C-contiguous"):
        ov.Tensor(strided, shared_memory=True)
    copied = ov.Tensor(strided)
    assert copied.is_continuous() and copied.strides == [8, 4]
    np.testing.assert_array_equal(copied.data, strided)


@pytest.mark.parametrize("shape", [ov.Shape([2, 3]), [2, 3], (2, 3)])
@pytest.mark.parametrize(("element", "dtype"), [(ov.Type.f32, np.float32), (ov.Type.u8, np.uint8),
                                                (np.int64, np.int64), (ov.Type.boolean, bool)])
def test_allocate_from_type_and_shape(element: object, dtype: type, shape: object) -> None:
    tensor = ov.Tensor(element, shape)
    assert tensor.data.shape == (2, 3) and tensor.data.dtype == np.dtype(dtype)
    assert tensor.shape == [2, 3] and tensor.byte_size == 6 * np.dtype(dtype).itemsize


def test_scalar_and_list_tensors() -> None:
    scalar = ov.Tensor(ov.Type.f32, [])
    assert scalar.shape == [] and scalar.size == 1 and scalar.data.shape == ()
    listed = ov.Tensor([1, 2, 3])
    assert listed.element_type == ov.Type.i64 and listed.shape == [3]


def test_set_shape_reshapes_or_reallocates_an_owned_tensor() -> None:
    tensor = ov.Tensor(ov.Type.f32, [2, 3])
    tensor.data[...] = _array()
    tensor.shape = [3, 2]
    assert tensor.get_shape() == [3, 2] and tensor.data.shape == (3, 2)
    np.testing.assert_array_equal(tensor.data.reshape(-1), np.arange(6))  # same memory, in place
    tensor.set_shape(ov.Shape([4, 4]))  # larger: a new buffer
    assert tensor.shape == [4, 4] and tensor.data.shape == (4, 4) and tensor.size == 16


def test_set_shape_on_shared_memory_stays_within_the_array() -> None:
    array = _array()
    tensor = ov.Tensor(array, shared_memory=True)
    tensor.shape = [3, 2]
    assert np.shares_memory(tensor.data, array) and tensor.data.shape == (3, 2)
    with pytest.raises(InputError, match="shares a caller's memory"):
        tensor.shape = [4, 4]
    assert tensor.shape == [3, 2]


def test_bf16_from_its_bits() -> None:
    """A uint16 (or float16) array read as bf16, sharing its memory, as OpenVINO allows."""
    values = np.array([1.0, -2.5, 3.0, 0.5], dtype=ml_dtypes.bfloat16)
    bits = values.view(np.uint16).reshape(2, 2)
    tensor = ov.Tensor(bits, [2, 2], ov.Type.bf16)
    assert tensor.element_type == ov.Type.bf16 and tensor.byte_size == 8
    np.testing.assert_array_equal(tensor.data.astype(np.float32).reshape(-1), values.astype(np.float32))
    assert np.shares_memory(tensor.data, bits)
    assert ov.Tensor(values).element_type == ov.Type.bf16
    with pytest.raises(InputError, match="needs 16"):
        ov.Tensor(np.zeros(4, np.uint8), ov.Shape([2, 2]), ov.Type.f32)


def test_copy_to_and_copy_from() -> None:
    source = ov.Tensor(_array())
    target = ov.Tensor(ov.Type.f32, [3, 3])
    source.copy_to(target)
    assert target.shape == [2, 3]
    np.testing.assert_array_equal(target.data, _array())
    other = ov.Tensor(ov.Type.f32, [1])
    other.copy_from(_array() * 2)
    np.testing.assert_array_equal(other.data, _array() * 2)
    with pytest.raises(InputError, match="element types must be equal"):
        source.copy_to(ov.Tensor(ov.Type.i32, [2, 3]))


def test_string_tensors() -> None:
    tensor = ov.Tensor(np.array(["a", "bc", "déf"]))
    assert tensor.element_type == ov.Type.string and tensor.shape == [3]
    assert list(tensor.str_data) == ["a", "bc", "déf"]
    assert list(tensor.bytes_data) == [b"a", b"bc", "déf".encode()]
    assert list(tensor.data) == list(tensor.bytes_data)
    assert tensor.byte_size == 3 * ov.Type.string.size
    from_bytes = ov.Tensor(np.array([b"x", b"yz"]))
    assert list(from_bytes.str_data) == ["x", "yz"]
    empty = ov.Tensor(ov.Type.string, [2])
    assert list(empty.str_data) == ["", ""]
    empty.str_data = ["q", "rr", "s"]
    assert empty.shape == [3] and list(empty.bytes_data) == [b"q", b"rr", b"s"]
    with pytest.raises(InputError, match="string tensors"):
        _ = ov.Tensor(_array()).str_data


def test_tensor_for_a_port_and_as_an_input(core: ov.Core) -> None:
    from onnx import TensorProto, helper

    from conftest import make_model
    model = core.read_model(make_model([helper.make_node("Relu", ["x"], ["y"])],
                                       [("x", TensorProto.FLOAT, [2, 3])],
                                       [("y", TensorProto.FLOAT, [2, 3])]))
    tensor = ov.Tensor(model.input())
    assert tensor.shape == [2, 3] and tensor.element_type == ov.Type.f32
    tensor.data[...] = _array() - 2
    compiled = core.compile_model(model, "CPU")
    for inputs in (tensor, {"x": tensor}, [tensor]):  # a Tensor goes wherever an array does
        np.testing.assert_array_equal(compiled(inputs)[0], np.maximum(_array() - 2, 0))


@pytest.mark.parametrize("args", [(), ("f32", 3), (object(),), (ov.Type.dynamic, [2])])
def test_bad_construction_names_the_accepted_forms(args: tuple[object, ...]) -> None:
    with pytest.raises(InputError):
        ov.Tensor(*args)


def test_same_answers_as_openvino() -> None:
    ref = pytest.importorskip("openvino")
    for make in (lambda m: m.Tensor(_array()), lambda m: m.Tensor(m.Type.u8, [4, 5]),
                 lambda m: m.Tensor(np.zeros((3, 2), np.int16), shared_memory=True)):
        ours, theirs = make(ov), make(ref)
        assert list(ours.shape) == list(theirs.shape)
        assert (ours.size, ours.byte_size, list(ours.strides)) == \
            (theirs.size, theirs.byte_size, list(theirs.strides))
        assert ours.element_type.to_string() == theirs.element_type.to_string()
