"""Per-query cost of a k-step Q-RAG search vs one single-step FAISS flat search.

Both sides use the same encoder (the default model from ``qrag_integrations.load_model()``) and
the same stored embeddings; every measurement is taken side by side in one run, alternating
per query, so the ratios are not skewed by the machine drifting between runs.

Chunk embeddings are *synthetic*: random directions scaled to the norms of real embeddings of
the same model (measured at start-up on real sentences), because embedding 400K real texts on a
2-core CPU takes hours. Scan costs do not depend on the embedding values; chunk texts are real
(Shakespeare lines, made unique) so that the state texts of steps 2 and 3 have realistic length.

    python benchmarks/bench_search.py                    # N = 1K, 10K, 100K, 400K
    python benchmarks/bench_search.py --sizes 1000,10000 --queries 10

Writes ``benchmarks/results/search.json`` and ``benchmarks/results/search_latency.png``.
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE before transformers loads
import numpy as np
import torch

QUESTIONS = [
    "Who is the king of Denmark at the start of the play?",
    "Where does Romeo first meet Juliet?",
    "What does the ghost ask Hamlet to do?",
    "Why does Lear divide his kingdom among his daughters?",
    "Who kills Duncan, and in which castle?",
    "What gift does Othello give Desdemona?",
    "Which character says that all the world's a stage?",
    "How does Prospero control the island spirits?",
    "Who is banished from Verona after the duel?",
    "What happens to Ophelia after her father dies?",
    "Which daughter refuses to flatter her father?",
    "What do the witches promise Banquo?",
    "Who disguises herself as Cesario in Illyria?",
    "Why does Shylock demand a pound of flesh?",
    "Who is the fool that follows the old king into the storm?",
    "Where is Antonio's ship reported lost?",
    "Which lord leads the conspiracy against Caesar?",
    "What does Portia's father require of her suitors?",
    "Who marries Katherina in Padua?",
    "How does Cleopatra die?",
    "Who wrote the letter that Malvolio finds in the garden?",
    "Which brother usurps the dukedom of Milan?",
    "What is the name of Falstaff's page?",
    "Who finally kills Macbeth?",
]


# -- helpers ---------------------------------------------------------------------------------
def rss_bytes() -> int:
    """Resident set size of this process (psutil if installed, else /proc/self/status)."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    raise RuntimeError("cannot read RSS")


def peak_rss_bytes() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


class OtherCpu:
    """Average number of cores busy with *other* processes between start() and stop() (Linux)."""

    def __init__(self) -> None:
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    @staticmethod
    def _total_busy() -> int:
        with open("/proc/stat", encoding="ascii") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
        return sum(f[:8]) - f[3] - f[4]  # minus idle and iowait

    @staticmethod
    def _self_busy() -> int:
        with open("/proc/self/stat", encoding="ascii") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])  # utime + stime

    def start(self) -> OtherCpu:
        try:
            self._t, self._b, self._s = time.perf_counter(), self._total_busy(), self._self_busy()
        except (OSError, ValueError, IndexError):
            self._t = None
        return self

    def stop(self) -> float | None:
        if self._t is None:
            return None
        try:
            wall = time.perf_counter() - self._t
            other = (self._total_busy() - self._b) - (self._self_busy() - self._s)
        except (OSError, ValueError, IndexError):
            return None
        return max(0.0, other / self.hz / wall)


def shakespeare_lines() -> list[str]:
    folder = common.shakespeare_folder()
    if folder is None:
        return [f"synthetic sentence number {i} about kings and fools" for i in range(5000)]
    lines: list[str] = []
    for path in sorted(glob.glob(os.path.join(folder, "texts", "*.txt"))):
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                line = " ".join(line.split())
                if len(line) >= 25 and any(c.islower() for c in line):
                    lines.append(line)
    return lines


def make_texts(n: int, lines: list[str]) -> list[str]:
    """``n`` unique chunk texts of two consecutive real lines each (~80 characters)."""
    m = len(lines)
    return [f"{lines[i % m]} {lines[(i + 1) % m]}" for i in range(n)]


