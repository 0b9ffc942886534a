"""Which nodes ONNX Runtime's CPU execution provider runs: its registered kernels, by op, version and type.

ONNX Runtime lists every kernel it registered (op, domain, opset range, type
constraints); a node is supported when a kernel of its op covers the model's
opset and the node's input types, or when ONNX defines the op as a function
that ONNX Runtime inlines.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import onnx
import onnx_ir as ir

from inferplex.devices.cpu.profile import ORT_PROVIDER

__all__ = ["ort_supported_nodes"]

_Kernels = dict[tuple[str, str], list[tuple[int, int, dict[str, list[str]]]]]


def ort_supported_nodes(model: ir.Model) -> set[str]:
    """Names of the main-graph nodes of ``model`` that ONNX Runtime's CPU provider runs."""
    opsets = dict(model.opset_imports)
    return {node.name for node in model.graph if _runs_on_ort(node, opsets)}  # type: ignore[misc]


@lru_cache(maxsize=1)
def _kernel_table() -> _Kernels:
    """(domain, op) -> [(first version, last version, type constraints)] of ORT's CPU kernels."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

    table: _Kernels = {}
    for kernel in ort_c.get_all_opkernel_def():
        if kernel.provider != ORT_PROVIDER:
            continue
        low, high = kernel.version_range
        domain = "" if kernel.domain == "ai.onnx" else kernel.domain
        table.setdefault((domain, kernel.op_name), []).append((low, high, dict(kernel.type_constraints)))
    return table


def _runs_on_ort(node: ir.Node, opsets: Mapping[str, int]) -> bool:
    domain = "" if node.domain == "ai.onnx" else node.domain
    version = opsets.get(domain, opsets.get("ai.onnx", 1) if domain == "" else 1)
    if domain == "" and node.op_type == "Constant":
        return True  # ONNX Runtime turns Constant nodes into initializers: no kernel needed
    kernels = [k for k in _kernel_table().get((domain, node.op_type), []) if k[0] <= version <= k[1]]
    if not kernels:
        return _expands_to_function(domain, node.op_type, version)
    schema = _schema(domain, node.op_type, version)
    if schema is None:
        return True
    return any(_types_match(node, schema, constraints) for _, _, constraints in kernels)


def _schema(domain: str, op_type: str, version: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        return None


def _expands_to_function(domain: str, op_type: str, version: int) -> bool:
    """ORT inlines ops that ONNX defines as functions when it has no kernel for them."""
    schema = _schema(domain, op_type, version)
    return schema is not None and bool(getattr(schema, "has_function", False)
                                       or getattr(schema, "has_context_dependent_function", False))


def _types_match(node: ir.Node, schema: onnx.defs.OpSchema,
                 constraints: Mapping[str, list[str]]) -> bool:
    formals = list(schema.inputs)
    for index, value in enumerate(node.inputs):
        if value is None or value.dtype is None or not formals:
            continue
        formal = formals[min(index, len(formals) - 1)]
        allowed = constraints.get(formal.type_str)
        if allowed is None:
            continue
        if _type_string(value.dtype) not in allowed:
            return False
    return True


def _type_string(dtype: ir.DataType) -> str:
    name = onnx.helper.tensor_dtype_to_string(int(dtype)).removeprefix("TensorProto.").lower()
    names = {"float": "float", "float16": "float16", "double": "double", "bool": "bool"}
    return f"tensor({names.get(name, name)})"
