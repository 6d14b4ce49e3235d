"""The command line's shell: how every command reports an error (one line, exit 2 for input, 1 for a failure,
130 when interrupted) and the consoles it prints to. Apart from the commands, so every command module shares one
error contract and one output width."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from mhabench.errors import MhabenchError


class OneLineErrors(TyperGroup):
    """Usage errors (an unknown flag, a missing argument) as one line and exit 2, like every other error."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        except typer.Abort:
            sys.exit(130)
        except Exception as exc:  # click's usage errors (click may be vendored by typer): duck-typed
            if not (hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)):
                raise
            message = exc.format_message()
            if message:
                err_console.print(f"error: {escape(message)}", highlight=False, soft_wrap=True)
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


PIPE_WIDTH = 200  # output to a file or a pipe: wide enough that the run summary's table never wraps
console = Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else PIPE_WIDTH)


def fresh_console() -> Console:
    """A console created now, so NO_COLOR / FORCE_COLOR set for this invocation are honoured."""
    return Console(width=None if sys.stdout.isatty() else 160)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn mhabench's typed errors into one line on stderr and their exit code (2 input, 1 failure)."""
    try:
        yield
    except (MhabenchError, OSError) as exc:  # OSError: e.g. a full disk mid-run; finished rows stay on disk
        for line in str(exc).splitlines() or [""]:  # a file's every problem, one line each
            err_console.print(f"[bold red]error:[/bold red] {escape(line)}", highlight=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code if isinstance(exc, MhabenchError) else 1) from None
    except KeyboardInterrupt:
        err_console.print("interrupted: every finished row is already on disk")
        raise typer.Exit(130) from None
