"""Every error inferplex raises, in one tree.

::

    InferplexError                    base of everything below
    ├── ModelError                    unreadable, malformed or unsafe model file  (ValueError)
    ├── DeviceNameError               malformed or unknown device string          (ValueError)
    ├── DeviceError                   a device or cluster cannot be reached (names the address)
    ├── PropertyError                 unknown property key or bad value           (ValueError)
    │   └── PropertyTypeError         a typed property given a value of the wrong Python type (TypeError)
    ├── InputError                    wrong input name, rank, shape, dtype, ...   (ValueError)
    │   └── InputTypeError            an argument of a Python type the call does not take (TypeError)
    ├── UnsupportedOpError            ops that no requested device can run
    ├── AffinityError                 manual affinities missing or naming unknown devices
    ├── CompileError                  a device failed to compile the model (all reasons listed)
    ├── MemoryPlanError               the model does not fit the devices' memory
    ├── InferenceError                a request failed on every device it was tried on
    ├── RequestBusyError              an InferRequest was started while still running
    └── PluginError                   a device plugin broke the plugin contract

Every one is a ``RuntimeError``, as every error OpenVINO's runtime raises is, so
programs written for OpenVINO (``except RuntimeError``) catch them unchanged.
Messages say what was wrong, what is accepted, and how to fix it.  Errors from
the engines underneath (ONNX Runtime, torch) are chained with ``raise ... from``.
"""

from __future__ import annotations

__all__ = [
    "AffinityError",
    "CompileError",
    "DeviceError",
    "DeviceNameError",
    "InferenceError",
    "InferplexError",
    "InputError",
    "InputIndexError",
    "InputTypeError",
    "MemoryPlanError",
    "ModelError",
    "PluginError",
    "PropertyError",
    "PropertyTypeError",
    "RequestBusyError",
    "UnsupportedOpError",
]


class InferplexError(RuntimeError):
    """Base class of every error raised by inferplex (a RuntimeError, as OpenVINO's errors are)."""


class ModelError(InferplexError, ValueError):
    """The model could not be read: missing file, malformed ONNX, unsafe external data."""


class DeviceNameError(InferplexError, ValueError):
    """A device string is malformed or names a device that is not available."""


class DeviceError(InferplexError):
    """A device, or the cluster that holds it, cannot be reached (the message names the address)."""


class PropertyError(InferplexError, ValueError):
    """A property key is unknown for the target, or its value is not accepted."""


class PropertyTypeError(PropertyError, TypeError):
    """A typed property key (``props.cache_dir(6)``) was called with a value of a Python type it does
    not take; a TypeError, as OpenVINO's typed properties raise."""


class InputError(InferplexError, ValueError):
    """Inference inputs do not match the model: name, index, rank, shape or dtype."""


class InputTypeError(InputError, TypeError):
    """An argument's Python type is not one the call takes (a dict key of the wrong type, inputs
    that are not arrays, a model that is not a path or bytes); a TypeError, as OpenVINO raises."""


class InputIndexError(InputError, IndexError):
    """A port index is out of range (``model.input(5)`` on a one-input model); an IndexError, as
    OpenVINO raises."""


class UnsupportedOpError(InferplexError):
    """Operations that none of the requested devices can run (each listed by type and name)."""


class AffinityError(InferplexError):
    """Manual affinities are incomplete or name devices outside the device list."""


class CompileError(InferplexError):
    """A device could not compile the model; with several devices, every reason is listed."""


class MemoryPlanError(InferplexError):
    """The model (or a pipeline stage) needs more memory than the devices offer."""


class InferenceError(InferplexError):
    """A request failed; with fallback, the failure on every device tried is listed."""


class RequestBusyError(InferplexError):
    """An InferRequest was started or read while a previous run of it is still going."""


class PluginError(InferplexError):
    """A device plugin broke the plugin contract (the message names the plugin and the rule)."""
