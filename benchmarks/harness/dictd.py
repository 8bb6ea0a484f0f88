"""Read the prose of a dictd dictionary (``/usr/share/dictd/<name>.dict.dz``, Debian's ``dict-*``
packages): each entry's body paragraphs, markup removed.

A dictd ``.dict`` file is its entries one after another: a headword line at the left margin, then
the body indented. Body prose is indented by the dictionary's usual indent (the most common
one: 3 spaces in FOLDOC, 4 in the Jargon File); deeper lines (code, tables, verse) and shallower
ones (pronunciations) are left out. Cross-references ``{term}`` keep their text, links
``{text (URL)}`` keep ``text``; bare URLs, ``<category>`` and ``[tag]`` labels and sense numbers
(``1.``) are dropped. The dictionary's own ``00-database-*`` entries (its licence and
description) are skipped.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

DICTD_DIR = Path("/usr/share/dictd")

_LINK = re.compile(r"\{([^{}]*?)\s*\((?:https?|ftp|mailto|news):[^)]*\)\}")
_URL = re.compile(r"\((?:https?|ftp|mailto|news):[^)]*\)|(?:https?|ftp)://\S+")
_LABEL = re.compile(r"<[a-z][a-z ,/&-]*>\s*|\[[^\]]{1,40}\]\s*")
_SENSE = re.compile(r"^\d+\.\s+")
_SPACES = re.compile(r"\s+")
_META = "00-database"


def dictd_path(name: str) -> Path:
    """Where Debian installs dictionary ``name`` (e.g. ``foldoc``).

    Raises:
        FileNotFoundError: When it is not installed, naming the package that installs it.
    """
    path = DICTD_DIR / f"{name}.dict.dz"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: install Debian's dict-{name} package "
            f"(apt-get install --no-install-recommends dict-{name})"
        )
    return path


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def clean_paragraph(text: str) -> str:
    """One body paragraph without dictd markup (see the module docstring)."""
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = _LABEL.sub("", text)
    text = _SENSE.sub("", text.strip())
    return _SPACES.sub(" ", text.replace("{", "").replace("}", "")).strip()


def dictd_paragraphs(path: Path) -> list[str]:
    """The body paragraphs of a dictd dictionary file (gzip or dictzip), in file order, cleaned."""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    indents = Counter(_indent(ln) for ln in lines if ln.strip() and ln[0] == " ")
    if not indents:
        raise ValueError(f"{path}: no indented entry body, not a dictd dictionary")
    body = indents.most_common(1)[0][0]
    paragraphs: list[str] = []
    current: list[str] = []
    meta = False
    for line in lines:
        if line.strip() and _indent(line) == 0:
            meta = line.startswith(_META)
        if not meta and line.strip() and _indent(line) == body:
            current.append(line.strip())
            continue
        if current:
            paragraphs.append(clean_paragraph(" ".join(current)))
            current = []
    if current:
        paragraphs.append(clean_paragraph(" ".join(current)))
    return [p for p in paragraphs if p]
