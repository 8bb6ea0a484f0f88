"""Technical documentation as out-of-domain single-hop validation: developers' questions over the
PyPI descriptions (README) of packages in the project's environment.

The corpus is read at run time from the installed packages' metadata (``Description``), never
downloaded, and never stored here: the texts belong to their packages' authors. A description
loses its changelog sections (release notes are not documentation), is split into paragraphs on
blank lines, and a paragraph is kept when it is prose (:func:`prose_paragraphs`: 80-1,500
characters, not code, a table, a heading, a badge or an image). Every paragraph of every package
of :data:`PACKAGES` is one document of one pool (``<package>-<index>``, the text prefixed by the
package's name as SQuAD's paragraphs are by their title; about 1,700 paragraphs), the same pool
for both splits; a paragraph that two packages share is kept once.

The questions (:data:`QUESTIONS`, written by hand) name their paragraph by the SHA-256 of its
whitespace-normalised text and the package version it was read from. Their split is the package's,
fixed before any question was written: ``val`` where ``hash_bucket(package, 2) == 0``
(:func:`qrag_training.data.splits.hash_bucket`, on the normalised name), ``test`` otherwise; no
package has questions in both. Each asks about one paragraph that alone answers it, in other words
than the paragraph's; at most 3 per package were kept (where more were written, 3 chosen by a hash
of their text, before any model ran on them). A question whose paragraph the installed package no
longer has is dropped with a warning; more than :data:`MAX_MISSING` of a split is an error naming
the versions.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import random
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from qrag_training.data.episode import Episode
from qrag_training.data.splits import hash_bucket

QUESTIONS = Path(__file__).resolve().parent / "techdocs_questions.jsonl"
SOURCE_NAME = "techdocs"
SPLITS = ("val", "test")
#: Share of a split's questions that may have lost their paragraph before loading refuses.
MAX_MISSING = 0.10
MIN_CHARS, MAX_CHARS = 80, 1500
#: Distributions whose descriptions form the pool (normalised names): every package in the
#: environment ``.ci/setup`` makes whose description has a prose paragraph, less this project, the
#: model and data packages its benchmarks read, and two forks whose descriptions repeat those of
#: httpx and httpcore (httpx2, httpcore2).
_PACKAGE_NAMES = """
    absl-py accelerate aiohappyeyeballs aiohttp aiosignal aiosqlite annotated-doc
    annotated-types anyio attrs banks bm25s certifi charset-normalizer click cloudpickle
    colorama contourpy dataclasses-json defusedxml dirtyjson distro einops faiss-cpu filetype
    fonttools frozenlist fsspec gguf greenlet griffe grpcio h11 h2 hf-xet hpack httpcore httpx
    huggingface-hub hydra-core hyperframe hypothesis idna iniconfig jinja2 joblib jsonpatch
    kernels langchain-core langchain-protocol langchain-tests langchain-text-splitters langsmith
    llama-index-core llama-index-workflows markdown markdown-it-py markupsafe marshmallow
    matplotlib mdurl ml-dtypes mpmath multidict mypy-extensions narwhals nest-asyncio networkx
    nltk numpy omegaconf onnx onnxruntime openvino openvino-telemetry orjson packaging pillow
    pip platformdirs pluggy portalocker propcache psutil py-cpuinfo2 pydantic pydantic-core
    pygments pyparsing pytest pytest-asyncio pytest-benchmark pytest-codspeed pytest-recording
    pytest-socket python-dateutil pyyaml qdrant-client regex requests requests-toolbelt rich
    rotary-embedding-torch ruff scikit-learn scipy sentence-transformers setuptools shellingham
    simsimd sniffio sortedcontainers sqlalchemy sympy syrupy tenacity tensorboard threadpoolctl
    tiktoken tinytag tokenizers tomlkit torch tqdm transformers truststore typer
    typing-extensions typing-inspect tzdata urllib3 uuid-utils vcrpy websockets werkzeug wrapt
    xxhash yarl zstandard
