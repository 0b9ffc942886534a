"""For ``bench/multi_diagnostics.py --queue-behind`` only: a worker process started with this folder
first on its path runs as before runs were queued behind each other on a GPU worker's stream.

``GpuProgram.run_into`` is given no ``queued``, and the slot gives its worker back only when the
run has ended (what the worker process's ``finally`` does).
"""

from inferplex.devices.gpu import program as _program

_run_into = _program.GpuProgram.run_into


def _run_into_to_the_end(self, inputs, worker, host_outputs, queued=None):  # noqa: ANN001, ANN202
    return _run_into(self, inputs, worker, host_outputs, None)


_program.GpuProgram.run_into = _run_into_to_the_end
