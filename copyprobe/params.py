"""Parameter constraints, declared once and used everywhere a value enters copyprobe.

A constraint knows three things about a parameter: whether a value is acceptable
(``check``), how to say what is acceptable (``describe``, shown by ``copyprobe methods``
and in every error message), and how to read it from a command-line string (``parse``).
Method parameters declare one with :func:`param`; command-line options use the same
classes through :func:`option_type`, so ``--seed -1`` and ``--param neighborhood.seed=-1``
are refused with the same words.

    class MinK(Method):
        k: float = param(0.2, Real(0, 1, low_open=True), "fraction of lowest log-probs")
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from copyprobe.errors import ConfigError, SettingError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class Constraint:
    """Base: any value is fine; strings parse to themselves."""

    def check(self, value: Any) -> bool:
        return True

    def describe(self) -> str:
        return "any value"

    def parse(self, text: str) -> Any:
        return text.strip()

    def reason(self, value: Any) -> str | None:
        """None when ``value`` is acceptable, else why not (after "<what> "); a constraint
        that can say more than "must be ..." (e.g. a device missing here) overrides it."""
        return None if self.check(value) else f"must be {self.describe()}, got {value!r}"

    def validate(self, value: Any, what: str) -> Any:
        """``value`` if acceptable, else ConfigError naming ``what`` and the rule."""
        problem = self.reason(value)
        if problem is not None:
            raise ConfigError(f"{what} {problem}")
        return value

    def convert(self, raw: str, what: str) -> Any:
        """A command-line string turned into a checked value, or one ConfigError line."""
        try:
            value = self.parse(raw)
        except (ValueError, TypeError, OverflowError) as e:
            raise ConfigError(f"bad value {shown(raw)} for {what}: {expected(self, e)}") from None
        return self.validate(value, what)


class EmptyItemError(ValueError):
    """A comma-separated list with an empty item; its message says so (a plain ValueError
    from int() or float() says nothing a user can act on, so those are not shown)."""


def comma_items(text: str) -> list[str]:
    """The stripped items of a comma-separated list. An empty item ("a,,b", "a,", ",") is an
    error: it is more often a name left out than a wish. Only a blank text is the empty list."""
    if not text.strip():
        return []
    items = [part.strip() for part in text.split(",")]
    if not all(items):
        raise EmptyItemError("an empty item between commas")
    return items


def shown(raw: str, limit: int = 60) -> str:
    """``raw`` quoted for a one-line message, cut where it is long (a pasted file, 400 digits)."""
    return repr(raw) if len(raw) <= limit else repr(raw[:limit]) + f" ... ({len(raw):,} characters)"


def expected(constraint: "Constraint", exc: Exception) -> str:
    """Why a string is no value of ``constraint``, for a message."""
    return str(exc) if isinstance(exc, EmptyItemError) else f"expected {constraint.describe()}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _bound_text(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{_num(low)}, {_num(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {_num(low)}"
    if high is not None:
        return f"{'<' if high_open else '<='} {_num(high)}"
    return ""


@dataclasses.dataclass(frozen=True)
class Integer(Constraint):
    """An int (not a bool) within [low, high]."""

    low: int | None = None
    high: int | None = None

    def check(self, value: Any) -> bool:
        return (
            isinstance(value, int) and not isinstance(value, bool)
            and (self.low is None or value >= self.low)
            and (self.high is None or value <= self.high)
        )

    def describe(self) -> str:
        bounds = _bound_text(self.low, self.high, False, False)
        return f"an integer {bounds}".strip()

    def parse(self, text: str) -> int:
        text = text.strip()
        if len(text) > 40:  # int() of thousands of digits is slow and never a sensible count
            raise ValueError(text)
        return int(text)


@dataclasses.dataclass(frozen=True)
class Real(Constraint):
    """A finite int or float (not a bool) within the bounds; ``low_open``/``high_open``
    exclude the bound itself."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def check(self, value: Any) -> bool:
        if not _is_number(value) or not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return True

    def describe(self) -> str:
        bounds = _bound_text(self.low, self.high, self.low_open, self.high_open)
        # without an upper bound, infinity meets the words "> 0": say it is refused
        return f"a {'finite ' if self.high is None else ''}number {bounds}".strip()

    def parse(self, text: str) -> float:
        text = text.strip()
        if len(text) > 60:
            raise ValueError(text)
        return float(text)


