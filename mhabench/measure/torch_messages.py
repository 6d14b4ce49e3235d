"""What torch says while a row is measured, when we expected it: caught as text for the row's note.

Some torch paths warn on every process that takes them, and the warning is about torch, not about the
user's run: nested SDPA logs why each kernel was not used (glog-style ``W1127 …`` lines from the
``torch.nested._internal.sdpa`` logger), ``torch.fx`` logs a deprecation while tracing, and building a
strided nested tensor raises a prototype ``UserWarning``. Printed raw they break the progress bar and
read like failures. :func:`caught_torch_messages` collects exactly these (named below) as text, so the
case path can put them in the row's ``note``, each message once; anything else torch warns is
re-emitted unchanged, so an unexpected warning is never hidden.
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Iterator

EXPECTED_LOGGERS = ("torch.nested._internal.sdpa", "torch.fx._symbolic_trace")
"""Loggers whose warnings are expected on the paths we measure (nested SDPA's kernel choice, fx tracing)."""
EXPECTED_WARNINGS = (re.compile(r"nested tensors is in prototype stage"),)
"""``warnings`` messages we expect (the strided nested-tensor prototype warning)."""
NOTE_PREFIX, SEPARATOR = "torch: ", " | "
"""A note reads ``torch: <message> | <message>``: who said it, then each message once."""
NOTE_LIMIT = 500
"""Longest note: enough for torch's reason, short enough for a CSV cell and a table line."""


class _Collect(logging.Handler):
    """A handler that keeps each record's message, in order."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def caught_torch_messages() -> Iterator[list[str]]:
    """The expected torch messages of the block (filled when it ends); other warnings pass through."""
    messages: list[str] = []
    handler = _Collect(messages)
    loggers = [logging.getLogger(name) for name in EXPECTED_LOGGERS]
    saved = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False  # not through torch's own stderr handler
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield messages
    finally:
        for logger, propagate in zip(loggers, saved, strict=True):
            logger.removeHandler(handler)
            logger.propagate = propagate
    for warning in caught:
        text = str(warning.message)
        if any(pattern.search(text) for pattern in EXPECTED_WARNINGS):
            messages.append(text)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def as_note(messages: list[str]) -> str:
    """The messages as one line, each once: ``torch: <message> | <message>``.

    Headers that only announce a list (``Flash attention kernel not used because:``) are dropped when
    the list itself was caught, so the note is torch's reasons rather than its layout.
    """
    lines = [" ".join(message.split()) for message in messages]
    reasons = [line for line in lines if line and not line.endswith(":")] or [line for line in lines if line]
    unique = list(dict.fromkeys(reasons))
    if not unique:
        return ""
    note = NOTE_PREFIX + SEPARATOR.join(unique)
    return note if len(note) <= NOTE_LIMIT else note[: NOTE_LIMIT - 1] + "…"


def messages_of(note: str) -> list[str]:
    """The messages of a note :func:`as_note` wrote (a note from elsewhere is one message)."""
    return [part for part in note.removeprefix(NOTE_PREFIX).split(SEPARATOR) if part]
