"""What every report page shares: the Jinja environment over reports/templates and the
CSS class of a verdict word (a module of its own so pages and their dispatcher do not
import each other)."""

from __future__ import annotations

from pathlib import Path


def environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                              autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


def verdict_css(word: str) -> str:
    return word.replace(" ", "")


__all__ = ["environment", "verdict_css"]
