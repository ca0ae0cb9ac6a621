"""Name -> method class. Methods register themselves with ``@register``; every module in
``copyprobe.methods`` is imported on first lookup, so adding a method family means adding
one file. Method modules import heavy libraries lazily, inside functions."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import Any

from copyprobe.errors import ConfigError

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
    import copyprobe.methods as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("_") and info.name != "base":
            importlib.import_module(f"copyprobe.methods.{info.name}")
    _DISCOVERED = True


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
    """Turn a command-line string into a parameter value, typed after its default."""
    defaults = cls.param_defaults()
    if key not in defaults:
        close = difflib.get_close_matches(key, list(defaults), n=1)
        hint = f"; did you mean {cls.name}.{close[0]}?" if close else ""
        raise ConfigError(
            f"method {cls.name!r} has no parameter {key!r}{hint} "
            f"(it has: {', '.join(defaults) or 'none'})"
        )
    default = defaults[key]
    text = raw.strip()
    try:
        if isinstance(default, bool):
            lowered = text.lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
        if default is None and text.lower() in ("none", "null", ""):
            return None
        if isinstance(default, (list, tuple)):
            return type(default)(x.strip() for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(
            f"bad value {raw!r} for {cls.name}.{key}: expected {type(default).__name__}"
        ) from None
    if default is None:
        # untyped optional: numbers stay numbers
        for parse in (int, float):
            try:
                return parse(text)
            except ValueError:
                pass
    return text


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
