"""Questions without a language model: wh-questions, topic questions and name bridges.

- **single** (cloze turned wh-question): the clause around a name or number of a sentence, that
  answer replaced by "what" / "what year" / "how many" / "what percentage".
- **topic** (title question): "What does <title> say about <p1> and <p2>?" with the chunk's two
  rarest key phrases (fewest chunks of the corpus name them); no answer, the sentence is support.
- **bridge**: two chunks (of one cluster of documents, one side of the split) that name the same
  rare name; the clause
  around it in the first, then a wh-question from the second with its answer and the name both
  replaced: "Rollo was granted it by the king; it lies in what?". The name appears in neither
  question nor answer, so the first chunk is needed to find the second.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence

from qrag_integrations.core.stopwords import ENGLISH_STOP_WORDS
from qrag_training.questions.corpus import Corpus, name_index
from qrag_training.questions.drafts import BRIDGE, SINGLE, TOPIC, Draft, clean_question
from qrag_training.questions.spans import (
    NAME,
    NUMBER,
    YEAR,
    Span,
    answer_spans,
    contains_phrase,
    key_phrases,
    lower_words,
    normalise,
    sentences,
)

MIN_CLAUSE_WORDS, MAX_CLAUSE_WORDS = 8, 24
_CLAUSE_BREAK = re.compile(r"[,;:]\s+|\s+[-–—]\s+")
_PARENTHESES = re.compile(r"\s*\([^()]*\)")
_NEXT_WORD = re.compile(r"\s+([a-z]+)")
_WORDS = re.compile(r"\S+")
#: An article right before a replaced span ("the what language" reads "what language").
_ARTICLE = re.compile(r"(?:(?<=\s)|^)(?:the|a|an)\s+$", re.IGNORECASE)


def wh_phrase(span: Span, sentence: str) -> str:
    """What replaces an answer: "what year", "what percentage", "how many" or "what"."""
    if span.kind == YEAR:
        return "what year"
    if span.kind == NUMBER:
        if "%" in span.text or "percent" in span.text or "per cent" in span.text:
            return "what percentage"
        return "how many" if _NEXT_WORD.match(sentence, span.end) else "what number"
    return "what"


def clause_around(sentence: str, start: int, end: int) -> tuple[int, int]:
    """Offsets of the clause holding ``sentence[start:end]``, widened by neighbouring clauses to
    at least :data:`MIN_CLAUSE_WORDS` words and cut to at most :data:`MAX_CLAUSE_WORDS`."""
    cuts = [0, *(m.end() for m in _CLAUSE_BREAK.finditer(sentence)), len(sentence) + 1]
    bounds = [(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]
    lo = max(i for i, (a, _) in enumerate(bounds) if a <= start)
    hi = min(i for i, (_, b) in enumerate(bounds) if b >= end)
    left, right = bounds[lo][0], bounds[hi][1]
    while len(sentence[left:right].split()) < MIN_CLAUSE_WORDS and (lo > 0 or hi < len(bounds) - 1):
        if lo > 0:
            lo -= 1
        else:
            hi += 1
        left, right = bounds[lo][0], bounds[hi][1]
    words = list(_WORDS.finditer(sentence))
    before = [m for m in words if m.start() >= left and m.end() <= start]
    after = [m for m in words if m.start() >= end and m.end() <= right]
    keep = MAX_CLAUSE_WORDS // 2
    if len(before) > keep:
        left = before[-keep].start()
    if len(after) > keep:
        right = after[keep - 1].end()
    return left, min(right, len(sentence))


def substitute(sentence: str, left: int, right: int, swaps: Sequence[tuple[Span, str]]) -> str:
    """``sentence[left:right]`` with each span replaced by its text, as a question; stop words
    left dangling at the end of a cut clause ("... when tin and") are dropped."""
    out, cursor = [], left
    for span, text in sorted(swaps, key=lambda s: s[0].start):
        out += [_ARTICLE.sub("", sentence[cursor : span.start]), text]
        cursor = span.end
    tail = sentence[cursor:right].rstrip(" ,;:-–—.!?").split(" ")
    while len(tail) > 1 and tail[-1].lower() in ENGLISH_STOP_WORDS:
        tail.pop()
    out.append(" ".join(tail))
    return clean_question("".join(out).strip(" ,;:-–—"))


def _plain(sentence: str) -> str:
    """A sentence without parenthetical asides (they break clauses and rarely hold answers)."""
    return _PARENTHESES.sub("", sentence)


def single_question(sentence: str, span: Span) -> str:
    """The wh-question of one answer span (:func:`clause_around`, :func:`wh_phrase`)."""
    left, right = clause_around(sentence, span.start, span.end)
    return substitute(sentence, left, right, [(span, wh_phrase(span, sentence))])


def phrase_frequencies(corpus: Corpus) -> Counter[str]:
    """How many chunks name each key phrase (normalised)."""
    counts: Counter[str] = Counter()
    for chunk in corpus.chunks:
        counts.update({normalise(p) for s in sentences(chunk.text) for p in key_phrases(s)})
    return counts


def _topic(corpus: Corpus, chunk: int, frequencies: Counter[str]) -> Draft | None:
    title = corpus.documents[corpus.chunks[chunk].doc].title
    found: dict[str, tuple[str, str]] = {}
    for sentence in sentences(corpus.chunks[chunk].text):
        for phrase in key_phrases(_plain(sentence)):
            found.setdefault(normalise(phrase), (phrase, sentence))
    ranked = sorted(found, key=lambda p: (frequencies[p], -len(p.split()), p))
    picked: list[str] = []
    for p in ranked:
        if not any(p in q or q in p for q in picked) and not (title and p in normalise(title)):
            picked.append(p)
        if len(picked) == 2:
            break
    if len(picked) < 2:
        return None
    (first, sentence), (second, _) = found[picked[0]], found[picked[1]]
    about = f"What does {title} say about" if title else "What is said about"
    return Draft(TOPIC, f"{about} {first} and {second}?", None, (chunk,), (sentence,))


def single_drafts(
    corpus: Corpus,
    chunk: int,
    count: int,
    rng: random.Random,
    frequencies: Counter[str] | None = None,
) -> list[Draft]:
    """Up to ``count`` questions from one chunk: wh-questions on answers of different sentences
    first, and (with ``frequencies``, one slot kept when ``count`` > 1) a topic question."""
    text = corpus.chunks[chunk].text
    lowercase = lower_words(corpus.documents[corpus.chunks[chunk].doc].text)
    by_sentence = []
    for sentence in sentences(text):
        plain = _plain(sentence)
        spans = answer_spans(plain, lowercase)
        rng.shuffle(spans)
        if spans:
            by_sentence.append((sentence, plain, spans))
    rng.shuffle(by_sentence)
    topic = _topic(corpus, chunk, frequencies) if frequencies is not None else None
    wh_count = count - 1 if topic is not None and count > 1 else count
    drafts: list[Draft] = []
    answers: set[str] = set()
    while len(drafts) < wh_count and any(spans for _, _, spans in by_sentence):
        for sentence, plain, spans in by_sentence:
            if not spans or len(drafts) >= wh_count:
                continue
            span = spans.pop()
            if normalise(span.text) in answers:
                continue
            answers.add(normalise(span.text))
            question = single_question(plain, span)
            drafts.append(Draft(SINGLE, question, span.text, (chunk,), (sentence,)))
    if topic is not None and len(drafts) < count:
        drafts.append(topic)
    return drafts


def _sentence_with(text: str, name: str) -> list[str]:
    return [s for s in sentences(text) if contains_phrase(_plain(s), name)]


def _find(plain: str, name: str, lowercase: set[str]) -> Span | None:
    for span in answer_spans(plain, lowercase):
        if span.kind == NAME and normalise(span.text) == name:
            return span
    return None


def _bridge(corpus: Corpus, first: int, second: int, name: str) -> Draft | None:
    """The bridge question from ``first`` (names ``name``) to ``second`` (names it, answers)."""
    docs = corpus.documents
    low_first = lower_words(docs[corpus.chunks[first].doc].text)
    low_second = lower_words(docs[corpus.chunks[second].doc].text)
    for sentence_b in _sentence_with(corpus.chunks[second].text, name):
        plain_b = _plain(sentence_b)
        link_b = _find(plain_b, name, low_second)
        if link_b is None:
            continue
        answers = [
            s
            for s in answer_spans(plain_b, low_second)
            if s != link_b and name not in normalise(s.text) and normalise(s.text) not in name
        ]
        for answer in answers:
            lo, hi = min(answer.start, link_b.start), max(answer.end, link_b.end)
            left_b, right_b = clause_around(plain_b, lo, hi)
            if len(plain_b[left_b:right_b].split()) > 2 * MAX_CLAUSE_WORDS:
                continue
            swaps = [(answer, wh_phrase(answer, plain_b)), (link_b, "it")]
            asked = substitute(plain_b, left_b, right_b, swaps)
            for sentence_a in _sentence_with(corpus.chunks[first].text, name):
                plain_a = _plain(sentence_a)
                link_a = _find(plain_a, name, low_first)
                if link_a is None:
                    continue
                left_a, right_a = clause_around(plain_a, link_a.start, link_a.end)
                described = substitute(plain_a, left_a, right_a, [(link_a, "it")])
                question = clean_question(f"{described[:-1]}; {asked[:1].lower()}{asked[1:]}")
                return Draft(
                    BRIDGE,
                    question,
                    answer.text,
                    (first, second),
                    (sentence_a, sentence_b),
                    name=link_b.text,
                )
    return None


def bridge_drafts(corpus: Corpus, limit: int, max_chunks: int, rng: random.Random) -> list[Draft]:
    """Up to ``limit`` bridge questions, at most one per name; a name qualifies when 2 to
    ``max_chunks`` chunks name it. Chunk pairs of two documents are tried before pairs inside
    one document, and both chunks are always of one cluster (one side of the split)."""
    index = [(n, c) for n, c in sorted(name_index(corpus).items()) if 2 <= len(c) <= max_chunks]
    rng.shuffle(index)
    drafts: list[Draft] = []
    for name, chunks in index:
        if len(drafts) >= limit:
            break
        pairs = [
            (a, b)
            for a in chunks
            for b in chunks
            if a != b and corpus.cluster_of_chunk(a) == corpus.cluster_of_chunk(b)
        ]
        rng.shuffle(pairs)
        pairs.sort(key=lambda p: corpus.chunks[p[0]].doc == corpus.chunks[p[1]].doc)
        for first, second in pairs:
            draft = _bridge(corpus, first, second, name)
            if draft is not None:
                drafts.append(draft)
                break
    return drafts
