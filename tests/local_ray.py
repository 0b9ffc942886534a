"""A local Ray cluster on loopback only, for tests and benchmarks.

Ray binds to the machine's interface address even when told
``--node-ip-address=127.0.0.1``, so the cluster and its driver run inside a
network namespace with only loopback up.  :func:`rerun_in_namespace` re-runs a
command under ``unshare --net --pid --fork --mount-proc --kill-child``: in a
PID namespace of its own, every process but the command's own was started by
it, so :meth:`LocalCluster.stop` ends exactly those, and the kernel ends any
left when the command exits (or is killed, say on a timeout: ``--kill-child``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["IN_NAMESPACE", "LocalCluster", "namespace_refusal", "rerun_in_namespace"]

IN_NAMESPACE = "INFERPLEX_RAY_NAMESPACE"
"""Environment variable set in the re-run command: it may start a cluster on loopback."""

_UNSHARE = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]
_RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray") or "ray"
"""Ray's command: the one beside this interpreter (a virtual environment's), else the first on PATH."""


def namespace_refusal() -> str | None:
    """Why the cluster cannot run here (no unshare, not allowed, no ray), or None."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "ray is not installed (pip install 'inferplex[ray]')"
    if shutil.which("unshare") is None:
        return "the unshare command is needed to keep the Ray cluster on loopback"
    probe = subprocess.run([*_UNSHARE, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"network namespaces are not allowed here (unshare: {probe.stderr.strip()[:200]})"
    return None


def rerun_in_namespace(command: Sequence[str], timeout: float, env: dict[str, str] | None = None,
                       capture: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in new network, PID and mount namespaces, with :data:`IN_NAMESPACE` set.

    ``capture``: collect its output (the default), or let it through as it comes
    (a benchmark whose rows should be seen even if it is stopped).
    """
    full_env = dict(os.environ if env is None else env)
    full_env[IN_NAMESPACE] = "1"
    full_env.pop("RAY_ADDRESS", None)
    return subprocess.run([*_UNSHARE, *command], capture_output=capture, text=True, timeout=timeout,
                          env=full_env, check=False)


class LocalCluster:
    """``nodes`` Ray nodes on 127.0.0.1 (a head and workers), ``cpus`` logical CPUs each.

    Only inside the namespace of :func:`rerun_in_namespace`.  ``gpus``: GPUs of
    the last node (the others get none).  ``core_sets``: per node, the host cores
    its processes may run on (``taskset -c``, e.g. ``"0-3"``), so that nodes split
    the host instead of each using all of it; None: no pinning.
    ``own_machine``: the caller vouches that this machine reaches no network and
    runs no other Ray (a benchmark host, say): the cluster then runs outside a
    namespace, and :meth:`stop` ends it with ``ray stop``, which ends every Ray
    process of the machine.  ``node_env``: environment variables of the nodes'
    processes only (their actors inherit them), not of this process.
    """

    def __init__(self, nodes: int = 2, cpus: int | Sequence[int] = 1, port: int = 6390,
                 gpus: int = 0, core_sets: Sequence[str] | None = None, own_machine: bool = False,
                 node_env: Mapping[str, str] | None = None) -> None:
        self.own_machine = own_machine
        if os.environ.get(IN_NAMESPACE) != "1" and not own_machine:
            raise RuntimeError("LocalCluster runs only inside rerun_in_namespace (loopback only)")
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self.cpus = [cpus] * nodes if isinstance(cpus, int) else list(cpus)
        self.gpus = gpus
        self.core_sets = list(core_sets) if core_sets is not None else None
        self._temp = tempfile.mkdtemp(prefix="ipxray")
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0",
                        PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.env.update(node_env or {})

    def start(self) -> LocalCluster:
        if not self.own_machine:
            _loopback_up()
        head = ["--head", f"--port={self.port}", "--include-dashboard=false", f"--temp-dir={self._temp}"]
        subprocess.run(self._start_command(0, head), check=True, capture_output=True, env=self.env,
                       timeout=120)
        # Workers join one after another: nodes started at once on one host race for the same
        # socket names (a raylet's plasma store then fails to bind).
        for group in ([index] for index in range(1, len(self.cpus))):
            workers = [subprocess.Popen(self._start_command(index, [f"--address={self.address}"]),  # noqa: S603
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env)
                       for index in group]
            for worker in workers:
                _, err = worker.communicate(timeout=120)
                if worker.returncode != 0:
                    raise RuntimeError(f"a Ray worker node did not start: {err.decode()[-2000:]}")
        return self

    def _start_command(self, index: int, where: list[str]) -> list[str]:
        gpus = self.gpus if index == len(self.cpus) - 1 else 0
        pinned = _pinned(self.core_sets[index]) if self.core_sets else []
        return [*pinned, _RAY, "start", *where, "--node-ip-address=127.0.0.1",
                "--disable-usage-stats", f"--num-cpus={self.cpus[index]}", f"--num-gpus={gpus}"]

    def kill_node(self, node_id: str) -> int:
        """SIGKILL the raylet of ``node_id`` and the processes it started (a machine lost at once).

        Found by their ids in this PID namespace's ``/proc``: the raylet by its
        ``--node_id`` argument, its workers as its children.  Returns how many ended.
        """
        if os.getpid() != 1:
            raise RuntimeError("kill_node runs only as the first process of rerun_in_namespace")
        commands = {pid: _cmdline(pid) for pid in _namespace_pids()}
        doomed = [pid for pid, words in commands.items()
                  if words and words[0].endswith("raylet") and f"--node_id={node_id}" in words]
        doomed += [pid for pid in commands if _parent(pid) in doomed]
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(doomed)

    def stop(self) -> None:
        """End the cluster's processes and remove its files.

        As the first process of the PID namespace of :func:`rerun_in_namespace`,
        every other process in it is one this cluster started (``ray start``
        daemonises, so there is no parent to wait on): they get SIGTERM, then
        SIGKILL after a grace period.  Elsewhere, ``ray stop`` (which would see
        the whole machine) is not used and nothing is ended.
        """
        if os.getpid() == 1:
            _end_namespace_processes(grace=3.0)
        elif self.own_machine:
            subprocess.run([_RAY, "stop", "--force"], capture_output=True, env=self.env, check=False)
        shutil.rmtree(self._temp, ignore_errors=True)


def _namespace_pids() -> list[int]:
    """Ids of the processes of this PID namespace other than this one (its first)."""
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and int(entry) != os.getpid()]


def _loopback_up() -> None:
    """Bring this network namespace's loopback up: ``ip link set lo up``, or its ioctl without ``ip``."""
    if shutil.which("ip") is not None:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        return
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), siocgifflags, request))[1]
        fcntl.ioctl(sock.fileno(), siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


_PIN = ("import os, sys; a, b = sys.argv[1].split('-'); os.sched_setaffinity(0, range(int(a), int(b) + 1)); "
        "os.execvp(sys.argv[2], sys.argv[2:])")


def _pinned(cores: str) -> list[str]:
    """A command prefix running what follows on ``cores`` (``"0-3"``): ``taskset``, else Python's call."""
    if shutil.which("taskset") is not None:
        return ["taskset", "-c", cores]
    return [sys.executable, "-c", _PIN, cores]


def _end_namespace_processes(grace: float) -> None:
    for pid in _namespace_pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _living(_namespace_pids()):
        time.sleep(0.1)
    for pid in _namespace_pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline") as text:
            return text.read().split("\0")
    except OSError:
        return []


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _living(pids: list[int]) -> bool:
    """Whether any of ``pids`` is still running (zombies, reaped by nobody here, do not count)."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                    return True
        except (FileNotFoundError, IndexError, ProcessLookupError):
            continue
    return False
