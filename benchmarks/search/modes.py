"""The measurements of ``search/run.py``, one function per mode.

* :func:`measure_single`: one question per search call, Q-RAG and encode + FAISS alternating;
* :func:`measure_batched`: one search call for a batch of questions;
* :func:`measure_fp16`: the same vectors stored in float16;
* :func:`measure_memory` (run by :func:`memory_in_child` in a fresh process): index bytes and RSS.

:func:`measure_size` runs them all for one index size over a :class:`SizeRun`: the index, a
FAISS flat index of the same vectors and the searcher, built once from the synthetic corpus of
``search/corpus.py``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.harness.proc_stats import OtherCpu, peak_rss_bytes, reset_peak_rss, rss_bytes
from benchmarks.harness.texts import shakespeare_lines
from benchmarks.search.corpus import make_embeddings, make_texts

#: The CLI whose hidden ``--memory-child`` option runs :func:`measure_memory`.
#: The repository root, where ``python -m benchmarks.search.run`` runs (the memory child).
REPO_ROOT = Path(__file__).resolve().parents[2]
#: Per-query latencies recorded by the single and batched modes.
LATENCY_KEYS = ("t_enc", "t_faiss_search", "t_qrag", "t_enc_states", "t_qrag_scan_direct")


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


# -- one index size --------------------------------------------------------------------------
class CachedStates:
    """Stands in for ``model.embed_states`` with precomputed state embeddings (scan-only timing)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.real = model.embed_states
        self.cache: dict[str, torch.Tensor] = {}
        self.misses = 0

    def __call__(self, texts: list[str]) -> torch.Tensor:
        out = []
        for t in texts:
            if t not in self.cache:
                self.misses += 1
                with torch.inference_mode():
                    self.cache[t] = self.real([t])[0]
            out.append(self.cache[t])
        return torch.stack(out)


@dataclass
class SizeRun:
    """One index size, built once, that every latency mode measures."""

    model: Any
    args: argparse.Namespace
    queries: list[str]
    index: Any
    """The ``ChunkIndex`` (float32)."""
    snap: Any
    """Its snapshot (rows in document order)."""
    flat: Any
    """``faiss.IndexFlatIP`` over the same vectors."""
    searcher: Any
    """``MultiStepSearcher`` over ``index``."""
    cached: CachedStates
    """State embeddings seen so far, shared by the modes' scan-only timings."""
    row_of: dict[str, int]

    def encode(self, qs: list[str]) -> np.ndarray:
        """State-encoder embeddings of ``qs`` as float32 numpy (what FAISS searches with)."""
        with torch.inference_mode():
            return self.model.embed_states(qs).float().cpu().numpy()

    def state_texts_of(self, q: str, hits: list) -> list[str]:
        """The state texts a search that made ``hits`` encoded (the question, then one per pick)."""
        out, picked_texts, picked_rows = [q], [], []
        for h in hits[:-1]:
            picked_texts.append(h.chunk.text)
            picked_rows.append(self.row_of[h.chunk.id])
            out.append(self.model.state_text(q, picked_texts, picked_order=picked_rows))
        return out

    @contextmanager
    def scan_only(self) -> Iterator[None]:
        """Within: the model's state encoder answers from :attr:`cached` (scans timed alone)."""
        self.model.embed_states = self.cached
        try:
            yield
        finally:
            del self.model.embed_states


def build_run(
    model: Any,
    n: int,
    args: argparse.Namespace,
    lines: list[str],
    real_norms: np.ndarray,
    queries: list[str],
) -> SizeRun:
    """Index ``n`` synthetic chunks, the FAISS flat index of the same vectors and the searcher."""
    import faiss

    from qrag_integrations.core.index import ChunkIndex
    from qrag_integrations.core.policy import SearchPolicy
    from qrag_integrations.core.search import MultiStepSearcher

    dim = model.embedding_dim
    texts = make_texts(n, lines)
    emb = make_embeddings(n, dim, real_norms, args.seed + n)
    index = ChunkIndex(dim, device=args.device)
    index.add(texts, emb)
    del texts, emb
    gc.collect()

    snap = index.snapshot()
    vectors = snap.embeddings.detach().float().cpu().numpy()
    flat = faiss.IndexFlatIP(dim)
    flat.add(vectors)
    policy = SearchPolicy.of(model.config, lexical_depth=args.lexical_depth)
    searcher = MultiStepSearcher(model, index, policy=policy)
    row_of = {c.id: r for r, c in enumerate(snap.chunks)}
    return SizeRun(model, args, queries, index, snap, flat, searcher, CachedStates(model), row_of)


