"""The names programs take from ``openvino._pyopenvino`` (OpenVINO's compiled module, which its
public modules re-export): the same classes as this package's, for imports and type annotations
written against that module (``from openvino._pyopenvino import DescriptorTensor``,
``-> openvino._pyopenvino.Model``)."""

from __future__ import annotations

from inferplex import (
    AsyncInferQueue,
    CompiledModel,
    ConstOutput,
    Core,
    Dimension,
    InferRequest,
    Layout,
    Model,
    Node,
    Output,
    PartialShape,
    Shape,
    Tensor,
    Type,
)
from inferplex.api.descriptor import DescriptorTensor

__all__ = ["AsyncInferQueue", "CompiledModel", "ConstOutput", "Core", "DescriptorTensor", "Dimension",
           "InferRequest", "Layout", "Model", "Node", "Output", "PartialShape", "Shape", "Tensor", "Type"]
