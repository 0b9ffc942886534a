"""OpenVINO's keyword names for parameters inferplex names otherwise.

OpenVINO's Python API comes from pybind11 overloads, each with its own parameter names:
``request.get_tensor(name=...)`` and ``get_tensor(port=...)``, ``Dimension(min_dimension=1,
max_dimension=4)``, ``model.reshape(partial_shapes={...})``.  inferplex's methods take one
parameter for what those overloads share; these decorators let calls that name OpenVINO's
keywords reach it.  A call without keywords goes straight through.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from inferplex.errors import InputTypeError

__all__ = ["keyword_aliases", "keywords_in_order"]

F = TypeVar("F", bound=Callable[..., Any])


def keyword_aliases(**aliases: str) -> Callable[[F], F]:
    """Accept each keyword ``alias=`` as the parameter it names (``name="key", port="key"``)."""
    def wrap(function: F) -> F:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                for alias in [key for key in kwargs if key in aliases]:
                    target = aliases[alias]
                    if target in kwargs:
                        raise InputTypeError(f"{function.__name__}() got {alias}= and {target}=, which name "
                                             "the same argument: give one")
                    kwargs[target] = kwargs.pop(alias)
            return function(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap


def keywords_in_order(*orders: tuple[str, ...]) -> Callable[[F], F]:
    """For a method taking ``*args``: keywords given as one of OpenVINO's overloads names them
    (``("index", "tensor")``, ``("tensor",)``) are passed in that overload's order."""
    def wrap(function: F) -> F:
        @functools.wraps(function)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs:
                return function(self, *args)
            for order in orders:
                if set(kwargs) == set(order[len(args):]) and len(args) < len(order):
                    return function(self, *args, *(kwargs[key] for key in order[len(args):]))
            forms = " or ".join(f"({', '.join(order)})" for order in orders)
            raise InputTypeError(f"{function.__name__}() got unexpected keywords {sorted(kwargs)}; "
                                 f"accepted: {forms}")

        return call  # type: ignore[return-value]

    return wrap
