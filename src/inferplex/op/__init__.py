"""OpenVINO's ``op`` module: ``op.Parameter(element_type, shape)``, ``op.Constant(...)``, ``op.Result``."""

from __future__ import annotations

from inferplex.api.nodes import Constant, Parameter, Result

__all__ = ["Constant", "Parameter", "Result"]