def make_embeddings(n: int, dim: int, real_norms: np.ndarray, seed: int) -> torch.Tensor:
    """Random directions, each scaled to a norm drawn from the measured real norms."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x *= rng.choice(real_norms, size=(n, 1)).astype(np.float32)
    return torch.from_numpy(x)


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def fmt_other(x: float | None) -> str:
    return "    -" if x is None else f"{x:5.2f}"


def fmt_ms(s: float) -> str:
    return f"{s * 1e3:8.2f}"


class CachedStates:
    """Stands in for ``model.embed_states`` with precomputed state embeddings (scan-only timing)."""

    def __init__(self, model) -> None:
        self.model = model
        self.real = model.embed_states
        self.cache: dict[str, torch.Tensor] = {}
        self.misses = 0

    def __call__(self, texts):
        out = []
        for t in texts:
            if t not in self.cache:
                self.misses += 1
                with torch.inference_mode():
                    self.cache[t] = self.real([t])[0]
            out.append(self.cache[t])
        return torch.stack(out)


# -- measurement -----------------------------------------------------------------------------
def measure_size(
    model, n: int, args, lines: list[str], real_norms: np.ndarray, queries: list[str]
) -> dict:
    import faiss

    from qrag_integrations.index import ChunkIndex
    from qrag_integrations.search import MultiStepSearcher

    dim = model.embedding_dim
    result: dict = {"n": n}

    # ---- memory: measured in a fresh process (this one has freed memory it may reuse)
    result["memory"] = memory_in_child(n, args, float(np.median(real_norms)))
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
    searcher = MultiStepSearcher(model, index)

    def encode(qs: list[str]) -> np.ndarray:
        with torch.inference_mode():
            return model.embed_states(qs).float().cpu().numpy()

    row_of = {c.id: r for r, c in enumerate(snap.chunks)}

    def state_texts_of(q: str, hits) -> list[str]:
        out, picked_texts, picked_rows = [q], [], []
        for h in hits[:-1]:
            picked_texts.append(h.chunk.text)
            picked_rows.append(row_of[h.chunk.id])
            out.append(model.state_text(q, picked_texts, picked_order=picked_rows))
        return out

    # ---- warm-up
    for q in queries[:2]:
        searcher.search([q], k=args.k)
        flat.search(encode([q]), args.k)

    # ---- single queries, side by side
    rows: dict[str, list[float]] = {
        k: [] for k in ("t_enc", "t_faiss_search", "t_qrag", "t_enc_states", "t_qrag_scan_direct")
    }
    cached = CachedStates(model)
    agree_first = 0
    mon = OtherCpu().start()
    for i, q in enumerate(queries):
        order = ["single", "qrag"] if i % 2 == 0 else ["qrag", "single"]
        for what in order:
            if what == "single":
                t0 = time.perf_counter()
                vec = encode([q])
                t1 = time.perf_counter()
                _, ids = flat.search(vec, args.k)
                t2 = time.perf_counter()
                rows["t_enc"].append(t1 - t0)
                rows["t_faiss_search"].append(t2 - t1)
            else:
                t0 = time.perf_counter()
                hits = searcher.search([q], k=args.k)[0]
                rows["t_qrag"].append(time.perf_counter() - t0)
        # the state encodings this search really did (steps 2-3 carry picked chunk texts)
        states = state_texts_of(q, hits)
        t0 = time.perf_counter()
        for s in states:
            encode([s])
        rows["t_enc_states"].append(time.perf_counter() - t0)
        # scan-only: same search with the state embeddings precomputed
        for s in states:
            cached([s])
        model.embed_states = cached
        try:
            t0 = time.perf_counter()
            hits2 = searcher.search([q], k=args.k)[0]
            rows["t_qrag_scan_direct"].append(time.perf_counter() - t0)
        finally:
            del model.embed_states
        assert [h.chunk.id for h in hits2] == [h.chunk.id for h in hits], (
            "cached-state search differs"
        )
        agree_first += int(hits[0].chunk.id == snap.chunks[int(ids[0][0])].id)
    other_single = mon.stop()
    single = {k: median(v) for k, v in rows.items()}
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
    result["single"] = single

    # ---- batched queries: one search call for B questions
    bq = (queries * ((args.batch + len(queries) - 1) // len(queries)))[: args.batch]
    bq = [f"{q} ({i})" if bq.index(q) != i else q for i, q in enumerate(bq)]  # distinct questions
    brows: dict[str, list[float]] = {
        k: [] for k in ("t_enc", "t_faiss_search", "t_qrag", "t_enc_states", "t_qrag_scan_direct")
    }
    bhits = searcher.search(bq, k=args.k)
    bstates = [state_texts_of(q, h) for q, h in zip(bq, bhits)]
    model.embed_states = cached
    try:
        searcher.search(bq, k=args.k)  # fills the cache with every state text of this batch
    finally:
        del model.embed_states
    mon = OtherCpu().start()
    for r in range(args.batch_reps):
        order = ["single", "qrag", "scan"] if r % 2 == 0 else ["scan", "qrag", "single"]
        for what in order:
            if what == "single":
                t0 = time.perf_counter()
                vecs = encode(bq)
                t1 = time.perf_counter()
                flat.search(vecs, args.k)
                t2 = time.perf_counter()
                brows["t_enc"].append((t1 - t0) / len(bq))
                brows["t_faiss_search"].append((t2 - t1) / len(bq))
            elif what == "qrag":
                t0 = time.perf_counter()
                searcher.search(bq, k=args.k)
                brows["t_qrag"].append((time.perf_counter() - t0) / len(bq))
            else:
                model.embed_states = cached
                try:
                    t0 = time.perf_counter()
                    searcher.search(bq, k=args.k)
                    brows["t_qrag_scan_direct"].append((time.perf_counter() - t0) / len(bq))
                finally:
                    del model.embed_states
        t0 = time.perf_counter()
        for step in range(args.k):  # the search encodes one batch of states per step
            encode([st[step] for st in bstates if len(st) > step])
        brows["t_enc_states"].append((time.perf_counter() - t0) / len(bq))
    other_batched = mon.stop()
    batched = {k: median(v) for k, v in brows.items()}
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
    result["batched"] = batched

    # ---- optional fp16 storage (same vectors)
    if n in args.fp16_sizes:
        index16 = ChunkIndex(dim, dtype=torch.float16, device=args.device)
        index16.add([c.text for c in snap.chunks], snap.embeddings, ids=[c.id for c in snap.chunks])
        s16 = MultiStepSearcher(model, index16)
        s16.search([queries[0]], k=args.k)
        t16, t32 = [], []
        for i, q in enumerate(queries):
            pair = [(s16, t16), (searcher, t32)] if i % 2 == 0 else [(searcher, t32), (s16, t16)]
            for s, store in pair:
                t0 = time.perf_counter()
                s.search([q], k=args.k)
                store.append(time.perf_counter() - t0)
        result["fp16"] = {
            "index_nbytes_per_chunk": index16.nbytes() / n,
            "t_qrag": median(t16),
            "t_qrag_fp32_same_run": median(t32),
            "ratio_fp16_over_fp32": median(t16) / median(t32),
            "ratio_total": median(t16) / t_single,
            "target_pass": median(t16) <= single["target_bound"],
        }
        del index16, s16
    return result


def memory_child(n: int, dim: int, norm: float, seed: int, device: str) -> dict:
    """Build an N-chunk index in this (fresh) process and report what it holds."""
    import sys as _sys

    from qrag_integrations.index import ChunkIndex

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
        _sys.getsizeof(c)
        + _sys.getsizeof(c.text)
        + _sys.getsizeof(c.id)
        + _sys.getsizeof(c.metadata)
        for c in snap.chunks
    ) + _sys.getsizeof(snap.chunks)
    row_of = _sys.getsizeof(index._row_of)
    text_chars = sum(len(c.text) for c in snap.chunks)
    return {
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


def memory_in_child(n: int, args, norm: float) -> dict:
    import subprocess

    cmd = [
        sys.executable,
        __file__,
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
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure_real_norms(model, lines: list[str], count: int = 256) -> np.ndarray:
    step = max(1, len(lines) // count)
    sample = [f"{lines[i]} {lines[(i + 1) % len(lines)]}" for i in range(0, len(lines), step)][
        :count
    ]
    emb = model.embed_chunks(sample, batch_size=64)
    return emb.norm(dim=1).cpu().numpy()


def plot(results: list[dict], path: Path, threads: int, note: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in results]
    s = [r["single"] for r in results]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.loglog(
        ns,
        [x["t_qrag"] * 1e3 for x in s],
        "o-",
        label="Q-RAG 3-step search (incl. 3 state encodings)",
    )
    ax.loglog(
        ns, [x["t_single"] * 1e3 for x in s], "s-", label="single-step: encode + FAISS flat top-3"
    )
    ax.loglog(
        ns,
        [x["target_bound"] * 1e3 for x in s],
        "k--",
        lw=1,
        label="target bound 3.5 x single + 2 x t_enc",
    )
    ax.loglog(
        ns,
        [x["t_qrag_scan_direct"] * 1e3 for x in s],
        "o:",
        label="Q-RAG scans only (states precomputed)",
    )
    ax.loglog(ns, [x["t_faiss_search"] * 1e3 for x in s], "s:", label="FAISS flat search only")
    ax.set_xlabel("chunks in index (N)")
    ax.set_ylabel("per-query latency (ms, median)")
    ax.set_title(
        f"Per-query latency vs index size (CPU, {threads} thread{'s' if threads > 1 else ''}){note}",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def yn(ok: bool) -> str:
    return "yes" if ok else "NO"


def print_latency_table(results: list[dict], part: str, with_scan: bool = False) -> None:
    """Rows of ``r[part]`` (``"single"`` or ``"batched"``): latencies, target bounds, busy cores;
    ``with_scan`` adds the scan-only column (scanD)."""
    scan_hdr = f"{'scanD':>7} | " if with_scan else ""
    hdr = (
        f"{'N':>7} | {'t_enc':>7} {'enc3':>7} {'faiss':>7} {'single':>7} {'qrag':>7} | {'ratio':>5} "
        f"{'bound':>7} {'pass':>4} | {'bound_':>7} {'pass_':>5} | {scan_hdr}{'other':>5}"
    )
    print(hdr.replace("bound_", "bound'").replace("pass_", "pass'"))
    print("-" * len(hdr))
    for r in results:
        s = r[part]
        scan = f"{fmt_ms(s['t_qrag_scan_direct'])[1:]} | " if with_scan else ""
        print(
            f"{r['n']:>7} | {fmt_ms(s['t_enc'])[1:]} {fmt_ms(s['t_enc_states'])[1:]} {fmt_ms(s['t_faiss_search'])[1:]} "
            f"{fmt_ms(s['t_single'])[1:]} {fmt_ms(s['t_qrag'])[1:]} | {s['ratio_total']:5.2f} "
            f"{fmt_ms(s['target_bound'])[1:]} {yn(s['target_pass']):>4} | "
            f"{fmt_ms(s['target_bound_measured_states'])[1:]} {yn(s['target_pass_measured_states']):>5} | "
            f"{scan}{fmt_other(s['other_processes_busy_cores'])}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sizes", default="1000,10000,100000,400000", help="comma-separated index sizes"
    )
    p.add_argument("--queries", type=int, default=20, help="single queries per size (median)")
    p.add_argument("--k", type=int, default=3, help="Q-RAG steps and FAISS top-k")
    p.add_argument("--batch", type=int, default=16, help="questions per batched search call")
    p.add_argument("--batch-reps", type=int, default=5, help="batched repetitions (median)")
    p.add_argument(
        "--fp16-sizes",
        default="400000",
        help="sizes also measured with fp16 index storage ('' for none)",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(common.RESULTS / "search.json"))
    p.add_argument("--plot", default=str(common.RESULTS / "search_latency.png"))
    p.add_argument("--plot-note", default="", help="text appended to the plot title")
    p.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--norm", type=float, default=0.38, help=argparse.SUPPRESS)
    p.add_argument("--dim", type=int, default=384, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.memory_child is not None:
        torch.set_num_threads(args.threads)
        print(
            json.dumps(memory_child(args.memory_child, args.dim, args.norm, args.seed, args.device))
        )
        return 0
    args.sizes = sorted(
        {int(x) for x in args.sizes.split(",") if x}, reverse=True
    )  # largest first: cleanest RSS
    args.fp16_sizes = {int(x) for x in args.fp16_sizes.split(",") if x}

    import faiss

    common.set_threads(args.threads)

    import qrag_integrations
    from qrag_integrations.config import PositionMode

    model = qrag_integrations.load_model(device=args.device).eval()
    if model.config.position_mode is not PositionMode.RELATIVE:
        print(
            f"warning: default model uses {model.config.position_mode.value} positions",
            file=sys.stderr,
        )
    lines = shakespeare_lines()
    with torch.inference_mode():
        real_norms = measure_real_norms(model, lines)
    queries = (QUESTIONS * ((args.queries + len(QUESTIONS) - 1) // len(QUESTIONS)))[: args.queries]
    print(
        f"model {model.config.base_model} (D={model.embedding_dim}, positions={model.config.position_mode.value}), "
        f"real chunk-embedding norm median {np.median(real_norms):.3f} (min {real_norms.min():.3f}, max {real_norms.max():.3f})",
        flush=True,
    )

    results = []
    for n in args.sizes:
        t0 = time.perf_counter()
        load0 = os.getloadavg()[0]
        r = measure_size(model, n, args, lines, real_norms, queries)
        gc.collect()  # the index of this size is freed before the next one is built
        r["loadavg_1min_before_after"] = [load0, os.getloadavg()[0]]
        print(
            f"N={n}: done in {time.perf_counter() - t0:.1f}s (1-min load avg {load0:.2f} -> {os.getloadavg()[0]:.2f})",
            flush=True,
        )
        results.append(r)
    results.sort(key=lambda r: r["n"])

    print(
        f"\nper-query latency, ms (median of {len(queries)} queries); threads={args.threads}; "
        "other = cores kept busy by other processes while measuring"
    )
    print(
        "single = t_enc + faiss; bound = 3.5*single + 2*t_enc (the target); "
        "bound' = 3.5*single + (enc3 - t_enc), enc3 = the 3 state encodings the search really made"
    )
    print_latency_table(results, "single")
    print("\nscan-only, ms: scan = qrag - 3*t_enc; scanD = qrag with state embeddings precomputed")
    hdr = f"{'N':>7} | {'faiss':>7} {'scan':>7} {'/faiss':>7} {'scanD':>7} {'/faiss':>7}"
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        s = r["single"]
        print(
            f"{r['n']:>7} | {fmt_ms(s['t_faiss_search'])[1:]} {fmt_ms(s['t_qrag_scan'])[1:]} {s['ratio_scan']:7.2f} "
            f"{fmt_ms(s['t_qrag_scan_direct'])[1:]} {s['ratio_scan_direct']:7.2f}"
        )
    print(
        f"\nbatched: {args.batch} questions per call, per-query ms (median of {args.batch_reps}); "
        "single = batched encode + faiss search of the batch"
    )
    print_latency_table(results, "batched", with_scan=True)
    print("\nmemory per chunk, bytes (each size built in a fresh process)")
    hdr = (
        f"{'N':>7} | {'nbytes/N':>8} {'D*4':>5} {'over':>6} {'pass':>4} | {'RSS/N':>7} {'peak/N':>7} "
        f"{'pyobj/N':>7} {'chars':>5}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        m = r["memory"]
        peak = m["peak_rss_delta_per_chunk_during_build"]
        print(
            f"{r['n']:>7} | {m['index_nbytes_per_chunk']:8.1f} {m['embedding_bytes_per_chunk']:5d} "
            f"{m['nbytes_over_embedding'] * 100:5.2f}% {yn(m['target_nbytes_le_embedding_plus_10pct']):>4} | "
            f"{m['rss_delta_per_chunk']:7.0f} {'-' if peak is None else f'{peak:7.0f}':>7} "
            f"{m['python_objects_per_chunk_estimate']:7.0f} {m['mean_text_chars']:5.0f}"
        )
    for r in results:
        if "fp16" in r:
            f = r["fp16"]
            print(
                f"\nfp16 storage at N={r['n']}: nbytes/N {f['index_nbytes_per_chunk']:.0f}, qrag {fmt_ms(f['t_qrag'])} ms "
                f"vs fp32 {fmt_ms(f['t_qrag_fp32_same_run'])} ms (x{f['ratio_fp16_over_fp32']:.2f}), "
                f"ratio_total {f['ratio_total']:.2f}, target {'pass' if f['target_pass'] else 'FAIL'}"
            )

    out = {
        "benchmark": "search",
        "command": common.command_line(argv),
        "code": common.code_version(),
        "machine": common.machine_info(args.threads, args.device, faiss=faiss.__version__),
        "model": {
            "base_model": model.config.base_model,
            "embedding_dim": model.embedding_dim,
            "position_mode": model.config.position_mode.value,
            "max_state_tokens": model.config.max_state_tokens,
        },
        "embeddings": {
            "kind": "synthetic: random unit directions scaled to measured real chunk-embedding norms",
            "real_norm_median": float(np.median(real_norms)),
            "real_norm_min": float(real_norms.min()),
            "real_norm_max": float(real_norms.max()),
            "real_norm_sample_size": int(real_norms.size),
        },
        "k": args.k,
        "queries": len(queries),
        "batch": args.batch,
        "batch_reps": args.batch_reps,
        "target": "t_qrag <= 3.5 * t_single + 2 * t_enc; index nbytes <= embedding bytes + 10%",
        "results": results,
    }
    common.write_json(args.out, out)
    if args.plot:
        plot(results, Path(args.plot), args.threads, args.plot_note)
    print(f"\nwrote {args.out}" + (f" and {args.plot}" if args.plot else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