FRACTION = Real(0, 1, low_open=True)  # k-like shares: (0, 1]
PROBABILITY = Real(0, 1)
POSITIVE = Real(0, low_open=True)
COUNT = Integer(1)  # a positive integer
# model requests made for each text (samples, augmented or neighbour copies): beyond a
# thousand a run of any size would not end, and a typo (100000) would only show as a hang
PER_TEXT = Integer(1, 1000)
# seconds an OpenAI-compatible request may wait for its answer (urllib's socket timeout)
REQUEST_TIMEOUT = Real(0, 86400, low_open=True)
NON_NEGATIVE_INT = Integer(0)
SEED = Integer(0, 2**32 - 1)  # numpy and torch seeds must fit in 32 bits


@dataclasses.dataclass(frozen=True)
class Boolean(Constraint):
    def check(self, value: Any) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "true or false"

    def parse(self, text: str) -> bool:
        lowered = text.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(text)


@dataclasses.dataclass(frozen=True)
class OneOf(Constraint):
    """One of a fixed set of strings."""

    choices: tuple[str, ...]

    def __init__(self, *choices: str):
        object.__setattr__(self, "choices", tuple(choices))

    def check(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.choices

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)


@dataclasses.dataclass(frozen=True)
class Text(Constraint):
    """A string; ``empty=False`` refuses blank ones."""

    empty: bool = True

    def check(self, value: Any) -> bool:
        return isinstance(value, str) and (self.empty or bool(value.strip()))

    def describe(self) -> str:
        return "a string" if self.empty else "a non-empty string"


AUTO = "auto"


