"""Checks of the retriever's public inputs: each refuses a bad value with a :class:`QRAGError`
naming it, before any work is done (framework-free).

Keyword options have one check, :func:`check_options`: a name nobody reads is refused, never
silently ignored. Every entry point that takes ``**options`` (the retriever's constructors,
``invoke`` / ``batch`` / ``retrieve`` and their async twins, the store constructors, the embedding
adapters, ``build_reader``) passes them through it before doing any work.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from qrag_integrations.core.errors import QRAGError, UnknownOptionError


def check_k(k: Any) -> None:
    """``k`` must be an ``int >= 1`` (not a bool, a float or a string)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise QRAGError(f"k must be an integer >= 1, got {k!r}")


def check_query(query: Any) -> None:
    """A query must be a non-blank string of valid Unicode."""
    if not isinstance(query, str):
        several = isinstance(query, (list, tuple))
        hint = "; search(questions) and batch(questions) take several" if several else ""
        raise QRAGError(f"query must be a string, got {type(query).__name__}{hint}")
    if not query.strip():
        raise QRAGError("query is empty")
    check_unicode(query, "query")


def check_list(value: Any, what: str, items: str, hint: str = "") -> list[Any]:
    """``value`` as a list, or a :class:`QRAGError` naming the list of ``items`` expected (a bare
    string, a mapping or something that is not a collection is refused; ``hint`` is appended)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        got = "a single string" if isinstance(value, str) else type(value).__name__
        raise QRAGError(f"{what} must be a list of {items}, got {got}{hint}")
    return list(value)


def check_queries(queries: Any, method: str = "search") -> list[str]:
    """Several questions: a list of non-blank strings (a single string names ``invoke``)."""
    queries = check_list(
        queries,
        f"{method}'s questions",
        "strings",
        "; invoke(question) and retrieve(question) take one string, or pass [question]"
        if isinstance(queries, str)
        else "",
    )
    for q in queries:
        check_query(q)
    return queries


def check_path(path: Any, what: str = "path") -> None:
    """A folder or file path: a ``str`` or an ``os.PathLike``."""
    if not isinstance(path, (str, os.PathLike)):
        raise QRAGError(f"{what} must be a str or os.PathLike, got {type(path).__name__}")


def check_optional_str(value: Any, what: str) -> None:
    """``None`` or a string."""
    if value is not None and not isinstance(value, str):
        raise QRAGError(f"{what} must be a string or None, got {type(value).__name__}")


def check_unicode(text: str, what: str) -> None:
    """Refuse strings the tokenizer cannot take (lone surrogates, e.g. from bad decoding)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QRAGError(
            f"{what} is not valid Unicode ({exc.reason} at position {exc.start})"
        ) from None


def check_stop_threshold(threshold: Any) -> None:
    """A stop threshold is ``None`` or a real number (not a bool, not NaN)."""
    if threshold is None:
        return
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or math.isnan(threshold)
    ):
        raise QRAGError(f"stop_threshold must be a number or None, got {threshold!r}")


def check_texts(texts: Any) -> list[str]:
    """Chunk texts as a list; a bare string or an item that is not a string is refused."""
    if isinstance(texts, str):
        raise QRAGError(
            "texts must be a sequence of strings, not a single string (pass [text] for one)"
        )
    texts = check_list(texts, "texts", "strings")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise QRAGError(f"texts must be strings; item {bad[0]} is {type(texts[bad[0]]).__name__}")
    blank = [i for i, t in enumerate(texts) if not t.strip()]
    if blank:
        raise QRAGError(
            f"texts must not be blank; {len(blank)} are (first: item {blank[0]}): drop them first "
            "(nothing in them can be found)"
        )
    return texts


def check_device(device: Any) -> None:
    """A device torch knows and this machine has: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"mps"``."""
    import torch  # here, not at import: validation is imported by light modules too

    try:
        where = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise QRAGError(
            f"device {device!r} is not a device name: use 'cpu', 'cuda', 'cuda:N' or 'mps'"
        ) from exc
    if where.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise QRAGError(
                f"device {device!r}: this machine has no CUDA GPU that torch can use "
                f"(torch {torch.__version__}); use device='cpu'"
            )
        if where.index is not None and where.index >= count:
            raise QRAGError(
                f"device {device!r}: this machine has {count} CUDA GPU(s), 0-{count - 1}"
            )
    elif where.type == "mps" and not torch.backends.mps.is_available():
        raise QRAGError(f"device {device!r}: MPS is not available here; use device='cpu'")


def check_chunk_ids(ids: Any) -> list[str]:
    """New chunk ids: :func:`as_ids`, none of them empty."""
    ids = as_ids(ids)
    if not all(ids):
        raise QRAGError("chunk ids must be non-empty strings")
    return ids


def as_ids(ids: Any) -> list[str]:
    """Chunk ids as strings; a bare string or something that is not a collection is refused."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise QRAGError(f"ids must be a list of ids, got {type(ids).__name__}")
    return [str(i) for i in ids]


def check_metadatas(metadatas: Any) -> None:
    """``None`` or a list with one dict (or ``None``) per text; the dicts are checked when added."""
    if metadatas is not None:
        check_list(metadatas, "metadatas", "dicts, one per text")


#: Names other libraries use for our options, suggested when no spelling is close.
SYNONYMS = {
    "where": "filter",
    "filters": "filter",
    "metadata_filter": "filter",
    "top_k": "k",
    "similarity_top_k": "k",
    "n": "k",
    "threshold": "stop_threshold",
}


def suggestion(name: str, candidates: Iterable[str]) -> str | None:
    """The valid name closest to ``name`` (``difflib``), else its synonym if valid, else ``None``."""
    candidates = sorted(set(candidates))
    close = difflib.get_close_matches(name, candidates, n=1)
    if close:
        return close[0]
    synonym = SYNONYMS.get(name)
    return synonym if synonym in candidates else None


def check_options(
    given: Iterable[str], allowed: Iterable[str], where: str, passed_on: Iterable[str] = ()
) -> None:
    """Refuse option names outside ``allowed`` and ``passed_on``.

    Args:
        given: the names passed (e.g. the keys of ``**kwargs``).
        allowed: the options ``where`` takes (listed in the message).
        where: the entry point, for the message (``"QRAGRetriever.invoke"``).
        passed_on: names also accepted because they are handed to a framework (LangChain's
            ``RunnableConfig`` keys), not listed.

    Raises:
        UnknownOptionError: naming each unknown option and the closest valid one.
    """
    allowed = frozenset(allowed)
    accepted = allowed | frozenset(passed_on)
    unknown = [name for name in given if name not in accepted]
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = suggestion(name, accepted)
        parts.append(f"`{name}`" + (f" (did you mean `{close}`?)" if close else ""))
    what = "an unknown option" if len(unknown) == 1 else "unknown options"
    raise UnknownOptionError(
        f"{where} got {what} {', '.join(parts)}; valid options: {', '.join(sorted(allowed)) or 'none'}"
    )
