"""Concurrent one-question searches of a retriever, served by one multi-question search.

LangChain runs a chain's ``batch`` (the retriever inside a ``RunnableParallel``, as in
``{"context": retriever, "question": RunnablePassthrough()}``), ``asyncio.gather`` of
``ainvoke`` and a threaded server as concurrent ``invoke`` calls of one question each. Here a call
that arrives while a search with the same options runs waits for it, then every call that
arrived meanwhile with those options runs in ONE search (the model encodes their states in one
batch per step; the scan scores them together where they share a layout). A call that finds no
such search running starts at once, so a lone call never waits; calls with other options run
beside it as before. Hand-written (dynamic batching in the style of inference servers): no
well-kept library coalesces calls into a function that takes a list.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qrag_integrations.core.search import Hit

#: ``search(queries, **options)``: each question's hits.
SearchFn = Callable[..., list[list[Hit]]]


def same_options(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two calls' options are the same search: equal plain data (types too: a filter on
    ``True`` is not one on ``1``), and any other object (a callable filter, a filter object) only
    when it is the same object."""
    return _same(dict(a), dict(b))


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, str | int | float | bool):
        return a == b
    return False


@dataclass(eq=False)
class _Call:
    """One waiting question; ``done`` once its hits or its error are set."""

    search: SearchFn
    query: str
    options: Mapping[str, Any]
    hits: list[Hit] | None = None
    error: Exception | None = None
    done: bool = False

    def joins(self, other: _Call) -> bool:
        """Whether one search serves both calls: the same retriever, the same options."""
        return self.search == other.search and same_options(self.options, other.options)

    def outcome(self) -> list[Hit]:
        if self.error is not None:
            raise self.error
        return self.hits  # type: ignore[return-value]


class SearchCoalescer:
    """Serves concurrent :meth:`search_one` calls of one ``search`` with equal options by one
    call of it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: list[_Call] = []
        self._running: list[_Call] = []  # the leading call of each search in progress
        self._inside = threading.local()  # set while this thread runs a coalesced search

    def __deepcopy__(self, memo: dict[int, Any]) -> SearchCoalescer:
        return SearchCoalescer()  # a copied retriever waits on nothing of the original's

    def search_one(self, search: SearchFn, query: str, options: Mapping[str, Any]) -> list[Hit]:
        """``search([query], **options)[0]``, run together with the calls that wait beside it
        (``search``: a bound method; calls of one object's method group together)."""
        if getattr(self._inside, "active", False):  # a search calling back in (a filter that
            return search([query], **options)[0]  # searches): never wait on itself
        call = _Call(search, query, options)
        with self._cond:
            self._waiting.append(call)
            while not call.done and any(r.joins(call) for r in self._running):
                self._cond.wait()
            group = None if call.done else self._take(call)
        if group is not None:
            self._serve(group, call)
        return call.outcome()

    def _take(self, own: _Call) -> list[_Call]:
        """The waiting calls that ``own`` serves, now running (under the lock)."""
        group = [c for c in self._waiting if c.joins(own)]
        self._waiting = [c for c in self._waiting if not c.joins(own)]
        self._running.append(own)
        return group

    def _serve(self, group: list[_Call], own: _Call) -> None:
        """One search for ``group`` (``own``: the leading call); if it fails, each question alone
        (its own error). Calls left unserved (an interrupt) wait again; one of them leads next."""
        self._inside.active = True
        try:
            queries = list(dict.fromkeys(c.query for c in group))
            try:
                found = dict(zip(queries, own.search(queries, **own.options)))
            except Exception as error:  # noqa: BLE001 - each question then gets its own outcome
                found = {} if len(queries) > 1 else {queries[0]: error}
            for call in group:
                outcome = found.get(call.query)
                if outcome is None:
                    outcome = found[call.query] = _alone(own, call.query)
                call.hits, call.error = _split(outcome)
                call.done = True
        finally:
            self._inside.active = False
            with self._cond:
                self._running.remove(own)
                self._waiting += [c for c in group if not c.done and c is not own]
                self._cond.notify_all()


def _alone(own: _Call, query: str) -> list[Hit] | Exception:
    try:
        return own.search([query], **own.options)[0]
    except Exception as error:  # noqa: BLE001 - raised in the caller's thread
        return error


def _split(outcome: Sequence[Hit] | Exception) -> tuple[list[Hit] | None, Exception | None]:
    if isinstance(outcome, Exception):
        return None, outcome
    return list(outcome), None
