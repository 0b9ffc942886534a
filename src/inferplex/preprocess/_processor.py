"""``PrePostProcessor``: records steps per input/output and adds them to the graph at ``build()``."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from inferplex._model import Model
from inferplex._ports import find_port
from inferplex.api import layout_helpers
from inferplex.api.layout import Layout
from inferplex.errors import InputError, ModelError
from inferplex.preprocess._build import emit, emit_planes, input_planes, new_input, plan_input, plan_output
from inferplex.preprocess._dump import dump
from inferplex.preprocess._info import InputInfo, OutputInfo
from inferplex.preprocess._ops import Emitter, PlannedOp, ir_shape
from inferplex.preprocess._opset import raise_opset

__all__ = ["PrePostProcessor"]

MEMORY_TYPE_KEY = "memory_type_0"
"""OpenVINO's rt_info key of a preprocessed input's memory type (``set_memory_type``)."""


class PrePostProcessor:
    """OpenVINO's ``PrePostProcessor`` over an ONNX model.

    ``build()`` adds the recorded steps to ``model``'s ONNX graph as ONNX ops
    (Cast, Transpose, Resize, Sub, Div, Slice, Pad, Concat), so every device runs them; as
    in OpenVINO it changes ``model`` in place and returns it.  The new inputs
    and outputs keep their names, and carry the tensor's layout; a multi-plane NV12 or I420
    input becomes one input per plane, in its place, named ``<name>/<plane>``.

        >>> ppp = PrePostProcessor(model)                          # doctest: +SKIP
        >>> ppp.input().tensor().set_element_type(Type.u8).set_layout(Layout("NHWC"))
        >>> ppp.input().model().set_layout(Layout("NCHW"))
        >>> model = ppp.build()
    """

    def __init__(self, model: Model) -> None:
        if not isinstance(model, Model):
            raise InputError(f"PrePostProcessor takes an inferplex Model (core.read_model(...)), "
                             f"got {type(model).__name__}")
        self._model = model
        self._inputs: dict[int, InputInfo] = {}
        self._outputs: dict[int, OutputInfo] = {}

    def input(self, key: int | str | None = None, *, tensor_name: str | None = None,
              input_index: int | None = None) -> InputInfo:
        """The records of one input, by index or name (``tensor_name=``, ``input_index=`` as in
        OpenVINO); no key for a one-input model."""
        key = self._key(key, tensor_name, input_index, "input")
        index = self._index(key, self._model.inputs, "input")
        return self._inputs.setdefault(index, InputInfo(index))

    def output(self, key: int | str | None = None, *, tensor_name: str | None = None,
               output_index: int | None = None) -> OutputInfo:
        """The records of one output, by index or name (``tensor_name=``, ``output_index=`` as in
        OpenVINO); no key for a one-output model."""
        key = self._key(key, tensor_name, output_index, "output")
        index = self._index(key, self._model.outputs, "output")
        return self._outputs.setdefault(index, OutputInfo(index))

    @staticmethod
    def _key(key: Any, tensor_name: Any, index: Any, kind: str) -> Any:
        given = [k for k in (key, tensor_name, index) if k is not None]
        if len(given) > 1:
            raise InputError(f"{kind}() takes one of a tensor name (tensor_name=) or an index "
                             f"({kind}_index=), got {len(given)}")
        if tensor_name is not None and not isinstance(tensor_name, str):
            raise InputError(f"{kind}(tensor_name=...) takes a string, got {type(tensor_name).__name__}")
        if index is not None and (isinstance(index, (bool, str)) or not hasattr(index, "__index__")):
            raise InputError(f"{kind}({kind}_index=...) takes an integer, got {type(index).__name__}")
        return given[0] if given else None

    @staticmethod
    def _index(key: Any, ports: list[Any], kind: str) -> int:
        return find_port(ports, key, kind).index

    def build(self) -> Model:
        """Add the steps to the model's graph; returns the (same) model.

        A model whose ONNX opset is older than the steps' ops need (Resize: 11)
        is converted to that opset first (:mod:`inferplex.preprocess._opset`);
        ports taken from it before then no longer follow it.
        """
        needed = max((op.min_opset for index, info in self._inputs.items()
                      for op in plan_input(info, self._model.inputs[index])[0].ops), default=1)
        if needed > self._model.ir.graph.opset_imports.get("", 1):
            self._model.ir = raise_opset(self._model.ir, needed)
        graph = self._model.ir.graph
        opset = graph.opset_imports.get("", 1)
        for index, input_info in sorted(self._inputs.items(), reverse=True):  # planes add inputs
            self._build_input(graph, index, input_info, opset)
        for index, output_info in sorted(self._outputs.items()):
            self._build_output(graph, index, output_info, opset)
        return self._model

    def _build_input(self, graph: ir.Graph, index: int, info: InputInfo, opset: int) -> None:
        port = self._model.inputs[index]
        track, shape, element, layout = plan_input(info, port)
        name = port.any_name
        old = graph.inputs[index]
        out = Emitter(f"{name}/preprocess", opset)
        planes = [new_input(plane, element, plane_shape)
                  for plane, plane_shape in input_planes(name, info.tensor().facts, shape)]
        final, final_type, final_shape = emit_planes(out, track.ops, planes, element, shape)
        if final_type != port.get_element_type():  # a custom step's function changed the type
            final = PlannedOp("cast", (port.get_element_type(),)).emit(out, final, final_type, final_shape)
        if not final_shape.compatible(port.get_partial_shape()):
            raise ModelError(f"input {name!r}: after preprocessing the tensor has shape "
                             f"{final_shape}, but the model takes {port.get_partial_shape()}; "
                             "check the tensor's shape and layout, and the resize/crop/pad steps")
        memory = info.tensor().facts.memory_type
        if not track.ops:  # no ops: the input only takes the tensor's (narrower) shape
            old.shape = ir_shape(shape) if shape.refines(port.get_partial_shape()) else old.shape
            return self._store_tensor_facts(index, layout, memory)
        old.name = f"{name}/model_input"
        old.replace_all_uses_with(final, replace_graph_outputs=True)
        for initializer in out.initializers:
            graph.register_initializer(initializer)
        if graph.num_nodes():
            graph.insert_before(graph.node(0), out.nodes)
        else:
            graph.extend(out.nodes)
        graph.inputs[index] = planes[0]
        for offset, plane in enumerate(planes[1:], 1):
            graph.inputs.insert(index + offset, plane)
        for offset in range(len(planes)):
            self._store_tensor_facts(index + offset, layout, memory)
        return None

    def _store_tensor_facts(self, index: int, layout: Layout, memory_type: str | None) -> None:
        """The built input's layout and, from ``set_memory_type``, its memory type in its rt_info
        (under OpenVINO's key)."""
        if not layout.empty:
            layout_helpers.set_layout(self._model.inputs[index], layout)
        if memory_type is not None:
            self._model.inputs[index].get_rt_info()[MEMORY_TYPE_KEY] = memory_type

    def _build_output(self, graph: ir.Graph, index: int, info: OutputInfo, opset: int) -> None:
        port = self._model.outputs[index]
        track = plan_output(info, port)
        if track.ops:
            old = graph.outputs[index]
            name = port.any_name
            out = Emitter(f"{name}/postprocess", opset)
            final, _, _ = emit(out, track.ops, old, port.get_element_type(),
                               port.get_partial_shape())
            old.name = f"{name}/model_output"
            final.name = name
            for initializer in out.initializers:
                graph.register_initializer(initializer)
            graph.extend(out.nodes)
            graph.outputs[index] = final
        layout = info.tensor().facts.layout or track.layout
        if not layout.empty:
            layout_helpers.set_layout(self._model.outputs[index], layout)

    def __str__(self) -> str:
        """The steps of each input and output, as OpenVINO prints them (``print(ppp)``)."""
        return dump(self._model, self._inputs, self._outputs)

    def __repr__(self) -> str:
        return (f"<PrePostProcessor {self._model.get_friendly_name()!r} "
                f"inputs={sorted(self._inputs)} outputs={sorted(self._outputs)}>")

