"""Reading a model: how long ``read_model`` takes, and how long it keeps other Python threads out.

Every compile starts with ``read_model``, and AUTO's and MULTI's devices compile
only after it: time it holds the GIL delays them all.  For each model, in one
process, rounds alternate between:

- ``inferplex``: ``core.read_model(path)`` (the checker gets the model without
  its large weights, see ``inferplex/_model_check.py``);
- ``whole model to the checker``: the same, with the checker given the whole
  model, as before (``onnx.checker.check_model`` serializes it);
- ``onnx.load + check_model``: the peer, what a program checking a model with
  the onnx package does;
- ``onnx.load``: parsing the file alone, the floor.

A Python thread beside each wakes every millisecond; "kept out" is how long its
wake-ups were late by more than 5 ms in all.  Models: stacks of 12 and 24
feed-forward layers of BERT-base's sizes (226 and 453 MB of f32 weights in the
file), written to a temporary folder.

    python bench/read_model.py [--rounds 3]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import onnx
from cpu_compile import stacks_main

import inferplex as ov
from inferplex import _model_check as model_check


def _load_and_check(path: Path) -> Any:
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    return proto


def _whole_model_to_the_checker(core: ov.Core, path: Path) -> Any:
    with mock.patch.object(model_check, "checker_copy", lambda proto: proto):
        return core.read_model(path)


def runners(path: Path) -> dict[str, Callable[[], Any]]:
    core = ov.Core()
    return {
        "inferplex": lambda: core.read_model(path),
        "whole model to the checker": lambda: _whole_model_to_the_checker(core, path),
        "onnx.load + check_model": lambda: _load_and_check(path),
        "onnx.load": lambda: onnx.load(str(path)),
    }


def main(argv: list[str] | None = None) -> int:
    return stacks_main(__doc__.splitlines()[0], runners, (12, 24), "read_model",
                       before="whole model to the checker", peer="onnx.load", argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
