"""Exceptions that reach the user as one-line messages (exit code 2), never as tracebacks."""

from __future__ import annotations


class CopyprobeError(Exception):
    """A problem the user can fix: bad input, unknown name, unsupported capability.

    The CLI prints ``str(error)`` on one line and exits with code 2.
    """

    exit_code = 2


class DataError(CopyprobeError):
    """The data file cannot be read or lacks what is needed."""


class TooFewLabelledRows(DataError):
    """A method draws labelled rows from the data (ReCaLL's prefix) and the data has too
    few. ``parameters`` names the file parameters not given, each of which spares a draw:
    a caller whose passages have no labels (a canary kit) says to give those files, not
    to draw fewer."""

    def __init__(self, message: str, parameters: tuple[str, ...]):
        super().__init__(message)
        self.parameters = tuple(parameters)

    def __reduce__(self):  # rebuilt with both arguments (the default passes only the message)
        return type(self), (str(self), self.parameters)


class ConfigError(CopyprobeError):
    """An unknown method, parameter, model spec or option value."""


class SettingError(ConfigError):
    """A run kind's setting with a value it does not accept. Names the setting (the
    library's word); the command line may say which option set it."""

    def __init__(self, setting: str, problem: str):
        super().__init__(f"{setting} {problem}")
        self.setting, self.problem = setting, problem


class DataSettingError(SettingError, DataError):
    """Data that a setting (e.g. text_column) would have to point elsewhere: a DataError
    that names the setting, so the command line names its option."""


class CapabilityError(CopyprobeError):
    """A method needs a request kind that the backend cannot answer."""


class BackendError(CopyprobeError):
    """A model could not be loaded or a request failed for good."""


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C after which the command kept its work somewhere other than the response
    cache (e.g. plant's checkpoint): its message is the one line that says where."""


class DataWarning(UserWarning):
    """Data that was read but may not be what was meant (e.g. CSV rows spanning several
    lines); the CLI prints it as one line ``copyprobe: warning: ...``."""


class RowError(Exception):
    """A method cannot score one passage; recorded per row, the run goes on."""


def one_line(exc: BaseException) -> str:
    """``Type: first line`` of an exception raised by a library, for a one-line message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