@dataclasses.dataclass(frozen=True)
class ModelSpec(Constraint):
    """A model spec string. ``auto`` (when allowed) means "the default reference model
    for the target" and is replaced by :meth:`Method.resolve`; ``keywords`` are other
    words the method gives a meaning (e.g. ``target``, ``reference``)."""

    auto: bool = False
    keywords: tuple[str, ...] = ()
    many: bool = False  # a comma-separated list of them
    empty: bool = False  # "" (none) allowed

    def check(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        if not self.many:
            return self.empty or bool(value.strip())
        try:
            return self.empty or bool(comma_items(value))
        except EmptyItemError:
            return False

    def reason(self, value: Any) -> str | None:
        if self.many and isinstance(value, str):
            try:
                comma_items(value)
            except EmptyItemError as e:
                return f"has {e}, got {shown(value)}"
        return super().reason(value)

    def describe(self) -> str:
        words = ([AUTO] if self.auto else []) + list(self.keywords)
        what = "a comma-separated list of model specs" if self.many else "a model spec"
        return what + (f" or {', '.join(repr(w) for w in words)}" if words else "") + (", or empty" if self.empty else "")


@dataclasses.dataclass(frozen=True)
class Optional(Constraint):
    """None, or a value ``inner`` accepts. ``none``/``null``/empty parse to None."""

    inner: Constraint

    def check(self, value: Any) -> bool:
        return value is None or self.inner.check(value)

    def describe(self) -> str:
        return f"{self.inner.describe()}, or none"

    def reason(self, value: Any) -> str | None:
        # a value given is judged by the inner rule alone ("must be an integer >= 1, got 0")
        return None if value is None else self.inner.reason(value)

    def parse(self, text: str) -> Any:
        if text.strip().lower() in ("none", "null", ""):
            return None
        return self.inner.parse(text)


@dataclasses.dataclass(frozen=True)
class Items(Constraint):
    """A tuple of values ``inner`` accepts (comma-separated on the command line)."""

    inner: Constraint
    min_items: int = 1

    def check(self, value: Any) -> bool:
        return (
            isinstance(value, (tuple, list)) and len(value) >= self.min_items
            and all(self.inner.check(v) for v in value)
        )

    def describe(self) -> str:
        return f"a comma-separated list of at least {self.min_items} ({self.inner.describe()})"

    def parse(self, text: str) -> tuple:
        return tuple(self.inner.parse(part) for part in comma_items(text))


PORT = Integer(1, 65535)


@dataclasses.dataclass(frozen=True)
class Device(Constraint):
    """A torch device that exists on this machine: ``auto``, ``cpu``, ``cuda``,
    ``cuda:N`` (N below the number of GPUs) or, where ``mps`` is in ``accelerators``,
    ``mps``. Checking availability imports torch, only for a value other than auto/cpu."""

    accelerators: tuple[str, ...] = ("cuda",)

    def describe(self) -> str:
        return "one of " + ", ".join(["auto", "cpu", "cuda", "cuda:N", *(a for a in self.accelerators if a != "cuda")])

    def parse(self, text: str) -> str:
        return text.strip().lower()

    def check(self, value: Any) -> bool:
        return self.reason(value) is None

    def reason(self, value: Any) -> str | None:
        if not isinstance(value, str):
            return f"must be {self.describe()}, got {value!r}"
        name, _, index = value.partition(":")
        if value in ("auto", "cpu"):
            return None
        if name == "mps" and "mps" not in self.accelerators:
            return ("is 'mps', which scoring cannot use (its statistics accumulate in float64, which MPS "
                    "lacks); use cpu, cuda or auto")
        if name not in self.accelerators or (index and not (index.isdigit() and name == "cuda")):
            return f"must be {self.describe()}, got {value!r}"
        try:
            import torch
        except ImportError:
            return f"is {value!r}, but PyTorch is not installed (pip install torch)"
        if name == "mps":
            mps = getattr(torch.backends, "mps", None)
            if mps is None or not mps.is_available():
                return f"is {value!r}, but this machine has no MPS device (Apple GPU); use cpu or auto"
            return None
        if not torch.cuda.is_available():
            return f"is {value!r}, but no CUDA GPU is available here; use cpu or auto"
        count = torch.cuda.device_count()
        if index and int(index) >= count:
            return f"is {value!r}, but this machine has {count} CUDA GPU{'s' if count != 1 else ''} (cuda:0" + (
                f" to cuda:{count - 1})" if count > 1 else ")")
        return None


@dataclasses.dataclass(frozen=True)
class URL(Constraint):
    """An ``http(s)://host[:port][/path]`` URL: a scheme in ``schemes``, a host (IPv6 in
    closed brackets), and a port that is a number in [1, 65535] when given."""

    schemes: tuple[str, ...] = ("http", "https")

    def describe(self) -> str:
        return f"a URL {'/'.join(self.schemes)}://host[:port]/path"

    def check(self, value: Any) -> bool:
        return self.reason(value) is None

    def reason(self, value: Any) -> str | None:
        import urllib.parse

        if not isinstance(value, str) or not value.strip():
            return f"must be {self.describe()}, got {value!r}"
        if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
            return f"must be {self.describe()} without spaces or control characters, got {value!r}"
        try:
            parsed = urllib.parse.urlsplit(value)
            host = parsed.hostname
        except ValueError as exc:  # e.g. an unclosed IPv6 bracket
            return f"is not a valid URL ({exc}), got {value!r}"
        if parsed.scheme not in self.schemes or not parsed.netloc or not host:
            return f"must be {self.describe()}, got {value!r}"
        port_text = parsed.netloc.rpartition("@")[2]
        port_text = port_text.rpartition("]")[2] if port_text.startswith("[") else port_text
        if ":" in port_text:
            raw_port = port_text.rpartition(":")[2]
            if raw_port and (not raw_port.isdigit() or not PORT.check(int(raw_port))):
                return f"has port {raw_port!r}, which must be {PORT.describe()} (in {value!r})"
        return None


# -- declaring method parameters -------------------------------------------------------


def param(default: Any, constraint: Constraint | None = None, help: str = "") -> Any:
    """A method parameter: its default, what values it accepts, and one line of help.
    Use as a class attribute with a type annotation (see ``copyprobe.methods.base``)."""
    return dataclasses.field(default=default, metadata={"constraint": constraint or Constraint(), "help": help})


def infer(default: Any) -> Constraint:
    """A constraint from a default value, for parameters declared without one
    (e.g. a third-party method with a plain ``__init__``)."""
    if isinstance(default, bool):
        return Boolean()
    if isinstance(default, int):
        return Integer()
    if isinstance(default, float):
        return Real()
    if isinstance(default, (tuple, list)):
        return Items(infer(default[0]) if default else Constraint(), min_items=0)
    if isinstance(default, str):
        return Text()
    return Constraint()


# -- run-kind settings ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting of a run kind, declared once: its name (the Python keyword, the key in
    run.json, and what the command line names its option after), its default, the values
    it accepts and one line of help."""

    name: str
    default: Any
    constraint: Constraint = Constraint()
    help: str = ""


class Settings:
    """A run kind's settings, in order. The public function takes each as a keyword with
    ``default(name)`` as its default and checks them all once with :meth:`check`; the CLI
    makes one option per setting; :meth:`record` is the settings section of run.json."""

    def __init__(self, *settings: Setting):
        self.settings = tuple(settings)
        self.by_name = {s.name: s for s in self.settings}

    def __iter__(self):
        return iter(self.settings)

    def __getitem__(self, name: str) -> Setting:
        return self.by_name[name]

    def default(self, name: str) -> Any:
        return self.by_name[name].default

    def check(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` (name -> value, every declared setting) with each checked once: a bad
        one is a ConfigError naming the setting, never a command-line option."""
        for setting in self.settings:
            problem = setting.constraint.reason(values[setting.name])
            if problem is not None:
                raise SettingError(setting.name, problem)
        return values

    def check_recorded(self, recorded: Any, where: str) -> None:
        """The settings a run directory recorded (``recorded``: run.json's section, which
        ``where`` names, e.g. "runs/a/run.json: 'audit"), each against its rule: a hand-edited
        run.json is read as strictly as the command line (an alpha of 2 turned every verdict
        into evidence)."""
        from copyprobe.errors import DataError

        if not isinstance(recorded, dict):
            raise DataError(f"{where}' must be an object, got {type(recorded).__name__}")
        for setting in self.settings:
            if setting.name in recorded:
                problem = setting.constraint.reason(recorded[setting.name])
                if problem is not None:
                    raise DataError(f"{where}.{setting.name}' {problem}")

    def record(self, values: dict[str, Any], names: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The settings as run.json records them (``names``: only these, in declared order)."""
        return {s.name: values[s.name] for s in self.settings if names is None or s.name in names}


SEED_SETTING = Setting("seed", 0, SEED, "seed of the bootstrap, training splits and sampling methods")
LIMIT_SETTING = Setting("limit", None, Optional(COUNT), "only the first N passages of the data (a quick try-out)")


# more resamples move a 95% interval's bounds by less than 0.002 (scipy's default is 9,999),
# and each costs memory per passage: the counts of 10,000 resamples of 1,650 passages are
# 66 MB, and 100,000 resamples of them peaked at 4.1 GB (12 s) for one method
MAX_BOOTSTRAP = 10_000
BOOTSTRAP_COUNT = Integer(0, MAX_BOOTSTRAP)


def n_bootstrap_setting(default: int) -> Setting:
    return Setting("n_bootstrap", default, BOOTSTRAP_COUNT, "bootstrap resamples for confidence intervals; 0 = none")


# -- command-line options ---------------------------------------------------------------


def parse_type(constraint: Constraint, flag: str) -> Callable[[str], Any]:
    """An argparse ``type=`` that only reads the string (a setting whose value the library
    checks, once); a string that is no value at all is the usual usage error."""
    import argparse

    def convert(raw: str) -> Any:
        try:
            return constraint.parse(raw)
        except (ValueError, TypeError, OverflowError) as e:
            raise argparse.ArgumentTypeError(f"{expected(constraint, e)}, got {shown(raw)}") from None

    convert.__name__ = flag
    return convert


def option_type(constraint: Constraint, flag: str) -> Callable[[str], Any]:
    """An argparse ``type=`` that parses and checks with ``constraint``; a bad value is
    the usual one-line usage error naming ``flag`` (exit 2)."""
    import argparse

    def convert(raw: str) -> Any:
        try:
            value = constraint.parse(raw)
        except (ValueError, TypeError, OverflowError) as e:
            raise argparse.ArgumentTypeError(f"{expected(constraint, e)}, got {shown(raw)}") from None
        problem = constraint.reason(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    convert.__name__ = flag  # argparse names the type in its messages
    return convert
