"""``ov.convert_model`` on PyTorch models: modules, TorchScript and ExportedPrograms, checked against
the modules' own outputs and, where openvino is installed, against ``openvino.convert_model``."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.errors import InputError, ModelError

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.head = torch.nn.Linear(4, 5)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(image)).mean((2, 3)))


class TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(6, 4)
        self.b = torch.nn.Linear(3, 4)

    def forward(self, left: Any, right: Any) -> Any:
        return self.a(left) + self.b(right), torch.tanh(self.a(left))


class DictOut(torch.nn.Module):
    def forward(self, left: Any, right: Any) -> Any:
        return {"total": left.sum(-1) + right.sum(-1), "left": left * 2}


class EncoderBlock(torch.nn.Module):
    """A transformer encoder layer: self-attention and a feed-forward net, each with a residual."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.scale = 1 / math.sqrt(width // heads)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.norm1 = torch.nn.LayerNorm(width)
        self.ff = torch.nn.Sequential(torch.nn.Linear(width, 32), torch.nn.GELU(), torch.nn.Linear(32, width))
        self.norm2 = torch.nn.LayerNorm(width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        batch, length, width = tokens.shape
        q, k, v = self.qkv(tokens).reshape(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attention = torch.softmax(q @ k.transpose(-1, -2) * self.scale, -1)
        mixed = (attention @ v).transpose(1, 2).reshape(batch, length, width)
        tokens = self.norm1(tokens + self.out(mixed))
        return self.norm2(tokens + self.ff(tokens))


def _eval(module: Any) -> Any:
    torch.manual_seed(0)
    return module.eval()


def _data(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _torch_outputs(module: Any, *args: Any, **kwargs: Any) -> list[np.ndarray]:
    with torch.no_grad():
        result = module(*[torch.from_numpy(a) for a in args],
                        **{k: torch.from_numpy(v) for k, v in kwargs.items()})
    results = list(result.values()) if isinstance(result, dict) else \
        list(result) if isinstance(result, tuple) else [result]
    return [r.numpy() for r in results]


def _run(model: ov.Model, *args: np.ndarray) -> list[np.ndarray]:
    result = ov.compile_model(model, "CPU")(list(args))
    return [np.asarray(result[i]) for i in range(len(model.outputs))]


def _shapes(model: Any) -> list[str]:
    return [str(port.get_partial_shape()) for port in model.inputs]


def _names(model: Any) -> list[str]:
    return [port.get_any_name() for port in model.inputs]


def _close(got: list[np.ndarray], want: list[np.ndarray], tolerance: float = 1e-5) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=10 * tolerance, atol=tolerance)


# --- sources, against the module's own outputs ---------------------------------------------------


def test_cnn_matches_torch_and_runs_at_other_sizes() -> None:
    module = _eval(CNN())
    x = _data(2, 3, 8, 8)
    model = ov.convert_model(module, example_input=torch.from_numpy(x))
    assert _names(model) == ["image"]
    assert _shapes(model) == ["[?,3,?,?]"]  # channels from the convolution, the rest dynamic
    _close(_run(model, x), _torch_outputs(module, x))
    other = _data(5, 3, 11, 7)
    _close(_run(model, other), _torch_outputs(module, other))
    assert module.training is False
    trained = _eval(CNN()).train()
    ov.convert_model(trained, example_input=x)  # numpy example; exported in eval mode, mode kept
    assert trained.training is True


@pytest.mark.parametrize("form", ["tuple", "list", "dict", "dict_reversed"])
def test_two_inputs_tuple_and_dict_examples(form: str) -> None:
    module = _eval(TwoInputs())
    left, right = _data(2, 6), _data(2, 3)
    tl, tr = torch.from_numpy(left), torch.from_numpy(right)
    example = {"tuple": (tl, tr), "list": [tl, tr], "dict": {"left": tl, "right": tr},
               "dict_reversed": {"right": tr, "left": tl}}[form]
    model = ov.convert_model(module, example_input=example)
    assert _names(model) == ["left", "right"]  # forward()'s order, as OpenVINO's
    assert _shapes(model) == ["[?,?]", "[?,?]"]
    _close(_run(model, left, right), _torch_outputs(module, left, right))
    left4, right4 = _data(4, 6), _data(4, 3)
    _close(_run(model, left4, right4), _torch_outputs(module, left4, right4))


def test_dict_output_names_are_its_keys() -> None:
    left, right = _data(2, 6), _data(2, 3)
    model = ov.convert_model(DictOut().eval(), example_input=(left, right))
    assert [port.get_any_name() for port in model.outputs] == ["total", "left"]
    _close(_run(model, left, right), _torch_outputs(DictOut().eval(), left, right))


def test_transformer_block_runs_at_other_lengths() -> None:
    module = _eval(EncoderBlock())
    x = _data(2, 5, 16)
    model = ov.convert_model(module, example_input=torch.from_numpy(x))
    assert _shapes(model) == ["[?,?,?]"]
    _close(_run(model, x), _torch_outputs(module, x))
    longer = _data(3, 9, 16)
    _close(_run(model, longer), _torch_outputs(module, longer))


@pytest.mark.parametrize("kind", ["trace", "script"])
def test_torchscript_modules(kind: str) -> None:
    module = _eval(CNN())
    x = torch.from_numpy(_data(2, 3, 8, 8))
    script = torch.jit.trace(module, x) if kind == "trace" else torch.jit.script(module)
    model = ov.convert_model(script, example_input=x)
    assert _names(model) == ["image"]
    other = _data(3, 3, 6, 6)
    _close(_run(model, other), _torch_outputs(module, other))


def test_exported_program_with_and_without_example() -> None:
    module = _eval(TwoInputs())
    left, right = _data(2, 6), _data(2, 3)
    program = torch.export.export(module, (torch.from_numpy(left), torch.from_numpy(right)))
    for model in (ov.convert_model(program), ov.convert_model(program, example_input=(left, right))):
        assert _names(model) == ["left", "right"]
        _close(_run(model, left, right), _torch_outputs(module, left, right))


def test_integer_inputs_and_input_types() -> None:
    module = _eval(torch.nn.Embedding(10, 4))
    ids = np.array([[1, 2, 3]], np.int64)
    model = ov.convert_model(module, example_input=torch.from_numpy(ids))
    assert model.input().get_element_type() == ov.Type.i64
    retyped = ov.convert_model(module, example_input=torch.from_numpy(ids), input=[ov.Type.i32])
    assert retyped.input().get_element_type() == ov.Type.i32
    _close(_run(retyped, ids.astype(np.int32)), _torch_outputs(module, ids))


# --- input= shapes -------------------------------------------------------------------------------


@pytest.mark.parametrize("given", [[1, 3, 8, 8], [[1, 3, 8, 8]], ("image", [1, 3, 8, 8], ov.Type.f32),
                                   {"image": [1, 3, 8, 8]}])
def test_input_shapes_without_example(given: Any) -> None:
    module = _eval(CNN())
    model = ov.convert_model(module, input=given)
    assert _names(model) == ["image"]
    assert _shapes(model) == ["[1,3,8,8]"]
    x = _data(1, 3, 8, 8)
    _close(_run(model, x), _torch_outputs(module, x))


def test_dynamic_input_shapes_without_example() -> None:
    module = _eval(TwoInputs())
    model = ov.convert_model(module, input=[("left", ov.PartialShape([-1, 6])),
                                            ("right", ov.PartialShape([ov.Dimension(1, 8), 3]))])
    assert _shapes(model) == ["[?,6]", "[1..8,3]"]
    left, right = _data(5, 6), _data(5, 3)
    _close(_run(model, left, right), _torch_outputs(module, left, right))


def test_input_shapes_with_example_match_openvino() -> None:
    openvino = pytest.importorskip("openvino")
    module = _eval(CNN())
    x = torch.from_numpy(_data(2, 3, 8, 8))
    for given in ([-1, 3, 8, 8], ("image", [1, 3, 8, 8])):
        ours = ov.convert_model(module, example_input=x, input=given)
        theirs = openvino.convert_model(module, example_input=x, input=given)
        assert _shapes(ours) == _shapes(theirs)
        assert _names(ours) == _names(theirs) == ["image"]
        size = [1 if str(d) == "?" else int(str(d)) for d in ours.input().get_partial_shape()]
        data = _data(*size)
        _close(_run(ours, data), _torch_outputs(module, data))


def test_two_inputs_shapes_and_names_match_openvino() -> None:
    openvino = pytest.importorskip("openvino")
    module = _eval(TwoInputs())
    left, right = torch.from_numpy(_data(2, 6)), torch.from_numpy(_data(2, 3))
    ours = ov.convert_model(module, example_input=(left, right),
                            input=[ov.PartialShape([-1, 6]), ov.PartialShape([ov.Dimension(1, 8), 3])])
    theirs = openvino.convert_model(module, example_input=(left, right), input=[
        openvino.PartialShape([-1, 6]), openvino.PartialShape([openvino.Dimension(1, 8), 3])])
    assert _shapes(ours) == _shapes(theirs) == ["[?,6]", "[1..8,3]"]
    reversed_dict = {"right": right, "left": left}
    ours = ov.convert_model(module, example_input=reversed_dict)
    theirs = openvino.convert_model(module, example_input=dict(reversed_dict))
    assert (_names(ours), _shapes(ours)) == (_names(theirs), _shapes(theirs))
    assert (_names(ours), _shapes(ours)) == (["left", "right"], ["[?,?]", "[?,?]"])


def test_default_shapes_match_openvino() -> None:
    openvino = pytest.importorskip("openvino")
    cases = [(_eval(CNN()), torch.from_numpy(_data(2, 3, 8, 8))),
             (_eval(torch.nn.Embedding(10, 4)), torch.tensor([[1, 2, 3]]))]
    for module, x in cases:
        ours = ov.convert_model(module, example_input=x)
        theirs = openvino.convert_model(module, example_input=x)
        assert (_names(ours), _shapes(ours)) == (_names(theirs), _shapes(theirs))
        assert [str(p.get_element_type()) for p in ours.inputs] == \
            [str(ov.Type(p.get_element_type().to_dtype())) for p in theirs.inputs]


# --- save and read back --------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".onnx", ".xml"])
def test_save_model_and_read_back(tmp_path: Path, suffix: str) -> None:
    if suffix == ".xml":
        pytest.importorskip("openvino")
    module = _eval(CNN())
    x = _data(2, 3, 8, 8)
    path = tmp_path / f"m{suffix}"
    ov.save_model(ov.convert_model(module, example_input=torch.from_numpy(x)), path)
    read = ov.Core().read_model(path)
    assert _names(read) == ["image"]
    assert _shapes(read) == ["[?,3,?,?]"]
    other = _data(3, 3, 5, 5)
    _close(_run(read, other), _torch_outputs(module, other), 1e-3)  # weights saved as float16


# --- errors and options --------------------------------------------------------------------------


def test_errors_name_what_is_wrong() -> None:
    module = _eval(TwoInputs())
    example = (_data(2, 6), _data(2, 3))
    with pytest.raises(InputError, match=r"needs example_input.*input="):
        ov.convert_model(module)
    with pytest.raises(InputError, match=r"output=.*not supported for PyTorch"):
        ov.convert_model(module, example_input=example, output="x")
    with pytest.raises(InputError, match=r"extension='my_ops.so' is not supported"):
        ov.convert_model(module, example_input=example, extension="my_ops.so")
    with pytest.raises(InputError, match=r"dynamo"):
        ov.convert_model(module, example_input=example, dynamo=True)
    with pytest.raises(ModelError, match=r"exporting the TwoInputs to ONNX failed.*right"):
        ov.convert_model(module, example_input=example[:1])
    with pytest.raises(InputError, match=r"'middle'.*left, right"):
        ov.convert_model(module, example_input=example, input={"middle": [2, 6]})
    with pytest.raises(InputError, match=r"rank 2"):
        ov.convert_model(module, example_input=example, input=[[2, 6, 1], [2, 3]])
    with pytest.raises(InputError, match=r"no shape"):
        ov.convert_model(module, input=[ov.Type.f32, ov.Type.f32])
    assert _names(ov.convert_model(module, example_input=example, extension=None, dynamo=False,
                                   verbose=True, share_weights=False)) == ["left", "right"]


def _two_outputs() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Sigmoid", ["x"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_output_selects_outputs() -> None:
    x = _data(2, 4)
    model = ov.convert_model(_two_outputs(), output="z")
    assert [p.get_any_name() for p in model.outputs] == ["z"]
    assert [op.get_type_name() for op in model.get_ordered_ops()].count("Relu") == 0
    np.testing.assert_allclose(_run(model, x)[0], 1 / (1 + np.exp(-x)), rtol=1e-5)
    both = ov.convert_model(_two_outputs(), output=["z", "y"])
    assert [p.get_any_name() for p in both.outputs] == ["y", "z"]  # the model's order, as OpenVINO's
    with pytest.raises(InputError, match=r"'w', not an output.*'y', 'z'"):
        ov.convert_model(_two_outputs(), output=["w"])


def test_inferplex_imports_and_converts_onnx_without_torch() -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "import onnx, inferplex as ov\n"
            "from onnx import helper, TensorProto\n"
            "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g', "
            "[helper.make_tensor_value_info('x', TensorProto.FLOAT, [2])], "
            "[helper.make_tensor_value_info('y', TensorProto.FLOAT, [2])])\n"
            "m = ov.convert_model(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]))\n"
            "print(m.output().get_any_name(), 'torch' in sys.modules and sys.modules['torch'] is not None)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["y", "False"]
