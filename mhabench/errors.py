"""Typed errors. Library code raises these; only ``cli.py`` turns them into a message and an exit code."""

from __future__ import annotations

import difflib
import enum
import re
import reprlib
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError


class MhabenchError(Exception):
    """Base class: a failure the user should see as one line, never as a traceback."""

    exit_code = 1


class InputError(MhabenchError):
    """Bad input from the user (config, flag, run folder): exit code 2."""

    exit_code = 2


class ConfigError(InputError):
    """An invalid scenario file or an invalid value for one of its fields."""


class UnknownImplementationError(InputError):
    """An implementation name that is not in the registry."""


class DeviceUnavailableError(InputError):
    """A device was requested that this machine does not have (e.g. CUDA without a GPU)."""


class RunNotFoundError(InputError):
    """A run id or folder that does not hold an mhabench run."""


class OutputFolderError(InputError):
    """The output folder given with ``--out`` cannot hold a new run."""


class ResultsCorruptError(InputError):
    """A run folder whose files cannot be read back."""


class RegistryError(MhabenchError):
    """Misuse of the implementation registry (duplicate name, bad plugin)."""

    exit_code = 2


class Word(str, enum.Enum):
    """A str enum that prints as its word: ``str()`` and f-strings give ``"ok"``, not ``"RowStatus.OK"`` (Python 3.11
    changed ``format`` of mixed-in enums), so a member stands wherever the bare word stood, in files and messages."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class ReasonCode(Word):
    """Why an implementation cannot run a case, as a code: what checks match (never the words of the text).

    An ``unsupported`` row carries both: this code in ``reason_code`` and a sentence in ``error`` for people. The
    text may be reworded freely; a code is renamed only with every check that names it."""

    NOT_INSTALLED = "not_installed"
    VERSION = "version"
    PLATFORM = "platform"
    DEVICE = "device"
    DTYPE = "dtype"
    GROUPED_KV = "grouped_kv"
    DECODE = "decode"
    BACKWARD = "backward"
    HEAD_DIM = "head_dim"
    HEAD_DIM_TOO_WIDE = "head_dim_too_wide"
    MASK = "mask"
    DOCUMENTS = "documents"
    SCORE_MOD = "score_mod"
    DECODE_WINDOW = "decode_window"
    PATTERN = "pattern"
    NOT_TENSOR_PARALLEL = "not_tensor_parallel"
    SDPA_NO_KERNEL = "sdpa_no_kernel"
    """An SDPA backend (forced, or nested SDPA) has no kernel for this input: said before or by torch."""
    NO_KERNEL = "no_kernel"
    """torch or a library raised that it has no kernel or plan for this input."""
    NO_CAPTURE = "no_capture"
    IMPLEMENTATION = "implementation"
    """The implementation refused the input for a reason of its own (a plugin's ``UnsupportedError``)."""


class Refusal(str):
    """A reason an implementation cannot run a case: the text people read, carrying the code checks match."""

    code: ReasonCode

    def __new__(cls, text: str, code: ReasonCode) -> Refusal:
        refusal = super().__new__(cls, text)
        refusal.code = code
        return refusal


class UnsupportedError(MhabenchError):
    """An implementation that cannot run this case (device, dtype, GQA, decode): an ``unsupported`` row.

    ``code`` is what checks match; a plugin that raises it without one gets :attr:`ReasonCode.IMPLEMENTATION`."""

    def __init__(self, message: str, code: ReasonCode = ReasonCode.IMPLEMENTATION) -> None:
        super().__init__(message)
        self.code = code


class PluginError(InputError):
    """A plugin file or ``file.py:Class`` entry that cannot be loaded (missing, broken, wrong signature)."""


QUOTE_LIMIT = 80
"""Longest quoted value in an error: long enough to recognise, short enough to keep the message one line."""


def shorten(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters with "…", so a 25 MB value cannot become a 25 MB error line."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """A short ``repr`` of a user value for an error message.

    ``reprlib`` stops at a few items and levels, so quoting an alias-bomb list costs microseconds,
    and a newline inside a string is escaped, so the message stays on one line.
    """
    try:
        text = repr(value[: limit + 1]) if isinstance(value, str) else _SHORT_REPR.repr(value)
    except ValueError:  # an int too long for str() (Python ≥ 3.11 caps int → str at 4300 digits)
        text = f"an integer of {value.bit_length() if isinstance(value, int) else '?'} bits"
    return shorten(text, limit)


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel, _SHORT_REPR.maxlist, _SHORT_REPR.maxtuple, _SHORT_REPR.maxdict = 3, 6, 6, 4
_SHORT_REPR.maxstring, _SHORT_REPR.maxother, _SHORT_REPR.maxlong = QUOTE_LIMIT, QUOTE_LIMIT, QUOTE_LIMIT


MAX_LISTED_ERRORS = 20
"""Errors of one file listed at once: a screenful, so a user fixes them all in one pass, not one per rerun."""


def describe_validation_error(
    exc: ValidationError, known_fields: Callable[[tuple[Any, ...]], list[str]], where: str, extra: Sequence[str] = ()
) -> str:
    """Every error of a file, one line each and each prefixed with ``where`` (cut at a screenful).

    An unknown key is reported first, and a required field it was surely meant to be (``hedas`` for
    ``heads``) is not reported again as missing: the typo is the news. ``known_fields(loc)`` lists the
    fields beside ``loc`` for "did you mean". ``extra`` adds problems found outside pydantic (unknown
    implementation names) so they are named in the same pass.
    """
    errors = exc.errors()
    unknown = [error for error in errors if error["type"] == "extra_forbidden"]
    meant = {_meant_field(error, known_fields) for error in unknown} - {None}
    others = [error for error in errors if error["type"] != "extra_forbidden" and _field_of(error) not in meant]
    lines = [_describe(error, known_fields) for error in [*unknown, *others]] + list(extra)
    shown = lines[:MAX_LISTED_ERRORS]
    if len(lines) > len(shown):
        shown.append(f"(and {len(lines) - len(shown)} more)")
    return "\n".join(f"{where}: {line}" for line in shown)


def close_names(name: str, known: list[str]) -> list[str]:
    """Known names a typo was probably meant as: close spellings and names that start with it (``flash``)."""
    text = str(name)[:60]
    starting = [k for k in known if k.startswith(text) and text]
    return list(dict.fromkeys([*difflib.get_close_matches(text, known, n=3), *starting]))[:3]


def _field_of(error: Any) -> tuple[Any, ...]:
    return tuple(error["loc"])


def _meant_field(error: Any, known_fields: Callable[[tuple[Any, ...]], list[str]]) -> tuple[Any, ...] | None:
    """The location of the field an unknown key most likely misspells (None when nothing is close)."""
    loc = tuple(error["loc"])
    close = difflib.get_close_matches(str(loc[-1])[:60], known_fields(loc), n=1)
    return (*loc[:-1], close[0]) if close else None


def _format_loc(loc: tuple[Any, ...]) -> str:
    """``scenarios[0].heads``; a key that is not a plain name is quoted, so it cannot break the line."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            name = str(part) if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,60}", str(part)) else quote(part, 40)
            text += f".{name}" if text else name
    return text


def _describe(error: Any, known_fields: Callable[[tuple[Any, ...]], list[str]]) -> str:
    loc = tuple(error["loc"])
    # list-valued fields report the list index last; name the field, not the element
    field_loc = loc[:-1] if len(loc) > 1 and isinstance(loc[-1], int) and loc[-2] != "scenarios" else loc
    where = _format_loc(field_loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        known = known_fields(loc)
        close = difflib.get_close_matches(str(loc[-1])[:60], known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known fields: {', '.join(known)}"
        return f"{where}: unknown field{hint}"
    if error["type"] == "invalid_key":
        return f"{_format_loc(loc[:-1]) or '(top level)'}: key {quote(loc[-1])} is not a field name"
    if error["type"] == "missing":
        return f"{where}: required field is missing"
    message = shorten(error["msg"].removeprefix("Value error, "), 300)
    if error["type"] == "value_error":
        return f"{where}: {message}"
    return f"{where}: {message} (got {quote(error.get('input'))}{_quoted_number_hint(error)})"


def _quoted_number_hint(error: Any) -> str:
    """Why ``seq_len: "64"`` is refused: sizes are strict integers, and quotes make YAML text of a number."""
    value = error.get("input")
    if error["type"] in ("int_type", "float_type") and isinstance(value, str) and _is_number(value):
        return "; quotes make it text in YAML: write it without them"
    return ""


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
