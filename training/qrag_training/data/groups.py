"""Held-out by document: the key the train / eval hash split uses for each custom-JSONL line.

Splitting by line puts two questions about the same article on both sides of the split, so the
held-out numbers reward memorising the article. ``group_by`` chooses what keeps lines together:

- ``"auto"`` (default): lines that share a document are one group. A document is known by its
  ``id`` when the line gives ``documents`` with ids, else by its text; a line that gives
  ``chunks`` is one document made of those chunks (two lines with the same chunk list are one
  group). Groups are the connected components of "shares a document with", so a document's chunks
  are never on both sides.
- ``"line"``: every line is its own group (the line ``id``).
- ``"meta.<field>"``: lines with the same value of ``meta[field]`` are one group (e.g. an article
  id you already have).

The key of a group is a stable string (the smallest document key of its component, or the meta
value), stored as ``episode.meta["split_key"]``; :func:`qrag_training.data.splits.split_of` of that
key decides the split, so it is the same on every machine. Adding lines can join two groups into
one (a new line that shares documents with both) and so move the lines of one of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from qrag_training.data.episode import Episode

GROUP_AUTO, GROUP_LINE, GROUP_META_PREFIX = "auto", "line", "meta."
#: ``episode.meta`` entries the custom loader fills for grouping.
DOCUMENT_KEYS = "document_keys"
SPLIT_KEY = "split_key"


def text_key(kind: str, *texts: str) -> str:
    """A short stable key of some texts (sha1 of their NUL-joined UTF-8)."""
    digest = hashlib.sha1("\x00".join(texts).encode("utf-8")).hexdigest()[:20]
    return f"{kind}:{digest}"


def check_group_by(group_by: str) -> None:
    """Raise ValueError unless ``group_by`` is "auto", "line" or "meta.<field>"."""
    if group_by in (GROUP_AUTO, GROUP_LINE):
        return
    if group_by.startswith(GROUP_META_PREFIX) and len(group_by) > len(GROUP_META_PREFIX):
        return
    raise ValueError(f"group_by must be 'auto', 'line' or 'meta.<field>', got {group_by!r}")


def assign_split_keys(episodes: Sequence[Episode], group_by: str = GROUP_AUTO) -> None:
    """Set ``meta["split_key"]`` of every episode (see the module docstring).

    Raises:
        ValueError: an unknown ``group_by``, or a line without the ``meta`` field it names.
    """
    check_group_by(group_by)
    if group_by == GROUP_LINE:
        for e in episodes:
            e.meta[SPLIT_KEY] = e.id
    elif group_by.startswith(GROUP_META_PREFIX):
        field = group_by[len(GROUP_META_PREFIX) :]
        for e in episodes:
            if field not in e.meta:
                raise ValueError(
                    f"group_by={group_by!r}: line {e.meta.get('line', '?')} (id {e.id!r}) has no "
                    f"meta field {field!r}"
                )
            e.meta[SPLIT_KEY] = f"meta:{e.meta[field]}"
    else:
        for e, key in zip(episodes, _component_keys(episodes)):
            e.meta[SPLIT_KEY] = key


def document_keys(episode: Episode) -> list[str]:
    """The keys of a line's documents: its documents' ``id`` or text, or one key for its
    ``chunks``."""
    return episode.meta.get(DOCUMENT_KEYS) or [text_key("chunks", *episode.chunks)]


def count_documents(episodes: Sequence[Episode]) -> int:
    """How many distinct documents the lines give (:func:`document_keys`)."""
    return len({key for e in episodes for key in document_keys(e)})


def _component_keys(episodes: Sequence[Episode]) -> list[str]:
    """The smallest document key of each episode's connected component (union-find)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:  # the smaller key becomes the root, so a root is its component's minimum
            parent[max(ra, rb)] = min(ra, rb)

    docs = [document_keys(e) for e in episodes]
    for keys in docs:
        for k in keys:
            parent.setdefault(k, k)
        for k in keys[1:]:
            union(keys[0], k)
    return [find(keys[0]) for keys in docs]
