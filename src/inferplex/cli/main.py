"""``inferplex`` command dispatch.

Exit status: 0 success; 1 a device failed (self-check, compilation, inference);
2 a user mistake (unknown flag, unreadable model, unknown device, bad property,
bad shape or input), reported as one ``inferplex: error: ...`` line on stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from rich.console import Console

from inferplex.cli import benchmark, devices, query
from inferplex.cli.output import consoles
from inferplex.errors import (
    AffinityError,
    DeviceNameError,
    InferplexError,
    InputError,
    ModelError,
    PropertyError,
    UnsupportedOpError,
)

__all__ = ["build_parser", "main"]

USAGE_ERRORS = (ModelError, DeviceNameError, PropertyError, InputError, UnsupportedOpError,
                AffinityError)
"""Errors that mean the command line asked for something wrong (exit status 2)."""

Command = Callable[[argparse.Namespace, Console, Console], int]


def build_parser() -> argparse.ArgumentParser:
    from inferplex import __version__

    parser = argparse.ArgumentParser(
        prog="inferplex", description="Run ONNX models on every device of this machine.")
    parser.add_argument("--version", action="version", version=f"inferplex {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module, run, summary in (
        ("benchmark", benchmark, benchmark.run_benchmark,
         "measure latency and throughput (OpenVINO benchmark_app's flags)"),
        ("devices", devices, devices.run_devices, "list devices and self-check each one"),
        ("query", query, query.run_query, "show which ops a device (or HETERO) takes"),
    ):
        sub = commands.add_parser(name, help=summary, description=summary)
        module.add_arguments(sub)
        sub.set_defaults(run=run)
    return parser


class _OneLineWarnings(logging.Handler):
    """inferplex's log warnings as one line each on stderr, no traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage().removeprefix("inferplex: ")
        print(f"inferplex: {record.levelname.lower()}: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse has printed usage and the error (or --help)
        return int(exit_.code or 0)
    out, err = consoles()
    logger = logging.getLogger("inferplex")
    handler = _OneLineWarnings(logging.WARNING)
    logger.addHandler(handler)
    try:
        return int(args.run(args, out, err))
    except USAGE_ERRORS as error:
        print(f"inferplex: error: {error}", file=sys.stderr)
        return 2
    except InferplexError as error:
        print(f"inferplex: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("inferplex: interrupted", file=sys.stderr)
        return 130
    finally:
        logger.removeHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
