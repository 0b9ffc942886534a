"""The ``inferplex`` command: ``benchmark``, ``devices`` and ``query``.

``inferplex benchmark`` takes OpenVINO benchmark_app's flags (``-m -d -niter -t
-nireq -nstreams -hint -b -shape -pc -api``); ``inferplex devices`` lists every
device with a PASS/FAIL self-check; ``inferplex query`` shows which ops a device
(or HETERO) takes.  :func:`main` returns the exit status: 0 on success, 1 when a
device check fails, 2 on a user mistake (bad flag, model, device, property or
shape), reported as one line on stderr.
"""

from inferplex.cli.main import main

__all__ = ["main"]
