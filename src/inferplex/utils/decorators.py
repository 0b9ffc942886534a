"""``openvino.utils.decorators``' decorator for custom preprocessing functions."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["custom_preprocess_function"]


def custom_preprocess_function(custom_function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A ``custom`` preprocessing step's function that returns a node, made to return that node's
    output (as ``PrePostProcessor``'s ``custom`` steps take it)."""

    @functools.wraps(custom_function)
    def wrapper(output: Any) -> Any:
        returned = custom_function(output)
        return returned.output(0) if callable(getattr(returned, "output", None)) else returned

    return wrapper
