"""How a command-line tool ends, in one place: a typed error (``server.errors``) prints one line on
stderr and exits with its type's exit code; a closed stdout and Ctrl-C end the tool quietly."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable

from server.errors import GlassgraphError

EXIT_OK = 0
EXIT_OUTPUT_CLOSED = 0  # stdout closed by its reader (`glassgraph dump | head`): it had what it wanted
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


class CliError(GlassgraphError):
    """The operation failed in a way the user can act on: a bad file, a target that exists (exit code 1)."""


def run_tool(prog: str, command: Callable[[], int]) -> int:
    """``command()``'s exit code; a :class:`GlassgraphError` becomes ``PROG: error: MESSAGE`` and its exit code."""
    _tolerant_streams()
    try:
        return command()
    except GlassgraphError as exc:
        print(f"{prog}: error: {exc.message}", file=sys.stderr)
        return exc.type.exit_code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OUTPUT_CLOSED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _tolerant_streams() -> None:
    """A terminal that cannot show a character (``→``, accents) gets ``?``, not a traceback."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


def _silence_stdout() -> None:
    """After a broken pipe on stdout: point it at /dev/null so the interpreter's final flush stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
