"""OpenVINO's ``op.util`` module: the variables of stateful models (see :mod:`inferplex.state`)."""

from __future__ import annotations

from inferplex.state.variables import Variable, VariableInfo

__all__ = ["Variable", "VariableInfo"]
