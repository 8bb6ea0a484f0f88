"""The two framework faces of :class:`~qrag_integrations.frameworks.retriever.QRAGRetriever`.

:class:`LangChainFace` is what LangChain calls (``invoke``, ``ainvoke``, ``batch``, ``abatch``
through ``_get_relevant_documents``), :class:`LlamaIndexFace` what LlamaIndex calls
(``retrieve``, ``aretrieve`` through ``_retrieve``). Both answer from the one framework-free
:meth:`SearchFace.search` and turn its hits into framework objects with
:mod:`~qrag_integrations.frameworks.conversion`; neither touches the model or the index.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever as LCBaseRetriever
from langchain_core.runnables import RunnableConfig
from llama_index.core.retrievers import BaseRetriever as LIBaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import PrivateAttr

from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.search import Hit
from qrag_integrations.core.validation import check_list, check_options, check_query
from qrag_integrations.frameworks.conversion import hit_to_langchain, hit_to_llama_index

logger = logging.getLogger("qrag_integrations")

#: ``invoke`` keyword naming the prefetched results of the ``batch`` call it belongs to.
_BATCH_KEY = "qrag_batch"
#: The per-call search options of ``invoke``, ``batch``, ``retrieve`` and their async twins.
SEARCH_OPTIONS = ("k", "filter", "stop_threshold")
#: Keywords LangChain's ``invoke`` reads or passes on to ``_get_relevant_documents`` (the
#: ``RunnableConfig`` keys and ``verbose``): accepted, not ours to refuse.
LANGCHAIN_KEYWORDS = frozenset(
    RunnableConfig.__required_keys__ | RunnableConfig.__optional_keys__ | {"verbose"}
)
#: The per-call options of the ``retrieve`` / ``aretrieve`` running in this context.
_RETRIEVE_OPTIONS: ContextVar[Mapping[str, Any] | None] = ContextVar(
    "qrag_retrieve_options", default=None
)


class SearchFace(ABC):
    """What both faces answer from."""

    @abstractmethod
    def search(self, queries: Sequence[str], **options: Any) -> list[list[Hit]]:
        """Hits of each question, in pick order; ``options`` are ``k``, ``filter`` and
        ``stop_threshold`` (``None``: the retriever's field)."""

    def _search_one(self, query: Any, options: Mapping[str, Any]) -> list[Hit]:
        """One question's hits. Concurrent calls (a chain's ``batch``, ``asyncio.gather``) search
        side by side: on a 2-core CPU that measured faster than serving them by one search
        (docs/retriever.md, Batches)."""
        return self.search([query], **options)[0]


def _options(kwargs: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The per-call search options of a LangChain call (``invoke(q, k=2, filter=...)``), after
    refusing any keyword that is neither one of them nor LangChain's."""
    check_options(kwargs, SEARCH_OPTIONS, where, passed_on=LANGCHAIN_KEYWORDS | {_BATCH_KEY})
    return {name: kwargs.get(name) for name in SEARCH_OPTIONS}


class LangChainFace(LCBaseRetriever, SearchFace):
    """A LangChain ``BaseRetriever`` over :meth:`search`: per-call ``k``, ``filter`` and
    ``stop_threshold`` (any other keyword but LangChain's own raises
    :class:`~qrag_integrations.core.errors.UnknownOptionError`); ``batch`` runs one search pass for
    all its questions."""

    _prefetched: dict[str, dict[str, list[Hit]]] = PrivateAttr(default_factory=dict)
    """Per running ``batch`` call (keyed by a token passed to ``invoke``): hits by question."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        options = _options(kwargs, f"{type(self).__name__}.invoke")
        hits = self._batch_hits(query, kwargs)
        if hits is None:
            hits = self._search_one(query, options)
        return [hit_to_langchain(h) for h in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: Any, **kwargs: Any
    ) -> list[LCDocument]:
        # The search is CPU/GPU work in torch (which releases the GIL): run it in a worker
        # thread so the event loop keeps serving other tasks.
        options = _options(kwargs, f"{type(self).__name__}.ainvoke")
        hits = self._batch_hits(query, kwargs)
        if hits is None:
            hits = await asyncio.to_thread(self._search_one, query, options)
        return [hit_to_langchain(h) for h in hits]

    def _batch_hits(self, query: Any, kwargs: Mapping[str, Any]) -> list[Hit] | None:
        """The hits a running batch call found for ``query`` (``None``: search it now)."""
        prefetched = self._prefetched.get(kwargs.get(_BATCH_KEY), {})
        return prefetched.get(query) if isinstance(query, str) else None

    def batch(
        self,
        inputs: list[str],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Retrieve for several questions in one search pass (one encoder batch per step).

        The search runs once for every valid question; then LangChain's own ``Runnable.batch``
        invokes the retriever per question (callbacks, ``return_exceptions``, concurrency as
        usual), each answered from that pass. A bad question raises (or, with
        ``return_exceptions=True``, yields its exception) without stopping the others.
        """
        with self._prefetching(inputs, kwargs, "batch") as passed:
            return super().batch(inputs, config, return_exceptions=return_exceptions, **passed)

    def batch_as_completed(  # type: ignore[override]
        self,
        inputs: Sequence[str],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> Iterator[tuple[int, Any]]:
        """:meth:`batch`'s one search pass, results yielded as ``(index, documents)``."""
        with self._prefetching(inputs, kwargs, "batch_as_completed") as passed:
            yield from super().batch_as_completed(
                inputs, config, return_exceptions=return_exceptions, **passed
            )

    async def abatch(
        self,
        inputs: list[str],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Async :meth:`batch`, run in a worker thread."""
        _options(kwargs, f"{type(self).__name__}.abatch")
        return await asyncio.to_thread(
            self.batch, inputs, config, return_exceptions=return_exceptions, **kwargs
        )

    async def abatch_as_completed(  # type: ignore[override]
        self,
        inputs: Sequence[str],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[tuple[int, Any]]:
        """Async :meth:`batch_as_completed`: the search pass in a worker thread."""
        token = await asyncio.to_thread(self._begin_batch, inputs, kwargs, "abatch_as_completed")
        try:
            async for item in super().abatch_as_completed(
                inputs, config, return_exceptions=return_exceptions, **kwargs, **{_BATCH_KEY: token}
            ):
                yield item
        finally:
            self._prefetched.pop(token, None)

    @contextmanager
    def _prefetching(
        self, inputs: Sequence[Any], kwargs: dict[str, Any], method: str
    ) -> Iterator[dict[str, Any]]:
        """The keywords that let each ``invoke`` of a batch call read its hits from one search
        pass of every valid question (kept until the call returns)."""
        token = self._begin_batch(inputs, kwargs, method)
        try:
            yield {**kwargs, _BATCH_KEY: token}
        finally:
            self._prefetched.pop(token, None)

    def _begin_batch(self, inputs: Sequence[Any], kwargs: Mapping[str, Any], method: str) -> str:
        """Search every valid question of a batch call in one pass; the token its invokes pass."""
        options = _options(kwargs, f"{type(self).__name__}.{method}")
        check_list(
            inputs,
            f"{method}'s inputs",
            "questions",
            "; invoke(question) takes one string" if isinstance(inputs, str) else "",
        )
        token = uuid.uuid4().hex
        self._prefetched[token] = self._prefetch(inputs, options)
        return token

    def _prefetch(self, inputs: Sequence[Any], options: dict[str, Any]) -> dict[str, list[Hit]]:
        """Hits of every valid question of a batch, from one search pass (empty if it fails:
        each question then searches, and fails, on its own; a failure other than a refused
        option is also logged, with its cause)."""
        good = []
        for query in dict.fromkeys(q for q in inputs if isinstance(q, str)):
            try:
                check_query(query)
                good.append(query)
            except QRAGError:
                pass
        if not good:
            return {}
        try:
            hits = self.search(good, **options)
        except QRAGError:  # a refused option: each question's own invoke raises it
            return {}
        except Exception as exc:
            logger.warning(
                "the batch search pass of %d questions failed (%s: %s); searching each question "
                "on its own",
                len(good),
                type(exc).__name__,
                exc,
                exc_info=True,
            )
            return {}
        return dict(zip(good, hits))


class LlamaIndexFace(LIBaseRetriever, SearchFace):
    """A LlamaIndex ``BaseRetriever`` over :meth:`search` (``NodeWithScore``, score = Q-value),
    with per-call ``k``, ``filter`` and ``stop_threshold`` (``retrieve(q, k=2)``)."""

    def retrieve(self, str_or_query_bundle: Any, **options: Any) -> list[NodeWithScore]:  # type: ignore[override]
        """LlamaIndex retrieval; a query that is not a string is refused with a QRAGError.

        Args:
            str_or_query_bundle: the question (a string or a ``QueryBundle``).
            **options: ``k``, ``filter``, ``stop_threshold`` for this call (default: the
                fields); any other name raises :class:`~qrag_integrations.core.errors.UnknownOptionError`.
        """
        check_options(options, SEARCH_OPTIONS, f"{type(self).__name__}.retrieve")
        if not isinstance(str_or_query_bundle, QueryBundle):
            check_query(str_or_query_bundle)
        token = _RETRIEVE_OPTIONS.set(options)
        try:
            return LIBaseRetriever.retrieve(self, str_or_query_bundle)
        finally:
            _RETRIEVE_OPTIONS.reset(token)

    async def aretrieve(self, str_or_query_bundle: Any, **options: Any) -> list[NodeWithScore]:  # type: ignore[override]
        """Async :meth:`retrieve` (same options)."""
        check_options(options, SEARCH_OPTIONS, f"{type(self).__name__}.aretrieve")
        if not isinstance(str_or_query_bundle, QueryBundle):
            check_query(str_or_query_bundle)
        token = _RETRIEVE_OPTIONS.set(options)
        try:
            return await LIBaseRetriever.aretrieve(self, str_or_query_bundle)
        finally:
            _RETRIEVE_OPTIONS.reset(token)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self._search_one(query_bundle.query_str, _RETRIEVE_OPTIONS.get() or {})
        return [hit_to_llama_index(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        options = _RETRIEVE_OPTIONS.get() or {}
        hits = await asyncio.to_thread(self._search_one, query_bundle.query_str, options)
        return [hit_to_llama_index(h) for h in hits]
