"""Name -> method class. Methods register themselves with ``@register``; every module in
``copyprobe.methods`` is imported on first lookup, so adding a method family means adding
one file. Method modules import heavy libraries lazily, inside functions.

Methods from other packages join through the ``copyprobe.methods`` entry point group:
each entry names a module (imported, so its ``@register`` runs) or a Method class
(registered), e.g. in the other package's pyproject.toml::

    [project.entry-points."copyprobe.methods"]
    my_method = "my_package.my_method:MyMethod"
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from pathlib import Path
from typing import Any

from copyprobe.errors import ConfigError
from copyprobe.params import expected, shown

_METHODS: dict[str, type] = {}
_DISCOVERED = False


def register(cls: type) -> type:
    name = getattr(cls, "name", "")
    if not name:
        raise TypeError(f"{cls.__name__} has no name")
    if name in _METHODS and _METHODS[name] is not cls:
        raise TypeError(f"method name {name!r} registered twice")
    _METHODS[name] = cls
    return cls


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    # the built-in method modules, imported by name: the registry sits below the methods
    for info in pkgutil.iter_modules([str(Path(__file__).with_name("methods"))]):
        if not info.name.startswith("_") and info.name != "base":
            importlib.import_module(f"copyprobe.methods.{info.name}")
    _DISCOVERED = True
    _load_entry_points()


ENTRY_POINT_GROUP = "copyprobe.methods"
# entry point name -> why it could not be loaded (shown by `copyprobe methods`)
PLUGIN_ERRORS: dict[str, str] = {}


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = entry.load()
            if isinstance(loaded, type) and getattr(loaded, "name", "") not in _METHODS:
                register(loaded)
        except Exception as exc:  # a broken plugin must not take the built-in methods down
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            PLUGIN_ERRORS[entry.name] = f"{entry.value}: {first}"


def method_names() -> list[str]:
    _discover()
    return sorted(_METHODS)


def method_class(name: str) -> type:
    _discover()
    try:
        return _METHODS[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_METHODS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"unknown method {name!r}{hint} (run `copyprobe methods` to list them)"
        ) from None


def convert_param(cls: type, key: str, raw: str) -> Any:
    """Read a command-line string as a parameter value, with the parameter's constraint
    (the value is checked when the method is made, not here)."""
    constraints = cls.param_constraints()
    if key not in constraints:
        close = difflib.get_close_matches(key, list(constraints), n=1)
        hint = f"; did you mean {cls.name}.{close[0]}?" if close else ""
        raise ConfigError(
            f"method {cls.name!r} has no parameter {key!r}{hint} "
            f"(it has: {', '.join(constraints) or 'none'})"
        )
    constraint = constraints[key]
    try:  # read only: make_method checks the value against the constraint, once
        return constraint.parse(raw)
    except (ValueError, TypeError, OverflowError) as e:
        raise ConfigError(f"bad value {shown(raw)} for {cls.name}.{key}: {expected(constraint, e)}") from None


def make_method(name: str, **params: Any):
    cls = method_class(name)
    defaults = cls.param_defaults()
    unknown = [k for k in params if k not in defaults]
    if unknown:
        raise ConfigError(
            f"method {name!r} has no parameter {unknown[0]!r} (it has: {', '.join(defaults) or 'none'})"
        )
    method = cls(**params)
    method.validate()
    return method
