"""OpenVINO's ``openvino.exceptions`` names for inferplex's errors (:mod:`inferplex.errors`):
``except UserInputError`` in an OpenVINO program catches what inferplex raises for bad input."""

from __future__ import annotations

from inferplex.errors import InferplexError, InputError, InputTypeError

__all__ = ["OVError", "OVTypeError", "UserInputError"]

OVError = InferplexError
"""Base of every error inferplex raises."""
OVTypeError = InputTypeError
"""An argument of a Python type the call does not take."""
UserInputError = InputError
"""A wrong input: name, rank, shape, element type or value."""
