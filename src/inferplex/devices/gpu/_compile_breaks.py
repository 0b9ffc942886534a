"""torch.compile of a lowered forward as one graph, and what is done where that cannot be.

A lowered forward is an fx graph whose nodes call the lowering's functions (most
of them closures made per ONNX node, sharing one code object per op type).
:func:`compile_forward` compiles it with ``fullgraph=True`` first: without a graph
break that is the one and only compile.  Where dynamo meets a break (a
data-dependent branch, an op it cannot trace), a warning names it and the forward
is compiled with its breaks, but not as dynamo would do it alone: a break inside
a called function makes that function a frame of its own, which dynamo compiles
per call site (its closures differ) and per shape, each call site evicting the
others' entries, until its recompile limit sends it to eager with graph breaks
between every piece.  So the functions a break lands in are found first (one
trace with a recording backend, no inductor) and run outside dynamo
(``torch._dynamo.disable``) in a copy of the module that shares its weights: the
graph breaks once around each such call, and the rest compiles once.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

__all__ = ["compile_forward"]

_log = logging.getLogger("inferplex")

RunOnce = Callable[[Any], Any]
"""Runs a compiled forward once on the example inputs (torch.compile compiles then) and returns it."""


def compile_forward(module: torch.fx.GraphModule, mode: str, run_once: RunOnce, device: str) -> Any:
    """``module`` compiled by ``torch.compile`` (static shapes, ``mode``) and run once through
    ``run_once``: as one graph where it can be, else as the module docstring says."""
    try:
        return run_once(torch.compile(module, mode=mode, dynamic=False, fullgraph=True))
    except _graph_break_errors() as error:
        _log.warning("inferplex: %s: the lowered forward does not compile as one graph, compiling it "
                     "with graph breaks (the functions they fall in run outside torch.compile): %s",
                     device, _break_reason(error))
    try:
        broken = _breaking_functions(module, run_once)
    except Exception as error:  # noqa: BLE001 - the compile below goes on without the probe's answer
        _log.info("inferplex: %s: finding the graph breaks failed: %s: %s", device, type(error).__name__,
                  error)
        broken = set()
    if broken:
        _log.info("inferplex: %s: run outside torch.compile, for their graph breaks: %s", device,
                  ", ".join(sorted(f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
                                   for code in broken)))
    # a copy in any case: the failed one-graph trace leaves no state on its code to meet again
    return run_once(torch.compile(_running_outside_dynamo(module, broken), mode=mode, dynamic=False))


def _graph_break_errors() -> tuple[type[BaseException], ...]:
    """What ``torch.compile(fullgraph=True)`` raises where the traced code has a graph break."""
    from torch._dynamo import exc

    return exc.Unsupported, exc.UserError


def _break_reason(error: BaseException) -> str:
    """The break's reason in one line, and where in the lowering's code dynamo met it."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith("Explanation:")), lines[0] if lines else "")
    stack = getattr(error, "real_stack", None) or []
    where = f" (at {stack[-1].name}, {stack[-1].filename}:{stack[-1].lineno})" if stack else ""
    return f"{type(error).__name__}: {reason}{where}"


def _targets(module: torch.fx.GraphModule) -> dict[tuple[str, str], list[Any]]:
    """The code objects of the module's called functions, by file and name (several functions of
    one file may share a name: each lowering's ``run``)."""
    found: dict[tuple[str, str], list[Any]] = {}
    for node in module.graph.nodes:
        code = getattr(node.target, "__code__", None) if node.op == "call_function" else None
        if code is not None and code not in found.setdefault((code.co_filename, code.co_name), []):
            found[(code.co_filename, code.co_name)].append(code)
    return found


def _code_at(targets: dict[tuple[str, str], list[Any]], frame: Any) -> Any:
    """The called function's code that ``frame`` (a stack entry) runs in, or None."""
    for code in targets.get((frame.filename, frame.name), ()):
        lines = [line for _, _, line in code.co_lines() if line is not None]
        if lines and min(lines) <= (frame.lineno or 0) <= max(lines):
            return code
    return None


def _breaking_functions(module: torch.fx.GraphModule, run_once: RunOnce) -> set[Any]:
    """The code objects of the module's called functions that some graph break falls in: one run
    of a copy under dynamo with a backend that records the breaks and compiles nothing."""
    from torch._dynamo.backends.debugging import ExplainWithBackend

    probe = ExplainWithBackend("eager")
    with _nested_graph_breaks():
        run_once(torch.compile(_copy(module), backend=probe, dynamic=False))
    targets = _targets(module)
    broken = set()
    for reason in probe.break_reasons:
        for frame in getattr(reason, "user_stack", None) or ():
            code = _code_at(targets, frame)
            if code is not None:
                broken.add(code)
                break  # the outermost called function: the node's own call breaks
    return broken


def _nested_graph_breaks() -> Any:
    """Within: a break inside a called function resumes in that function (dynamo's
    ``nested_graph_breaks``) rather than making the function a frame of its own, compiled per call
    site; the probe then records each break once, under the forward's frame, and compiles no
    callee.  A torch without the switch gets no change."""
    import contextlib

    import torch._dynamo.config as config

    if not hasattr(config, "nested_graph_breaks"):
        return contextlib.nullcontext()
    return config.patch(nested_graph_breaks=True)


def _disable(function: Any) -> Any:
    """``function`` run outside dynamo (dynamo imported here, not with this module)."""
    import torch._dynamo

    return torch._dynamo.disable(function)


def _copy(module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A module of its own code (dynamo's caches are per code object) sharing ``module``'s weights."""
    return torch.fx.GraphModule(module, copy.deepcopy(module.graph), class_name=type(module).__name__)


def _running_outside_dynamo(module: torch.fx.GraphModule, broken: set[Any]) -> torch.fx.GraphModule:
    """A copy of ``module`` whose calls of the ``broken`` functions run outside dynamo."""
    result = _copy(module)
    disabled: dict[Any, Any] = {}
    for node in result.graph.nodes:
        code = getattr(node.target, "__code__", None) if node.op == "call_function" else None
        if code in broken:
            if node.target not in disabled:
                disabled[node.target] = _disable(node.target)
            node.target = disabled[node.target]
    result.recompile()
    return result

