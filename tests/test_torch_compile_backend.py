"""``torch.compile(module, backend="openvino")`` once ``inferplex.torch`` is imported.

Results are checked against the module run by torch itself (eager, no grad); a graph inferplex
compiled gives numbers within float32 rounding of eager's (CPU at f32), where a graph that fell
back to eager gives eager's exactly and warns.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import inferplex.torch  # noqa: E402, F401 - registers the backend

F32 = {"config": {"INFERENCE_PRECISION_HINT": "f32"}}


def _fell_back(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "runs in torch eager" in str(w.message)]


def _cnn() -> Any:
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 10)).eval()


def test_a_cnn_compiles_and_matches_eager_at_each_batch_size() -> None:
    module = _cnn()
    compiled = torch.compile(module, backend="openvino", options=F32)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for batch in (2, 4, 5):  # a new size makes Dynamo's sizes dynamic: compiled per signature
            x = torch.randn(batch, 3, 16, 16)
            result, expected = compiled(x), module(x)
            assert result.shape == expected.shape
            torch.testing.assert_close(result, expected, rtol=1e-5, atol=1e-5)
    assert _fell_back(caught) == []


def test_structured_outputs_and_several_inputs_keep_their_form() -> None:
    class Heads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x: Any, y: Any) -> Any:
            return {"sum": self.linear(x) + y, "parts": (x * 2, y.relu())}

    torch.manual_seed(1)
    module = Heads().eval()
    compiled = torch.compile(module, backend="inferplex", options=F32)
    x, y = torch.randn(2, 4), torch.randn(2, 3)
    with torch.no_grad():
        result, expected = compiled(x, y), module(x, y)
    assert set(result) == {"sum", "parts"} and isinstance(result["parts"], tuple)
    torch.testing.assert_close(result["sum"], expected["sum"], rtol=1e-5, atol=1e-6)
    for got, want in zip(result["parts"], expected["parts"], strict=True):
        torch.testing.assert_close(got, want)


def test_a_graph_onnx_cannot_express_runs_in_eager_and_warns() -> None:
    class Spectrum(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.view_as_real(torch.fft.fft(x))

    compiled = torch.compile(Spectrum(), backend="openvino")
    x = torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = compiled(x)
    assert torch.equal(result, Spectrum()(x))
    assert any("fft" in message for message in _fell_back(caught))


def test_inputs_that_need_gradients_keep_autograd() -> None:
    module = torch.nn.Linear(4, 2)
    compiled = torch.compile(module, backend="openvino")
    x = torch.randn(3, 4, requires_grad=True)
    compiled(x).sum().backward()
    assert x.grad is not None and torch.allclose(x.grad, module.weight.sum(0).expand(3, 4))


def test_unknown_options_are_refused_by_name() -> None:
    compiled = torch.compile(torch.nn.ReLU(), backend="openvino", options={"devices": "CPU"})
    with pytest.raises(Exception, match=r"PropertyError.*'devices'.*accepted: device"):
        compiled(torch.randn(2))  # torch wraps the backend's error in its BackendCompilerFailed


def test_a_device_or_property_that_does_not_exist_is_an_error_not_eager() -> None:
    for options, named in (({"device": "NPU"}, "NPU"), ({"config": {"NO_SUCH_KEY": 1}}, "NO_SUCH_KEY")):
        compiled = torch.compile(torch.nn.Linear(3, 2).eval(), backend="openvino", options=options)
        with pytest.raises(Exception, match=named), torch.no_grad():
            compiled(torch.randn(2, 3))
