"""copyprobe.files: the one atomic writer (what it replaces, with what mode, and text no
UTF-8 holds) and the one count that tells binary data from text."""

from __future__ import annotations

import os
from pathlib import Path
import stat

import pytest

from copyprobe.errors import ConfigError, DataError
from copyprobe.files import (atomic_write, binary_controls, read_json, refuse_empty_path, too_many_controls,
                            write_json)


def test_what_is_no_file_is_not_replaced_and_a_link_gives_way_to_the_file(tmp_path):
    """report --out /dev/null (as root) replaced /dev/null with a file; a link is replaced as
    before, so the object it points to in a shared store (DVC, git-annex) is left alone."""
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to("real.json")
    write_json(tmp_path / "link.json", {"a": 1})
    assert not (tmp_path / "link.json").is_symlink() and read_json(tmp_path / "link.json") == {"a": 1}
    assert (tmp_path / "real.json").read_text() == "{}"
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(OSError, match="not a regular file but a named pipe: not replaced") as info:
        atomic_write(tmp_path / "pipe", "x")
    assert info.value.filename == str(tmp_path / "pipe")
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe").st_mode)
    (tmp_path / "to-pipe").symlink_to("pipe")  # a link to what is no file: refused too
    with pytest.raises(OSError, match="named pipe"):
        atomic_write(tmp_path / "to-pipe", "x")
    (tmp_path / "dir").mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write(tmp_path / "dir", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "link.json", "pipe", "real.json", "to-pipe"]


def test_new_files_get_the_umask_s_mode_and_a_replaced_file_keeps_its_own(tmp_path):
    """mkstemp's 0o600 stayed on every run file and report: colleagues on a shared server
    could not read them whatever the umask."""
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new.txt", "x")
        assert stat.S_IMODE(os.stat(tmp_path / "new.txt").st_mode) == 0o640
    finally:
        os.umask(old)
    (tmp_path / "kept.txt").write_text("old")
    os.chmod(tmp_path / "kept.txt", 0o604)
    atomic_write(tmp_path / "kept.txt", "new")
    assert stat.S_IMODE(os.stat(tmp_path / "kept.txt").st_mode) == 0o604
    assert (tmp_path / "kept.txt").read_text() == "new"
    atomic_write(tmp_path / "kept.txt", "private", mode=0o600)  # what must stay private says so
    assert stat.S_IMODE(os.stat(tmp_path / "kept.txt").st_mode) == 0o600


def test_a_name_read_from_bytes_that_are_not_utf8_is_written_and_read_back(tmp_path):
    """Python reads such a file name as a lone surrogate, which UTF-8 cannot hold: run.json
    failed to write after all the scoring, and the run was lost."""
    name = os.fsdecode(b"g\xe9.jsonl")
    write_json(tmp_path / "run.json", {"path": name})
    raw = (tmp_path / "run.json").read_bytes()
    raw.decode("utf-8")  # valid UTF-8, the name as a JSON escape
    assert read_json(tmp_path / "run.json")["path"] == name and os.fsencode(name) == b"g\xe9.jsonl"


@pytest.mark.parametrize("text, controls", [
    ("tab\there\nline\r\nform\f\vvertical \x1b[1mbold\x1b[0m", 0),
    ("nul\x00 bell\x07 del\x7f c1\x85\x9f", 5),
])
def test_binary_controls_count_what_no_text_holds(text, controls):
    assert binary_controls(text) == controls
    assert not too_many_controls(3, 10) and too_many_controls(4, 10) and not too_many_controls(20, 1000)


@pytest.mark.parametrize("value", ["", "  ", "\t\n"])
def test_an_empty_path_is_refused_with_what_it_names(value):
    with pytest.raises(DataError) as caught:
        refuse_empty_path(value, "the data", "name a data file")
    assert str(caught.value) == f"the data path is empty ({value!r}; an unset variable?): name a data file"
    with pytest.raises(ConfigError, match="the report's path is empty"):
        refuse_empty_path(value, "the report's", "name the HTML file", ConfigError)


class _PathLike:
    def __fspath__(self):
        return ""

    def __str__(self):
        return ""


@pytest.mark.parametrize("value", [None, "a", " a ", Path("x"), ["", ""], {"text": ""}])
def test_a_named_path_or_a_non_path_passes(value):
    refuse_empty_path(value, "the data", "name a data file")  # no error: a dataset or a list is not a path


def test_an_empty_path_like_is_refused():
    with pytest.raises(DataError, match="the data path is empty"):
        refuse_empty_path(_PathLike(), "the data", "name a data file")
