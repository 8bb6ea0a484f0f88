"""``SearchCoalescer``: concurrent one-question calls with equal options are answered by one
multi-question search; a lone call searches at once; other options run beside; each question
gets its own outcome (hits or its own error); no call waits on itself or is lost."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from qrag_integrations.frameworks.coalescing import SearchCoalescer, same_options

WAIT = 30.0  # seconds a test waits for threads to reach a point (never reached when all is well)


class FakeSearch:
    """``search(queries, **options)``: each question's "hits" are ``[query, options]``; records
    its calls; the first call can be held until released; ``"bad"`` questions raise."""

    def __init__(self, hold_first: bool = False) -> None:
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        self.started, self.release = threading.Event(), threading.Event()
        if not hold_first:
            self.release.set()

    def __call__(self, queries: list[str], **options: Any) -> list[list[Any]]:
        self.calls.append((list(queries), dict(options)))
        if len(self.calls) == 1:
            self.started.set()
            assert self.release.wait(WAIT)
        if any("bad" in q for q in queries):
            raise ValueError(f"bad question among {queries}")
        return [[q, options] for q in queries]


def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def run_in_threads(
    coalescer: SearchCoalescer, search: FakeSearch, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[list[threading.Thread], list[Any]]:
    out: list[Any] = [None] * len(calls)

    def one(i: int, query: str, options: dict[str, Any]) -> None:
        try:
            out[i] = coalescer.search_one(search, query, options)
        except Exception as error:  # noqa: BLE001 - the test reads it
            out[i] = error

    threads = [
        threading.Thread(target=one, args=(i, q, o), daemon=True) for i, (q, o) in enumerate(calls)
    ]
    for t in threads:
        t.start()
    return threads, out


def waiting(coalescer: SearchCoalescer) -> int:
    return len(coalescer._waiting)


def test_a_lone_call_searches_at_once() -> None:
    search, coalescer = FakeSearch(), SearchCoalescer()
    assert coalescer.search_one(search, "q", {"k": 2}) == ["q", {"k": 2}]
    assert search.calls == [(["q"], {"k": 2})]


def test_calls_arriving_during_a_search_run_together_in_the_next() -> None:
    search, coalescer = FakeSearch(hold_first=True), SearchCoalescer()
    options = {"k": 3, "filter": {"room": ["a", "b"]}, "stop_threshold": None}
    first, out_first = run_in_threads(coalescer, search, [("q0", options)])
    assert search.started.wait(WAIT)
    # equal options in new objects (as each invoke builds them), and one question twice
    later = [(q, copy.deepcopy(options)) for q in ("q1", "q2", "q1", "q3")]
    threads, out = run_in_threads(coalescer, search, later)
    until(lambda: waiting(coalescer) == 4)
    search.release.set()
    for t in first + threads:
        t.join(WAIT)
    # (threads join the queue in any order)
    assert [sorted(c[0]) for c in search.calls] == [["q0"], ["q1", "q2", "q3"]]
    assert out_first == [["q0", options]]
    assert [o[0] for o in out] == ["q1", "q2", "q1", "q3"]
    assert waiting(coalescer) == 0 and coalescer._running == []


def test_other_options_do_not_wait() -> None:
    held, coalescer = FakeSearch(hold_first=True), SearchCoalescer()
    threads, _ = run_in_threads(coalescer, held, [("q0", {"k": 3})])
    assert held.started.wait(WAIT)
    # while that search is held: other options, or another retriever's search, run at once
    assert coalescer.search_one(held, "q1", {"k": 2}) == ["q1", {"k": 2}]
    other = FakeSearch()
    assert coalescer.search_one(other, "q2", {"k": 3}) == ["q2", {"k": 3}]
    held.release.set()
    for t in threads:
        t.join(WAIT)
    assert [c[0] for c in held.calls] == [["q0"], ["q1"]] and other.calls == [(["q2"], {"k": 3})]


def test_a_failing_question_fails_alone() -> None:
    search, coalescer = FakeSearch(hold_first=True), SearchCoalescer()
    first, _ = run_in_threads(coalescer, search, [("q0", {})])
    assert search.started.wait(WAIT)
    threads, out = run_in_threads(coalescer, search, [("q1", {}), ("bad q", {}), ("q2", {})])
    until(lambda: waiting(coalescer) == 3)
    search.release.set()
    for t in first + threads:
        t.join(WAIT)
    assert out[0] == ["q1", {}] and out[2] == ["q2", {}]
    assert isinstance(out[1], ValueError) and "['bad q']" in str(out[1])  # its own search's error
    # the group search failed, then each question searched alone
    assert [c[0] for c in search.calls] == [
        ["q0"],
        ["q1", "bad q", "q2"],
        ["q1"],
        ["bad q"],
        ["q2"],
    ]
    with pytest.raises(ValueError, match="bad"):  # a lone bad call: one search, its error
        coalescer.search_one(search, "bad", {})
    assert search.calls[-1] == (["bad"], {})


def test_an_interrupted_search_leaves_its_followers_to_the_next() -> None:
    calls: list[list[str]] = []
    started, release = threading.Event(), threading.Event()

    def search(queries: list[str], **options: Any) -> list[list[Any]]:
        calls.append(list(queries))
        if len(calls) == 1:
            started.set()
            assert release.wait(WAIT)
        if len(calls) == 2:
            raise KeyboardInterrupt  # not an Exception: only the leading call's caller gets it
        return [[q] for q in queries]

    coalescer = SearchCoalescer()
    out: dict[str, Any] = {}

    def one(query: str) -> None:
        try:
            out[query] = coalescer.search_one(search, query, {})  # type: ignore[arg-type]
        except BaseException as error:  # noqa: BLE001 - the test reads it
            out[query] = error

    threads = [threading.Thread(target=one, args=(q,), daemon=True) for q in ("q0", "q1", "q2")]
    threads[0].start()
    assert started.wait(WAIT)
    threads[1].start()
    until(lambda: waiting(coalescer) == 1)
    threads[2].start()
    until(lambda: waiting(coalescer) == 2)
    release.set()
    for t in threads:
        t.join(WAIT)
    # q1 and q2 ran together; whichever led got the interrupt, the other led its own search
    led = next(q for q in ("q1", "q2") if isinstance(out[q], KeyboardInterrupt))
    other = "q2" if led == "q1" else "q1"
    assert out["q0"] == ["q0"] and out[other] == [other]
    assert calls == [["q0"], ["q1", "q2"], [other]]
    assert waiting(coalescer) == 0 and coalescer._running == []


def test_a_search_that_calls_back_in_does_not_wait_on_itself() -> None:
    coalescer = SearchCoalescer()
    seen: list[list[str]] = []

    def search(queries: list[str], **options: Any) -> list[list[Any]]:
        seen.append(list(queries))
        if queries == ["outer"]:  # e.g. a callable filter that runs a search itself
            return [coalescer.search_one(search, "inner", options)]
        return [[q] for q in queries]

    assert coalescer.search_one(search, "outer", {"k": 1}) == ["inner"]
    assert seen == [["outer"], ["inner"]]


def test_many_threads_get_their_own_answers() -> None:
    search, coalescer = FakeSearch(), SearchCoalescer()
    calls = [(f"q{i % 7}", {"k": 1 + i % 3}) for i in range(60)]
    threads, out = run_in_threads(coalescer, search, calls)
    for t in threads:
        t.join(WAIT)
    assert out == [[q, o] for q, o in calls]
    assert sum(len(c[0]) for c in search.calls) <= len(calls)
    assert waiting(coalescer) == 0 and coalescer._running == []


def test_same_options_compares_plain_data_with_types_and_objects_by_identity() -> None:
    def anything(metadata: dict) -> bool:
        return True

    assert same_options({"k": 2, "filter": {"a": [1, "x"]}}, {"k": 2, "filter": {"a": [1, "x"]}})
    assert not same_options({"filter": {"a": True}}, {"filter": {"a": 1}})  # True is not 1
    assert not same_options({"filter": {"a": 1}}, {"filter": {"a": 1.0}})  # not grouped: safe
    assert not same_options({"k": 2}, {"k": 3})
    assert not same_options({"k": 2}, {"k": 2, "filter": None})
    assert same_options({"filter": anything}, {"filter": anything})
    assert not same_options({"filter": anything}, {"filter": lambda m: True})
    assert not same_options({"x": float("nan")}, {"x": float("nan")})


def test_a_copied_coalescer_is_a_new_one() -> None:
    coalescer = SearchCoalescer()
    copied = copy.deepcopy(coalescer)
    assert copied is not coalescer and copied._cond is not coalescer._cond
