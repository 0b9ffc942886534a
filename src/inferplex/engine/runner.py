"""What a compiled model runs its requests on: a :class:`Runner`.

Three kinds, all over :class:`~inferplex.engine.device_pool.DevicePool`:

- :class:`PoolRunner`: one device;
- :class:`~inferplex.engine.chain.ChainRunner`: HETERO subgraphs and PIPELINE_PARALLEL stages;
- :class:`~inferplex.engine.dispatcher.Dispatcher`: MULTI and AUTO.

A runner takes :class:`~inferplex.engine.request.Request` objects and ends each
exactly once through its future.  Inputs reaching a runner are already checked
against the model's ports.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from inferplex.engine.completions import blocking
from inferplex.engine.device_pool import DevicePool, as_inference_error
from inferplex.engine.request import Outcome, Request, RunResult
from inferplex.errors import PropertyError

__all__ = ["PoolRunner", "Runner", "end_with"]


class Runner(ABC):
    """Runs whole requests of one compiled model."""

    @abstractmethod
    def submit(self, request: Request) -> None:
        """Start ``request``; it ends exactly once, through its future, from any thread.

        Never raises for a failure of the run: the future carries it.
        """

    def run(self, request: Request) -> RunResult:
        """Run ``request`` and wait for it (the calling thread may run it itself)."""
        self.submit(request)
        with blocking():
            return request.future.result()

    @property
    @abstractmethod
    def optimal_number_of_infer_requests(self) -> int:
        """Requests worth keeping in flight to keep every worker busy."""

    @property
    @abstractmethod
    def execution_devices(self) -> list[str]:
        """Devices this runner runs on now."""

    def get_property(self, key: str) -> Any:
        """A runner-specific read-only property; ``KeyError`` when unknown."""
        raise KeyError(key)

    def property_names(self) -> tuple[str, ...]:
        """The keys :meth:`get_property` answers."""
        return ()

    def presented_property(self, key: str, value: Any) -> Any:
        """``value`` of ``key`` in the form the compiled model returns it (see
        ``DeviceProgram.presented_property``); a runner over several programs returns it as typed."""
        return value

    def pin_host_memory(self, address: int, size: int) -> Callable[[], None] | None:
        """Page-lock host memory that requests read their inputs from (``DeviceProgram.pin_host_memory``);
        the function that undoes it, or None: only a runner of one device program can."""
        return None

    def set_property(self, properties: Mapping[str, Any]) -> None:
        """Change properties after compilation; only some runners accept any."""
        raise PropertyError(
            f"properties {sorted(properties)} cannot be changed after compilation on "
            f"{', '.join(self.execution_devices)}")

    @abstractmethod
    def close(self) -> None:
        """Stop the threads and release the devices' programs.  Idempotent."""


def end_with(request: Request, future: Outcome[RunResult]) -> None:
    """End ``request`` with ``future``'s outcome once it has one."""

    def settle(done: Outcome[RunResult]) -> None:
        error = done.exception()
        if error is None:
            request.succeed(done.result())
        else:
            request.fail(error)

    future.add_done_callback(settle)


class PoolRunner(Runner):
    """One compiled device program."""

    def __init__(self, pool: DevicePool) -> None:
        self.pool = pool
        self.submit = pool.submit_request  # type: ignore[method-assign]  # one call less per request

    def submit(self, request: Request) -> None:
        self.pool.submit_request(request)  # the device thread ends it

    def run(self, request: Request) -> RunResult:
        try:
            result = self.pool.run(request.inputs, request)
        except Exception as error:  # KeyboardInterrupt and SystemExit go through: the caller's to stop on
            raise as_inference_error(error, self.pool.device) from error
        if not request.succeed(result):  # a result that breaks the contract ends it with an error
            return request.future.result()
        return result

    @property
    def optimal_number_of_infer_requests(self) -> int:
        return self.pool.workers

    def pin_host_memory(self, address: int, size: int) -> Callable[[], None] | None:
        return self.pool.program.pin_host_memory(address, size)

    @property
    def execution_devices(self) -> list[str]:
        return [self.pool.device]

    def get_property(self, key: str) -> Any:
        try:
            return self.pool.program.get_property(key)
        except (PropertyError, KeyError) as error:  # not the program's: the settings may have it
            raise KeyError(key) from error

    def property_names(self) -> tuple[str, ...]:
        return tuple(self.pool.program.property_names())

    def presented_property(self, key: str, value: Any) -> Any:
        return self.pool.program.presented_property(key, value)

    def close(self) -> None:
        self.pool.close()