def measure_size(
    model: Any,
    n: int,
    args: argparse.Namespace,
    lines: list[str],
    real_norms: np.ndarray,
    queries: list[str],
) -> dict:
    """Every mode at index size ``n``: memory first (in a fresh process), then latencies."""
    result: dict = {"n": n}
    # ---- memory: measured in a fresh process (this one has freed memory it may reuse)
    result["memory"] = memory_in_child(n, args, float(np.median(real_norms)))
    run = build_run(model, n, args, lines, real_norms, queries)
    # ---- warm-up
    for q in queries[:2]:
        run.searcher.search([q], k=args.k)
        run.flat.search(run.encode([q]), args.k)
    result["single"] = measure_single(run)
    result["batched"] = measure_batched(run)
    if n in args.fp16_sizes:
        result["fp16"] = measure_fp16(run, result["single"])
    return result


# -- modes -----------------------------------------------------------------------------------
def measure_single(run: SizeRun) -> dict:
    """Single queries, side by side: encode + FAISS vs the Q-RAG search, order alternating; then
    the search's own state encodings alone and the search with them precomputed."""
    args, queries, searcher = run.args, run.queries, run.searcher
    rows: dict[str, list[float]] = {k: [] for k in LATENCY_KEYS}
    agree_first = 0
    mon = OtherCpu().start()
    for i, q in enumerate(queries):
        order = ["single", "qrag"] if i % 2 == 0 else ["qrag", "single"]
        for what in order:
            if what == "single":
                t0 = time.perf_counter()
                vec = run.encode([q])
                t1 = time.perf_counter()
                _, ids = run.flat.search(vec, args.k)
                t2 = time.perf_counter()
                rows["t_enc"].append(t1 - t0)
                rows["t_faiss_search"].append(t2 - t1)
            else:
                t0 = time.perf_counter()
                hits = searcher.search([q], k=args.k)[0]
                rows["t_qrag"].append(time.perf_counter() - t0)
        # the state encodings this search really did (steps 2-3 carry picked chunk texts)
        states = run.state_texts_of(q, hits)
        t0 = time.perf_counter()
        for s in states:
            run.encode([s])
        rows["t_enc_states"].append(time.perf_counter() - t0)
        # scan-only: same search with the state embeddings precomputed
        for s in states:
            run.cached([s])
        with run.scan_only():
            t0 = time.perf_counter()
            hits2 = searcher.search([q], k=args.k)[0]
            rows["t_qrag_scan_direct"].append(time.perf_counter() - t0)
        assert [h.chunk.id for h in hits2] == [h.chunk.id for h in hits], (
            "cached-state search differs"
        )
        agree_first += int(hits[0].chunk.id == run.snap.chunks[int(ids[0][0])].id)
    other_single = mon.stop()
    single: dict[str, Any] = {k: median(v) for k, v in rows.items()}
    single["other_processes_busy_cores"] = other_single
    t_single = single["t_enc"] + single["t_faiss_search"]
    t_qrag_scan = single["t_qrag"] - args.k * single["t_enc"]
    single.update(
        t_single=t_single,
        ratio_total=single["t_qrag"] / t_single,
        target_bound=3.5 * t_single + 2 * single["t_enc"],
        target_pass=single["t_qrag"] <= 3.5 * t_single + 2 * single["t_enc"],
        extra_states_measured=single["t_enc_states"] - single["t_enc"],
        target_bound_measured_states=3.5 * t_single + single["t_enc_states"] - single["t_enc"],
        target_pass_measured_states=single["t_qrag"]
        <= 3.5 * t_single + single["t_enc_states"] - single["t_enc"],
        t_qrag_scan=t_qrag_scan,
        ratio_scan=t_qrag_scan / single["t_faiss_search"],
        ratio_scan_direct=single["t_qrag_scan_direct"] / single["t_faiss_search"],
        first_pick_equals_faiss_top1=agree_first / len(queries),
        samples={k: v for k, v in rows.items()},
    )
    return single


