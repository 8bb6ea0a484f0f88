"""The one check of keyword options: a name nobody reads is refused, never silently ignored.

Every entry point that takes ``**options`` (the retriever's constructors, ``invoke`` / ``batch``
/ ``retrieve`` and their async twins, the store constructors, the embedding adapters,
``build_reader``) passes them through :func:`check_options` before doing any work.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from qrag_integrations.core.errors import UnknownOptionError

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
