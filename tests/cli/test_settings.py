"""Run-kind settings are declared once (copyprobe.params.Settings): the library's keywords
take their defaults from the declaration and check each value once, naming the setting;
the command line makes its options from it and names the option; and a method parameter
given as `--param min_k.k=...` reaches the method through at most 6 functions, checked once."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import copyprobe
from copyprobe.audit import SETTINGS as AUDIT
from copyprobe.backends.fake import FakeBackend
from copyprobe.canary.scoring import SETTINGS as CANARY
from copyprobe.canary.scoring import canary_test
from copyprobe.cli.main import main
from copyprobe.detect import SETTINGS as DETECT
from copyprobe.errors import SettingError

KINDS = [(copyprobe.detect, DETECT), (copyprobe.audit, AUDIT), (canary_test, CANARY)]
PACKAGE = Path(copyprobe.__file__).parent


@pytest.mark.parametrize("function, settings", KINDS)
def test_every_setting_is_a_keyword_with_the_declared_default(function, settings):
    signature = inspect.signature(function).parameters
    for setting in settings:
        assert signature[setting.name].default == setting.default, setting.name


def test_copying_settings_are_the_config_fields_with_the_declared_defaults():
    import dataclasses

    from copyprobe.copying.common import GenConfig
    from copyprobe.copying.runner import MEMFREE_SETTINGS, SETTINGS, CopyConfig, copying

    fields = {f.name: f.default for f in dataclasses.fields(CopyConfig)}
    fields.update({f.name: f.default for f in dataclasses.fields(GenConfig) if f.name != "max_tokens"})
    for setting in SETTINGS:
        assert fields[setting.name] == setting.default, setting.name
    for setting in MEMFREE_SETTINGS:
        assert inspect.signature(copying).parameters[setting.name].default == setting.default
    with pytest.raises(SettingError, match=r"^literal_threshold must be a number in \[0, 1\], got 1\.5$"):
        CopyConfig(literal_threshold=1.5)


def _copying_settings():
    from copyprobe.copying.runner import MEMFREE_SETTINGS, SETTINGS

    return [*SETTINGS, *MEMFREE_SETTINGS]


FLAGS = {"n_bootstrap": "--bootstrap", "literal_threshold": "--threshold", "literal_max_tokens": "--literal-tokens",
         "nonliteral_max_tokens": "--story-tokens", "baseline": "--no-baseline"}


@pytest.mark.parametrize("command, settings", [(["detect"], DETECT), (["audit"], AUDIT), (["canary", "test"], CANARY),
                                               (["copying"], _copying_settings())])
def test_every_setting_read_by_the_command_line_has_its_help_and_default(command, settings, capsys):
    assert main([*command, "--help"]) == 0
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines (and hyphenated words)
    for setting in settings:
        if setting.name == "blind_baseline":  # not an option of detect's command line
            continue
        assert FLAGS.get(setting.name, "--" + setting.name.replace("_", "-")) in text
        if setting.name not in ("baseline",):  # a switch, worded as what it turns off
            assert "".join(setting.help.split()) in text


def test_library_names_the_setting_and_the_command_line_the_option(tmp_path, capsys):
    with pytest.raises(SettingError, match=r"^alpha must be a number in \(0, 1\), got 1\.5$"):
        copyprobe.audit(FakeBackend(), ["a b c"], ["d e f"], alpha=1.5)
    with pytest.raises(SettingError, match=r"^n_bootstrap must be an integer in \[0, 10000\], got -3$"):
        copyprobe.detect(FakeBackend(), ["a b c"], ["loss"], n_bootstrap=-3)
    code = main(["audit", "--model", "fake", "--suspect", "s.jsonl", "--clean", "c.jsonl", "--alpha", "1.5",
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err == ("copyprobe audit: error: argument --alpha: must be a number in (0, 1), got 1.5 "
                                 "(see copyprobe audit --help)\n")
    assert not (tmp_path / "run").exists()  # refused before any work


def test_setting_checked_once(monkeypatch, tmp_path):
    """The command line only reads --alpha; the library checks it, once."""
    from copyprobe.params import Real

    seen = []
    reason = Real.reason

    def spy(self, value):
        if value == 0.0123:
            seen.append(value)
        return reason(self, value)

    monkeypatch.setattr(Real, "reason", spy)
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend())
    docs = [{"id": str(i), "text": f"w{i} x{i} y{i} z{i}", "doc_id": f"d{i}"} for i in range(6)]
    for name, rows in (("s", docs[:2]), ("c", docs[2:])):
        (tmp_path / f"{name}.jsonl").write_text("".join(__import__("json").dumps(r) + "\n" for r in rows))
    assert main(["audit", "--model", "fake", "--suspect", str(tmp_path / "s.jsonl"), "--clean",
                 str(tmp_path / "c.jsonl"), "--method", "loss", "--alpha", "0.0123", "--bootstrap", "0",
                 "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"]) == 0
    assert seen == [0.0123]


def test_param_reaches_the_method_through_at_most_six_functions_checked_once(monkeypatch, tmp_path):
    """`--param min_k.k=0.123` from argv to MinK: the copyprobe functions that hand the value
    on (from the command's run() to the one that makes the method), measured from the call
    stacks where it is read and where it is checked."""
    from copyprobe.methods.likelihood import MinK
    from copyprobe.params import Real

    stacks: dict[str, list[list[str]]] = {"read": [], "check": []}

    def path_here() -> list[str]:
        frames = [f for f in inspect.stack()[2:] if f.filename.startswith(str(PACKAGE))]
        names = [f"{Path(f.filename).relative_to(PACKAGE)}:{f.function}" for f in reversed(frames)]
        return names[names.index("cli/main.py:_main") + 1:]

    parse, validate = Real.parse, MinK.validate

    def spy_parse(self, text):
        if text.strip() == "0.123":
            stacks["read"].append(path_here())
        return parse(self, text)

    def spy_validate(self):
        if self.k == 0.123:
            stacks["check"].append(path_here())
        return validate(self)

    monkeypatch.setattr(Real, "parse", spy_parse)
    monkeypatch.setattr(MinK, "validate", spy_validate)
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend())
    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"id": "{i}", "text": "w{i} x y z v", "label": {i % 2}}}\n' for i in range(8)))
    assert main(["detect", "--model", "fake", "--data", str(data), "--methods", "min_k", "--param", "min_k.k=0.123",
                 "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--bootstrap", "0"]) == 0
    assert len(stacks["read"]) == 1 and len(stacks["check"]) == 1  # read once, checked once
    path = list(dict.fromkeys([*stacks["read"][0], *stacks["check"][0]]))
    path = [p for p in path if not p.startswith(("params.py", "methods/"))]  # the constraint and the method itself
    path.remove("record.py:discarding")  # detect's wrapper (record.discards_new_out_dir) passes every argument on
    assert path == ["cli/commands/detect.py:run", "cli/_common.py:parse_params", "registry.py:convert_param",
                    "detect.py:detect", "scoring.py:build_methods", "registry.py:make_method"]
    assert len(path) <= 6


def _raised_strings(path: Path) -> list[str]:
    """The string pieces of every ``raise X(...)`` in a module, and of every ``return``: a
    message is often built by a helper (``_oom_message``) or returned as a reason."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        value = node.exc if isinstance(node, ast.Raise) else node.value if isinstance(node, ast.Return) else None
        if value is not None:
            found += [n.value for n in ast.walk(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                      and not re.fullmatch(r"--[a-z][a-z-]+", n.value)]  # an argument list, not a message
    return found


def test_library_errors_name_no_command_line_option():
    """Library modules say what is wrong in the library's words; only cli/ names options."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "cli":
            continue
        for text in _raised_strings(path):
            # a flag of this call, not a whole command to run (`copyprobe freq build --tokenizer ...`)
            if re.search(r"(?<![\w-])--[a-z][a-z-]+", text) and "copyprobe " not in text and "pip " not in text \
                    and "--force-reinstall" not in text:
                offenders.append(f"{rel}: {text}")
    assert offenders == []


@pytest.mark.parametrize("text, items", [("a", ["a"]), (" a , b ", ["a", "b"]), ("", []), (" ", []),
                                         (" , ", None), (",", None), ("a,,b", None), ("a,", None), (",a", None)])
def test_comma_lists_refuse_an_empty_item(text, items):
    from copyprobe.params import EmptyItemError, comma_items

    if items is None:
        with pytest.raises(EmptyItemError, match="an empty item between commas"):
            comma_items(text)
    else:
        assert comma_items(text) == items


def test_library_comma_lists_name_the_setting():
    from copyprobe.copying.runner import CopyConfig, parse_tasks
    from copyprobe.errors import ConfigError
    from copyprobe.scoring import build_methods

    with pytest.raises(ConfigError, match=r"^methods 'loss,,zlib': an empty item between commas$"):
        build_methods("loss,,zlib")
    with pytest.raises(ConfigError, match=r"^bad value 'literal,' for tasks: an empty item between commas$"):
        CopyConfig(tasks="literal,")
    with pytest.raises(ConfigError, match="for tasks: an empty item"):
        parse_tasks("literal,,qa")
    assert [m.name for m in build_methods(" loss , zlib ")] == ["loss", "zlib"]


def test_an_optional_list_reads_blank_as_empty_and_refuses_a_lone_comma():
    from copyprobe.errors import ConfigError
    from copyprobe.params import Integer, Items, infer

    optional = Items(Integer(0), min_items=0)
    assert optional.convert("", "offsets") == ()
    assert optional.convert(" 1, 2 ", "offsets") == (1, 2)
    with pytest.raises(ConfigError, match=r"^bad value ',' for offsets: an empty item between commas$"):
        optional.convert(",", "offsets")
    # a plain __init__ default of () infers the same optional list
    with pytest.raises(ConfigError, match="an empty item between commas"):
        infer(()).convert(" , ", "names")