def measure_batched(run: SizeRun) -> dict:
    """One search call for ``args.batch`` distinct questions vs one batched encode + FAISS
    search; per-query times."""
    args, queries, searcher = run.args, run.queries, run.searcher
    bq = (queries * ((args.batch + len(queries) - 1) // len(queries)))[: args.batch]
    bq = [f"{q} ({i})" if bq.index(q) != i else q for i, q in enumerate(bq)]  # distinct questions
    brows: dict[str, list[float]] = {k: [] for k in LATENCY_KEYS}
    bhits = searcher.search(bq, k=args.k)
    bstates = [run.state_texts_of(q, h) for q, h in zip(bq, bhits)]
    with run.scan_only():
        searcher.search(bq, k=args.k)  # fills the cache with every state text of this batch
    mon = OtherCpu().start()
    for r in range(args.batch_reps):
        order = ["single", "qrag", "scan"] if r % 2 == 0 else ["scan", "qrag", "single"]
        for what in order:
            if what == "single":
                t0 = time.perf_counter()
                vecs = run.encode(bq)
                t1 = time.perf_counter()
                run.flat.search(vecs, args.k)
                t2 = time.perf_counter()
                brows["t_enc"].append((t1 - t0) / len(bq))
                brows["t_faiss_search"].append((t2 - t1) / len(bq))
            elif what == "qrag":
                t0 = time.perf_counter()
                searcher.search(bq, k=args.k)
                brows["t_qrag"].append((time.perf_counter() - t0) / len(bq))
            else:
                with run.scan_only():
                    t0 = time.perf_counter()
                    searcher.search(bq, k=args.k)
                    brows["t_qrag_scan_direct"].append((time.perf_counter() - t0) / len(bq))
        t0 = time.perf_counter()
        for step in range(args.k):  # the search encodes one batch of states per step
            run.encode([st[step] for st in bstates if len(st) > step])
        brows["t_enc_states"].append((time.perf_counter() - t0) / len(bq))
    other_batched = mon.stop()
    batched: dict[str, Any] = {k: median(v) for k, v in brows.items()}
    batched["other_processes_busy_cores"] = other_batched
    bt_single = batched["t_enc"] + batched["t_faiss_search"]
    batched.update(
        batch=len(bq),
        t_single=bt_single,
        ratio_total=batched["t_qrag"] / bt_single,
        target_bound=3.5 * bt_single + 2 * batched["t_enc"],
        target_pass=batched["t_qrag"] <= 3.5 * bt_single + 2 * batched["t_enc"],
        target_bound_measured_states=3.5 * bt_single + batched["t_enc_states"] - batched["t_enc"],
        target_pass_measured_states=batched["t_qrag"]
        <= 3.5 * bt_single + batched["t_enc_states"] - batched["t_enc"],
        ratio_scan_direct=batched["t_qrag_scan_direct"] / batched["t_faiss_search"],
    )
    return batched


def measure_fp16(run: SizeRun, single: dict) -> dict:
    """The same vectors stored in float16: search time against float32's in the same run, and
    against the single-query target of ``single``."""
    from qrag_integrations.core.index import ChunkIndex
    from qrag_integrations.core.search import MultiStepSearcher

    args, snap, n = run.args, run.snap, len(run.snap)
    index16 = ChunkIndex(run.model.embedding_dim, dtype=torch.float16, device=args.device)
    index16.add([c.text for c in snap.chunks], snap.embeddings, ids=[c.id for c in snap.chunks])
    s16 = MultiStepSearcher(run.model, index16, run.searcher.settings)
    s16.search([run.queries[0]], k=args.k)
    t16: list[float] = []
    t32: list[float] = []
    for i, q in enumerate(run.queries):
        pair = (
            [(s16, t16), (run.searcher, t32)] if i % 2 == 0 else [(run.searcher, t32), (s16, t16)]
        )
        for s, store in pair:
            t0 = time.perf_counter()
            s.search([q], k=args.k)
            store.append(time.perf_counter() - t0)
    return {
        "index_nbytes_per_chunk": index16.nbytes() / n,
        "t_qrag": median(t16),
        "t_qrag_fp32_same_run": median(t32),
        "ratio_fp16_over_fp32": median(t16) / median(t32),
        "ratio_total": median(t16) / single["t_single"],
        "target_pass": median(t16) <= single["target_bound"],
    }


def measure_memory(
    n: int, dim: int, norm: float, seed: int, device: str, rotation: dict | None = None
) -> dict:
    """Build an N-chunk index in this (fresh) process and report what it holds; with
    ``rotation`` (a document-mode model's config, ``QRAGConfig.to_dict()``), also the rotated copy a search keeps
    (the benchmark's chunks are one document, as texts added without ``doc_id=`` are)."""
    from qrag_integrations.core.index import ChunkIndex

    lines = shakespeare_lines()
    gc.collect()
    rss0 = rss_bytes()
    peak_reset = reset_peak_rss()
    texts = make_texts(n, lines)
    emb = make_embeddings(n, dim, np.array([norm], dtype=np.float32), seed)
    rss_inputs = rss_bytes()
    t0 = time.perf_counter()
    index = ChunkIndex(dim, device=device)
    index.add(texts, emb)
    t_add = time.perf_counter() - t0
    del texts, emb
    gc.collect()
    rss1 = rss_bytes()
    peak = peak_rss_bytes() if peak_reset else None
    snap = index.snapshot()
    # what the Python side holds per chunk (shallow sizes; the doc_id string is shared)
    py = sum(
        sys.getsizeof(c) + sys.getsizeof(c.text) + sys.getsizeof(c.id) + sys.getsizeof(c.metadata)
        for c in snap.chunks
    ) + sys.getsizeof(snap.chunks)
    row_of = sys.getsizeof(index._row_of)
    text_chars = sum(len(c.text) for c in snap.chunks)
    copy = {} if rotation is None else measure_document_copy(index, rotation)
    return copy | {
        "index_nbytes": index.nbytes(),
        "index_nbytes_per_chunk": index.nbytes() / n,
        "embedding_bytes_per_chunk": dim * 4,
        "nbytes_over_embedding": index.nbytes() / (n * dim * 4) - 1.0,
        "target_nbytes_le_embedding_plus_10pct": index.nbytes() <= 1.10 * n * dim * 4,
        "rss_delta_bytes": rss1 - rss0,
        "rss_delta_per_chunk": (rss1 - rss0) / n,
        "rss_inputs_per_chunk": (rss_inputs - rss0) / n,
        "peak_rss_delta_per_chunk_during_build": None if peak is None else (peak - rss0) / n,
        "python_objects_per_chunk_estimate": (py + row_of) / n,
        "mean_text_chars": text_chars / n,
        "add_seconds": t_add,
    }


#: Chunks per document in the second document-mode measure (many short documents: a rotated copy).
SHORT_DOCUMENT_CHUNKS = 8


def measure_document_copy(index: Any, rotation: dict) -> dict:
    """RSS kept and peak RSS while a document-mode search lays out ``index``'s snapshot: as it
    is (added without doc ids: one document, searched run by run without a copy) and relabelled as
    documents of :data:`SHORT_DOCUMENT_CHUNKS` chunks (a rotated copy)."""
    from dataclasses import replace

    from qrag_integrations.core.chunks import Snapshot

    snap = index.snapshot()
    short = Snapshot(
        tuple(
            replace(c, doc_id=f"d{i // SHORT_DOCUMENT_CHUNKS}") for i, c in enumerate(snap.chunks)
        ),
        snap.embeddings,
    )
    one = _document_layout_memory(snap, rotation)
    return {f"document_{k}": v for k, v in one.items()} | {
        f"short_documents_{k}": v for k, v in _document_layout_memory(short, rotation).items()
    }


def _document_layout_memory(snap: Any, rotation: dict) -> dict:
    from qrag_integrations.core.config import QRAGConfig
    from qrag_integrations.core.index import DocumentRotation

    n = len(snap)
    gc.collect()
    rss0, peak_reset = rss_bytes(), reset_peak_rss()
    t0 = time.perf_counter()
    kept = DocumentRotation(QRAGConfig.from_dict(rotation)).candidates(snap, None)
    seconds = time.perf_counter() - t0
    gc.collect()
    rss1, peak = rss_bytes(), peak_rss_bytes() if peak_reset else None
    layout = "rotated copy" if kept.runs is None else f"{len(kept.runs)} runs, no copy"
    del kept
    return {
        "layout": layout,
        "copy_rss_per_chunk": (rss1 - rss0) / n,
        "rotation_peak_rss_per_chunk": None if peak is None else (peak - rss0) / n,
        "rotation_seconds": seconds,
    }


def memory_in_child(n: int, args: argparse.Namespace, norm: float) -> dict:
    """:func:`measure_memory` in a fresh ``search/run.py --memory-child`` process."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.search.run",
        "--memory-child",
        str(n),
        "--norm",
        repr(norm),
        "--seed",
        str(args.seed),
        "--dim",
        str(args.dim),
        "--device",
        args.device,
        "--threads",
        str(args.threads),
    ]
    if args.rotation:
        cmd += ["--rotation", json.dumps(args.rotation)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO_ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])
