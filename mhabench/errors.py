"""Typed errors. Library code raises these; only ``cli.py`` turns them into a message and an exit code."""

from __future__ import annotations


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


class UnsupportedError(MhabenchError):
    """An implementation that cannot run this case (device, dtype, GQA, decode): an ``unsupported`` row."""


class PluginError(InputError):
    """A plugin file or ``file.py:Class`` entry that cannot be loaded (missing, broken, wrong signature)."""
