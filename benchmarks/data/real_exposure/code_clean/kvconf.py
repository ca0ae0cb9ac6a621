"""Read and write simple key = value configuration files.

The format is deliberately small: one setting per line, "#" or ";" starts a
comment, blank lines are ignored and a line ending in a backslash continues
on the next.  Values are strings; helpers convert them to numbers, booleans
and lists when asked.  Keys are case-sensitive and may repeat only when the
reader is told to collect repeated keys into lists.

    >>> read_lines(["name = demo", "# note", "size = 3"])
    {'name': 'demo', 'size': '3'}
"""

__all__ = ["read_lines", "read_file", "write_file", "as_bool", "as_list",
           "ConfigSyntaxError"]

_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}


class ConfigSyntaxError(ValueError):
    """A line that is not a comment, a blank line or key = value."""

    def __init__(self, message, lineno):
        super().__init__("line %d: %s" % (lineno, message))
        self.lineno = lineno


def _logical_lines(lines):
    pending = ""
    start = None
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        if start is None:
            start = lineno
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        yield start, pending + line
        pending, start = "", None
    if pending:
        yield start, pending


def read_lines(lines, repeated=False):
    """Parse an iterable of lines into a dict.

    With repeated true every value is a list, holding one entry per line that
    set the key; otherwise a repeated key is an error.
    """
    result = {}
    for lineno, line in _logical_lines(lines):
        text = line.strip()
        if not text or text[0] in "#;":
            continue
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigSyntaxError("expected key = value", lineno)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if repeated:
            result.setdefault(key, []).append(value)
        elif key in result:
            raise ConfigSyntaxError("key %r set twice" % key, lineno)
        else:
            result[key] = value
    return result


def read_file(path, repeated=False, encoding="utf-8"):
    """Parse the file at path (see read_lines)."""
    with open(path, encoding=encoding) as handle:
        return read_lines(handle, repeated)


def _quote(value):
    text = str(value)
    if text != text.strip() or "#" in text or ";" in text:
        return '"%s"' % text
    return text


def write_file(path, settings, header=None, encoding="utf-8"):
    """Write settings (a mapping) sorted by key, with an optional header."""
    with open(path, "w", encoding=encoding) as handle:
        if header:
            for line in header.splitlines():
                handle.write("# %s\n" % line)
        for key in sorted(settings):
            handle.write("%s = %s\n" % (key, _quote(settings[key])))


def as_bool(value):
    """Read yes/no, true/false, on/off or 1/0 as a bool."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("not a boolean: %r" % value)


def as_list(value, sep=","):
    """Split value on sep and strip each item; empty items are dropped."""
    return [item.strip() for item in value.split(sep) if item.strip()]


if __name__ == "__main__":
    sample = ["# demo settings", "host = example.invalid", "retries = 3",
              "verbose = yes", "paths = /a, /b, \\", "  /c"]
    conf = read_lines(sample)
    print(conf)
    print(as_bool(conf["verbose"]), as_list(conf["paths"]))
