"""The tensor half of InferRequest's API, under OpenVINO's names (``get_tensor``, ``set_input_tensor``, ...).

:class:`TensorAccess` turns the keys OpenVINO's methods take (a name, a port,
an input index, or none for the only port) into ports, and hands each call to
the request's :class:`~inferplex._request_tensors.RequestTensors`, which holds
the tensors, binds a run's inputs and receives its outputs: naming tensors is kept
apart from holding them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from inferplex._ports import Port, find_port, port_named
from inferplex._request_tensors import RequestTensors
from inferplex.api.keywords import keyword_aliases, keywords_in_order
from inferplex.errors import InputError, InputTypeError

__all__ = ["TensorAccess"]


class TensorAccess:
    """The tensor half of :class:`~inferplex._infer_request.InferRequest`'s API (OpenVINO's names).

    Keys: an input or output name, a port (``compiled.inputs[0]``,
    ``model.outputs[1]``), or an int, which counts inputs (as int keys of
    ``infer``'s dict do).  Tensors are ``ov.Tensor`` objects sharing the
    request's memory.
    """

    _tensors: RequestTensors

    @property
    def model_inputs(self) -> list[Port]:
        return list(self._tensors.inputs)

    @property
    def model_outputs(self) -> list[Port]:
        return list(self._tensors.outputs)

    def _check_idle(self) -> None:
        """Raise RequestBusyError while the request runs (the class running requests defines it)."""

    def _port(self, key: Any) -> Port:
        """The input or output ``key`` names (see the class docstring)."""
        inputs, outputs = self._tensors.inputs, self._tensors.outputs
        if isinstance(key, Port) and key.kind == "output":
            return find_port(outputs, key, "output")
        if isinstance(key, Port) or (isinstance(key, (int, np.integer)) and not isinstance(key, bool)):
            return find_port(inputs, key, "input")
        if not isinstance(key, str):
            raise InputError(f"a tensor is named by a name, a port or an input index, "
                             f"not {type(key).__name__}")
        for port in (*inputs, *outputs):
            if port.any_name == key:
                return port
        named = port_named((*inputs, *outputs), key)  # another of the tensor's names
        if named is not None:
            return named
        raise InputError(f"Port for tensor name {key} was not found: no input or output is named "
                         f"{key!r}; inputs: {', '.join(p.any_name for p in inputs)}; outputs: "
                         f"{', '.join(p.any_name for p in outputs)}")  # OpenVINO's words first

    @keyword_aliases(name="key", port="key")
    def get_tensor(self, key: Any) -> Any:
        """The tensor of an input or output (by name, port or input index)."""
        port = self._port(key)
        if port.kind == "output":
            return self._tensors.output_tensor(port)
        return self._tensors.input_tensor(port)

    @keyword_aliases(name="key", port="key")
    def set_tensor(self, key: Any, tensor: Any) -> None:
        """Set the tensor of an input (read by later runs) or an output (written by them)."""
        self._check_idle()
        port = self._port(key)
        if port.kind == "output":
            self._tensors.set_output(port, tensor)
        else:
            self._tensors.set_input(port, tensor)

    @keywords_in_order(("inputs",), ("tensor_name", "tensors"), ("port", "tensors"))
    def set_tensors(self, *args: Any) -> None:
        """``set_tensors({key: tensor, ...})``, or ``set_tensors(key, [tensor, ...])`` for a batch."""
        if len(args) == 2:
            self.set_tensor(args[0], list(args[1]))
            return
        if len(args) != 1:
            raise InputTypeError(f"set_tensors takes ({{key: tensor}}) or (key, [tensors]), got {len(args)} "
                                 "arguments")
        for key, tensor in dict(args[0]).items():
            self.set_tensor(key, tensor)

    @keyword_aliases(idx="index")
    def get_input_tensor(self, index: int | None = None) -> Any:
        """The tensor of input ``index`` (no index: the only input)."""
        return self.get_tensor(self._indexed_port(index, self._tensors.inputs, "input"))

    @keyword_aliases(idx="index")
    def get_output_tensor(self, index: int | None = None) -> Any:
        """The tensor of output ``index`` (no index: the only output)."""
        return self.get_tensor(self._indexed_port(index, self._tensors.outputs, "output"))

    @keywords_in_order(("index", "tensor"), ("tensor",))
    def set_input_tensor(self, *args: Any) -> None:
        """``set_input_tensor(tensor)`` for one-input models, or ``(index, tensor)``."""
        index, tensor = (None, args[0]) if len(args) == 1 else (args[0], args[1])
        self.set_tensor(self._indexed_port(index, self._tensors.inputs, "input"), tensor)

    @keywords_in_order(("index", "tensor"), ("tensor",))
    def set_output_tensor(self, *args: Any) -> None:
        """``set_output_tensor(tensor)`` for one-output models, or ``(index, tensor)``."""
        index, tensor = (None, args[0]) if len(args) == 1 else (args[0], args[1])
        outputs = self._tensors.outputs
        self.set_tensor(self._indexed_port(index, outputs, "output"), tensor)

    @keywords_in_order(("inputs",), ("tensors",), ("idx", "tensors"))
    def set_input_tensors(self, *args: Any) -> None:
        """``{input key: tensor}``; or (OpenVINO's batch form) batch-1 tensors for the only input,
        or ``(index, tensors)`` for input ``index``."""
        if len(args) == 2:
            self.set_tensor(self._indexed_port(args[0], self._tensors.inputs, "input"), list(args[1]))
            return
        if len(args) != 1:
            raise InputTypeError(f"set_input_tensors takes ({{input: tensor}}), ([tensors]) or (index, "
                                 f"[tensors]), got {len(args)} arguments")
        tensors = args[0]
        if isinstance(tensors, Mapping):
            for key, tensor in tensors.items():
                port = self._indexed_port(key, self._tensors.inputs, "input") if isinstance(key, int) else key
                self.set_tensor(port, tensor)
            return
        self.set_tensor(self._indexed_port(None, self._tensors.inputs, "input"), list(tensors))

    @keyword_aliases(outputs="tensors")
    def set_output_tensors(self, tensors: Mapping[Any, Any]) -> None:
        """``{output index | name | port: tensor}``."""
        outputs = self._tensors.outputs
        for key, tensor in tensors.items():
            port = self._indexed_port(key, outputs, "output") if isinstance(key, int) else key
            self.set_tensor(port, tensor)

    @property
    def input_tensors(self) -> list[Any]:
        return [self._tensors.input_tensor(p) for p in self._tensors.inputs]

    @property
    def output_tensors(self) -> list[Any]:
        return [self._tensors.output_tensor(p) for p in self._tensors.outputs]

    @staticmethod
    def _indexed_port(index: Any, ports: Sequence[Port], kind: str) -> Port:
        """OpenVINO's ``get_input_tensor(i)`` and kin: an index, or none for the only port."""
        if index is not None and (not isinstance(index, (int, np.integer)) or isinstance(index, bool)):
            raise InputError(f"an {kind} index must be an int, not {type(index).__name__}")
        return find_port(ports, index, kind)
