"""The exceptions etc raises.

Every error etc reports is an :class:`etc.Error` carrying etc's own located message (the
same text the ``etc`` CLI prints: file, JSON pointer or node, and what is wrong), the error
code's name (``"invalid input"``, ``"unsupported"``, ...) and the exit code the CLI would
have returned. The class says in which step it happened and what kind it is::

    Error
    +-- ExportError                   etc.export: the model cannot be compiled
    |   +-- UnsupportedOperatorError  ... because of operators etc cannot import (.ops)
    +-- ProgramError                  etc.load: the .pte is not a program etc can load
    +-- InputError (also ValueError)  Module.run/generate: an input has the wrong dtype/shape
    +-- RunError                      Module.run/generate: the run itself failed
    +-- UsageError (also ValueError)  a malformed argument (target="gpu", steps=0)
    +-- DeviceUnavailableError        the requested device is not there or not usable
    +-- InternalError                 a bug in etc: please report it
"""

from __future__ import annotations


class Error(Exception):
    """An error etc reported.

    Attributes:
        message: etc's message, with where the problem is.
        code: the error code's name ("invalid input", "unsupported", "not found", ...).
        exit_code: what the ``etc`` CLI exits with for this error.
    """

    def __init__(self, message: str, code: str = "internal error", exit_code: int = 70):
        super().__init__(message)
        self.message = message
        self.code = code
        self.exit_code = exit_code


class ExportError(Error):
    """``etc.export`` could not compile the model."""


class UnsupportedOperatorError(ExportError):
    """The model uses operators etc cannot import; ``ops`` lists them (e.g. ``"aten.fft_fft.default"``)."""

    def __init__(self, message: str, code: str, exit_code: int, ops: list[str]):
        super().__init__(message, code, exit_code)
        self.ops = list(ops)


class ProgramError(Error):
    """``etc.load`` could not load the program (not a .pte, corrupt, or not one etc runs)."""


class InputError(Error, ValueError):
    """An input does not fit the program: its dtype, shape, device or count."""


class RunError(Error):
    """Running the program failed."""


class UsageError(Error, ValueError):
    """An argument is malformed (a device name, a step count)."""


class DeviceUnavailableError(Error):
    """The requested device is not available (no GPU, no CUDA support built in, ...)."""


class InternalError(Error):
    """A bug in etc. The message says where; please report it."""


def _from_etc(phase: str, code: str, exit_code: int, message: str, subjects: list[str]) -> Error:
    """The exception for an error etc's native module reports (called by it)."""
    if code == "internal error":
        return InternalError(message, code, exit_code)
    if code == "device unavailable":
        return DeviceUnavailableError(message, code, exit_code)
    if code == "usage":
        return UsageError(message, code, exit_code)
    if phase == "export":
        if code == "unsupported" and subjects:
            return UnsupportedOperatorError(message, code, exit_code, subjects)
        return ExportError(message, code, exit_code)
    if phase == "load":
        return ProgramError(message, code, exit_code)
    if code == "invalid input":
        return InputError(message, code, exit_code)
    return RunError(message, code, exit_code)
