"""A checked draft as one custom-JSONL training line (``training/DATA_FORMAT.md``).

A line gives ``documents``: an excerpt of each source document (its whole text when it has at most
``pool_chunks`` chunks, else the run of chunks around the question's chunk, under the document's
own id), topped up to ``pool_chunks`` chunks with other documents of the same cluster
(:mod:`qrag_training.questions.corpus`: one side of the split), those that
share the most names with the sources first (the likeliest confusers: the hard negatives the
trainer ranks among), then seeded random ones; a document holding a support text is never added
(it would be an unlabelled positive). ``support_text`` holds each chunk's sentence. The line is
split exactly as the loader will split it and kept only if every support text marks exactly one
chunk, the answer is in the last one and a bridge's name in both.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from qrag_training.data.custom import split_document
from qrag_training.questions.corpus import Corpus
from qrag_training.questions.drafts import Draft
from qrag_training.questions.settings import QuestionSettings
from qrag_training.questions.spans import contains_phrase, normalise

Excerpt = tuple[int, int, int]
"""A document and the half-open range of its chunks a line holds."""


def excerpt_text(corpus: Corpus, excerpt: Excerpt) -> str:
    """The text of chunks ``lo .. hi - 1`` of a document: the document's own text between them
    (the whole text for all of them), else the chunks joined by blank lines."""
    doc, lo, hi = excerpt
    ids = corpus.doc_chunks[doc]
    text = corpus.documents[doc].text
    if lo == 0 and hi == len(ids):
        return text
    first, last = corpus.chunks[ids[lo]], corpus.chunks[ids[hi - 1]]
    if first.start is not None and last.start is not None and last.start >= first.start:
        return text[first.start : last.start + len(last.text)]
    return "\n\n".join(corpus.chunks[c].text for c in ids[lo:hi])


def source_excerpts(corpus: Corpus, chunks: Sequence[int], pool_chunks: int) -> list[Excerpt]:
    """The excerpts holding a draft's chunks: whole documents, or windows of ``pool_chunks``."""
    out: list[Excerpt] = []
    for c in chunks:
        doc, position = corpus.chunks[c].doc, corpus.chunks[c].position
        size = len(corpus.doc_chunks[doc])
        if any(d == doc and lo <= position < hi for d, lo, hi in out):
            continue
        lo = max(0, min(position - pool_chunks // 2, size - pool_chunks))
        out.append((doc, lo, min(size, lo + pool_chunks)))
    return out


class LineBuilder:
    """Turns drafts into lines (see the module docstring); one per corpus and settings."""

    def __init__(self, corpus: Corpus, settings: QuestionSettings, rng: random.Random) -> None:
        self.corpus = corpus
        self.settings = settings
        self.rng = rng
        self.cluster_docs: dict[int, list[int]] = {}
        for d, cluster in enumerate(corpus.clusters):
            self.cluster_docs.setdefault(cluster, []).append(d)
        self.name_docs: dict[str, set[int]] = {}
        for c, names in enumerate(corpus.names):
            for name in names:
                self.name_docs.setdefault(name, set()).add(corpus.chunks[c].doc)
        self._normalised = [normalise(d.text) for d in corpus.documents]

    def _fill(self, sources: set[int], need: int, marks: Sequence[str]) -> list[Excerpt]:
        """Other documents of the sources' cluster, most shared names first, ``need`` chunks
        (none when the sources' excerpts already hold ``pool_chunks`` or more)."""
        if need <= 0:
            return []
        corpus = self.corpus
        cluster = corpus.clusters[next(iter(sources))]
        shared: Counter[int] = Counter()
        for d in sources:
            for c in corpus.doc_chunks[d]:
                for name in corpus.names[c]:
                    shared.update(self.name_docs.get(name, ()))
        ranked = sorted(
            (d for d in shared if d not in sources and corpus.clusters[d] == cluster),
            key=lambda d: (-shared[d], self.rng.random()),
        )
        pool = self.cluster_docs[cluster]
        extra = self.rng.sample(pool, min(len(pool), 2 * need + len(sources)))
        out: list[Excerpt] = []
        used = set(sources)
        for d in [*ranked, *extra]:
            if need <= 0:
                break
            if d in used or any(m in self._normalised[d] for m in marks):
                continue
            used.add(d)
            take = min(need, len(corpus.doc_chunks[d]))
            out.append((d, 0, take))
            need -= take
        return out

    def line(self, draft: Draft, line_id: str) -> dict[str, Any] | str:
        """The JSON object of a draft, or why it cannot be one (a support text that marks no
        chunk, or more than one, once the line is split as the loader splits it)."""
        corpus, settings = self.corpus, self.settings
        marks = [normalise(t) for t in draft.support_text]
        excerpts = source_excerpts(corpus, draft.chunks, settings.pool_chunks)
        have = sum(hi - lo for _, lo, hi in excerpts)
        sources = {d for d, _, _ in excerpts}
        excerpts += self._fill(sources, settings.pool_chunks - have, marks)
        self.rng.shuffle(excerpts)
        documents, chunks = [], []
        for excerpt in excerpts:
            doc = corpus.documents[excerpt[0]]
            text = excerpt_text(corpus, excerpt)
            documents.append(
                {"id": doc.id, **({"title": doc.title} if doc.title else {}), "text": text}
            )
            chunks += split_document(
                text, settings.chunk_size, settings.chunk_overlap, settings.splitter
            )
        hits = [[i for i, c in enumerate(chunks) if m in normalise(c)] for m in marks]
        if any(len(h) != 1 for h in hits) or len({h[0] for h in hits}) != len(hits):
            return "support text marks no chunk or several"
        if draft.answer is not None and not contains_phrase(chunks[hits[-1][0]], draft.answer):
            return "answer not in its chunk once split"
        if draft.name is not None and not all(
            contains_phrase(chunks[h[0]], draft.name) for h in hits
        ):
            return "bridge name not in both chunks once split"
        record: dict[str, Any] = {"id": line_id, "question": draft.question}
        if draft.answer is not None:
            record["answer"] = draft.answer
        record["documents"] = documents
        record["support_text"] = list(draft.support_text)
        record["meta"] = {
            "kind": draft.kind,
            "writer": draft.writer,
            "side": corpus.sides[corpus.chunks[draft.chunks[0]].doc],
            "source": [corpus.documents[corpus.chunks[c].doc].id for c in draft.chunks],
        }
        return record
