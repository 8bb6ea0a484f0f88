"""Answer candidates, names and key phrases found in a sentence, without a language model.

No NLP library with an English model is installed with the project: spaCy is not a dependency,
and NLTK (present through llama-index-core) ships no tagger or entity-chunker data, which it
would download at run time (these machines are offline). So names are found by a plain
heuristic: runs of capitalised words (joined by "of", "the", "de", ...), a sentence's first word
counted only when the text never writes it in lower case; numbers and years by pattern; key
phrases RAKE-style (Rose et al. 2010): the runs of words between stop words and punctuation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qrag_integrations.core.stopwords import ENGLISH_STOP_WORDS
from qrag_training.data.noise import split_sentences

NAME, YEAR, NUMBER = "name", "year", "number"
_WORD = re.compile(r"[^\W_][\w'’.\-]*[^\W_]|[^\W_]")
_CONNECTORS = frozenset({"of", "the", "de", "du", "da", "del", "von", "van", "la", "le", "and"})
_NUMBER = re.compile(
    r"(?<![\w.])(?<!\d,)(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\w|[.,]\d)"
    r"(?:\s?(?:%|percent|per cent|million|billion|thousand))?"
)
_PHRASE_BREAK = re.compile(r"[^\w\s'’\-]")
_POSSESSIVE = re.compile(r"['’]s?$")
_CONTENT = re.compile(r"[a-z0-9][a-z0-9'\-]+")


@dataclass(frozen=True)
class Span:
    """A stretch of a sentence that may serve as an answer or a bridge name."""

    text: str
    """The words as written."""
    start: int
    """Offset in the sentence."""
    kind: str
    """``name``, ``year`` or ``number``."""

    @property
    def end(self) -> int:
        """Offset just past the span."""
        return self.start + len(self.text)


def sentences(text: str) -> list[str]:
    """The sentences of a chunk (:func:`qrag_training.data.noise.split_sentences`)."""
    return split_sentences(text)


def lower_words(text: str) -> set[str]:
    """Words the text writes in lower case (a sentence's first word written so elsewhere is no name)."""
    return {w for w in (m.group() for m in _WORD.finditer(text)) if w.islower()}


def _is_capitalised(word: str) -> bool:
    return word[0].isupper() and not word.isupper() or (word.isupper() and len(word) > 1)


def names(sentence: str, lowercase: set[str]) -> list[Span]:
    """Runs of capitalised words (see the module docstring), outer connectors stripped."""
    words = list(_WORD.finditer(sentence))
    found: list[Span] = []
    run: list[re.Match[str]] = []

    def close() -> None:
        while run and run[-1].group().lower() in _CONNECTORS:
            run.pop()
        if run:
            first = run[0].group()
            if (
                run[0].start() == words[0].start()
                and len(run) == 1
                and (first.lower() in ENGLISH_STOP_WORDS or first.lower() in lowercase)
            ):
                run.clear()
                return
            while run and run[0].group().lower() in ENGLISH_STOP_WORDS:
                run.pop(0)
            if run and any(_is_capitalised(m.group()) for m in run):
                start, end = run[0].start(), run[-1].end()
                text = _POSSESSIVE.sub("", sentence[start:end])
                found.append(Span(text, start, NAME))
        run.clear()

    for i, m in enumerate(words):
        word = m.group()
        adjacent = not run or sentence[run[-1].end() : m.start()].strip() == ""
        if not adjacent:
            close()
        capital = word[0].isalpha() and _is_capitalised(word)
        if capital or (run and word.lower() in _CONNECTORS and i + 1 < len(words)):
            run.append(m)
        else:
            close()
    close()
    return [s for s in found if len(s.text) > 1]


def numbers(sentence: str) -> list[Span]:
    """Numbers (with %, million, ...) and years (1000-2099 alone)."""
    out = []
    for m in _NUMBER.finditer(sentence):
        text = m.group()
        kind = YEAR if re.fullmatch(r"1\d{3}|20\d{2}", text) else NUMBER
        out.append(Span(text, m.start(), kind))
    return out


def answer_spans(sentence: str, lowercase: set[str]) -> list[Span]:
    """Names and numbers of a sentence, in order of appearance, none overlapping another."""
    spans = sorted(
        names(sentence, lowercase) + numbers(sentence), key=lambda s: (s.start, -len(s.text))
    )
    kept: list[Span] = []
    for s in spans:
        if not kept or s.start >= kept[-1].end:
            kept.append(s)
    return kept


def key_phrases(sentence: str, max_words: int = 3) -> list[str]:
    """RAKE-style phrases: runs of non-stop words (3+ characters, a letter among them), at
    most ``max_words``."""
    phrases: list[str] = []
    for piece in _PHRASE_BREAK.split(sentence):
        run: list[str] = []
        for word in piece.split() + [""]:
            if (
                len(word) >= 3
                and word.lower() not in ENGLISH_STOP_WORDS
                and any(ch.isalpha() for ch in word)
            ):
                run.append(word)
                continue
            if run:
                phrases.append(" ".join(run[:max_words]))
            run = []
    return phrases


def content_words(text: str) -> set[str]:
    """Lower-case words of 2+ characters that are not stop words (validation compares these)."""
    return {w for w in _CONTENT.findall(text.lower()) if w not in ENGLISH_STOP_WORDS}


def normalise(text: str) -> str:
    """Case-folded, runs of whitespace as one space (the custom loader's support matching)."""
    return " ".join(text.split()).casefold()


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` as whole words, ignoring case and spacing."""
    pattern = r"(?<!\w)" + re.escape(normalise(phrase)) + r"(?!\w)"
    return re.search(pattern, normalise(text)) is not None