"""
PACKAGES: tuple[str, ...] = tuple(_PACKAGE_NAMES.split())

#: A Markdown code fence (backticks only: a run of tildes is also a reST underline).
_FENCE = re.compile(r"^[ \t]*(`{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_BLANK = re.compile(r"\n[ \t]*\n")
_CHANGELOG = re.compile(
    r"(?i)^\W*(changelog|change log|changes|history|release history|release notes|news)\b"
)
_MD_HEADING = re.compile(r"#+\s")
#: Headings that go on with a changelog: a release, or a part of GitHub's release notes.
_RELEASE = re.compile(r"(?i)v?\d|what's changed|new contributors")
_UNDERLINE = re.compile(r"([=\-~^*+#`'\"])\1{2,}")
_LINK = re.compile(r"\]\([^)]*\)|<https?://[^>]*>|https?://\S+")
#: Paragraph openings that mark markup, not prose: HTML, tables, reST directives, prompts,
#: headings, images and badges.
_MARKUP = ("<", "|", "+-", "..", ">>>", "$ ", "#", "!", "[!", "===", "---", ":")


def normalise(name: str) -> str:
    """A distribution name as PEP 503 normalises it (``Jinja2`` -> ``jinja2``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def split_of_package(package: str) -> str:
    """``val`` or ``test``, by a hash of the package's normalised name."""
    return SPLITS[hash_bucket(normalise(package), 2)]


def paragraph_sha(text: str) -> str:
    """SHA-256 (hex) of a paragraph's whitespace-normalised text."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


def _documentation(description: str) -> str:
    """The description without its changelog sections: from a heading such as "Changelog" or
    "History" (Markdown ``#`` or underlined reST) to the next heading of its level or above that
    does not name a release ("v1.2.0", "1.5.0 (2024-10-22)", "New Contributors")."""
    lines = description.replace("\r\n", "\n").split("\n")
    rst_levels: list[str] = []  # reST ranks underline characters by first use
    kept: list[str] = []
    skipping: int | None = None
    for i, line in enumerate(lines):
        level = None
        if _MD_HEADING.match(line):
            level = len(line) - len(line.lstrip("#"))
        elif (
            i + 1 < len(lines)
            and line.strip()
            and _UNDERLINE.fullmatch(lines[i + 1].strip())
            and not _UNDERLINE.fullmatch(line.strip())
        ):
            mark = lines[i + 1].strip()[0]
            if mark not in rst_levels:
                rst_levels.append(mark)
            level = rst_levels.index(mark) + 1
        title = line.lstrip("# ")
        if level is not None and skipping is not None and level <= skipping:
            skipping = None if not _RELEASE.match(title) else skipping
        if level is not None and skipping is None and _CHANGELOG.match(title):
            skipping = level
        if skipping is None:
            kept.append(line)
    return "\n".join(kept)


def _is_prose(block: str) -> bool:
    text = " ".join(block.split())
    if not MIN_CHARS <= len(text) <= MAX_CHARS or block[:1] in " \t":
        return False  # an indented block is reST's code (or a quote of it)
    if text.startswith(_MARKUP) or "[![" in text or ".. image::" in text:
        return False
    if any(line.lstrip().startswith(("|", "+-", "===")) for line in block.split("\n")):
        return False
    words = _LINK.sub(" ", text).split()
    plain = [w for w in words if w.strip(".,;:!?()*_'\"").isalpha()]
    return len(plain) >= 12 and len(plain) >= 0.6 * len(words)


def prose_paragraphs(description: str) -> list[str]:
    """The prose paragraphs of a package description, whitespace-normalised, in order."""
    body = _documentation(_FENCE.sub("\n", description))
    blocks = [b.strip("\n") for b in _BLANK.split(body)]
    return [" ".join(b.split()) for b in blocks if _is_prose(b)]


@dataclass(frozen=True)
class Document:
    """One paragraph of the pool."""

    id: str
    package: str
    version: str
    text: str


def installed_version(package: str) -> str | None:
    """The installed version of a distribution, ``None`` where it is not installed."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def read_corpus(packages: tuple[str, ...] = PACKAGES) -> list[Document]:
    """Every prose paragraph of the installed packages' descriptions, each once (a package that
    is not installed contributes nothing; the questions' check reports it)."""
    seen: set[str] = set()
    docs: list[Document] = []
    for package in packages:
        version = installed_version(package)
        if version is None:
            continue
        description = importlib.metadata.metadata(package).get_payload() or ""
        for index, text in enumerate(prose_paragraphs(description)):
            if text not in seen:
                seen.add(text)
                docs.append(Document(f"{package}-{index}", package, version, text))
    return docs


def read_questions(path: Path | None = None) -> list[dict]:
    """The question records of the JSONL file (``None``: :data:`QUESTIONS`), in file order."""
    with (QUESTIONS if path is None else path).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def load_techdocs(
    split: str,
    n: int | None = None,
    seed: int = 0,
    path: Path | None = None,
    packages: tuple[str, ...] = PACKAGES,
) -> list[Episode]:
    """Pooled single-hop episodes: one split's questions over every paragraph of the pool.

    Args:
        split: ``val`` or ``test``.
        n: keep a seeded random sample of this many questions (``None``: all of the split).
        seed: seed of that sample.
        path: the question file (``None``: :data:`QUESTIONS`).
        packages: the distributions whose descriptions form the pool.

    Returns:
        Episodes ``techdocs-<package>-<line>``; chunks are the pool's paragraphs
        (``package: text``), support the question's paragraph.

    Raises:
        ValueError: If ``split`` is unknown, or more than :data:`MAX_MISSING` of its questions'
            paragraphs are not in the installed packages.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown techdocs split {split!r}; valid: {', '.join(SPLITS)}")
    docs = read_corpus(packages)
    where = {paragraph_sha(d.text): i for i, d in enumerate(docs)}
    chunks = [f"{d.package}: {d.text}" for d in docs]
    titles = [d.package for d in docs]
    asked = [(line, q) for line, q in enumerate(read_questions(path)) if q["split"] == split]
    missing = [q for _, q in asked if q["paragraph_sha"] not in where]
    if len(missing) > MAX_MISSING * len(asked):
        raise ValueError(_drift_message(missing, len(asked)))
    if missing:
        warnings.warn(_drift_message(missing, len(asked)), stacklevel=2)
    episodes = [
        Episode(
            id=f"techdocs-{q['package']}-{line}",
            question=q["question"],
            chunks=chunks,
            support=[where[q["paragraph_sha"]]],
            titles=titles,
            meta={"source": SOURCE_NAME, "package": q["package"], "split": split},
        )
        for line, q in asked
        if q["paragraph_sha"] in where
    ]
    if n is not None and n < len(episodes):
        keep = sorted(random.Random(seed).sample(range(len(episodes)), n))
        episodes = [episodes[i] for i in keep]
    return episodes


def _drift_message(missing: list[dict], asked: int) -> str:
    """Which questions lost their paragraph, with the versions written for and installed."""
    versions = sorted(
        {(q["package"], q["version"], installed_version(q["package"]) or "none") for q in missing}
    )
    listed = ", ".join(f"{p} {want} (installed: {have})" for p, want, have in versions)
    return (
        f"{len(missing)} of {asked} techdocs questions ask for a paragraph the installed "
        f"packages lack; written for {listed}. Build the environment with `bash .ci/setup`, and "
        f"if it installs newer releases, install the versions named here"
    )
