"""Per-query cost of a k-step Q-RAG search vs one single-step FAISS flat search.

Both sides use the same encoder (the packaged MiniLM, untrained: ``load_model(PACKAGED_MINILM)``) and
the same stored embeddings; every measurement is taken side by side in one run, alternating
per query, so the ratios are not skewed by the machine drifting between runs.

Chunk embeddings are *synthetic*: random directions scaled to the norms of real embeddings of
the same model (measured at start-up on real sentences), because embedding 400K real texts on a
2-core CPU takes hours. Scan costs do not depend on the embedding values; chunk texts are real
(Shakespeare lines, made unique) so that the state texts of steps 2 and 3 have realistic length.

    python -m benchmarks.search.run                    # N = 1K, 10K, 100K, 400K
    python -m benchmarks.search.run --sizes 1000,10000 --queries 10
    python -m benchmarks.search.run --checkpoint packaged:qrag-general-minilm   # its own BM25 fusion

Writes ``benchmarks/search/results/search.json`` and ``search_latency.png`` beside it.
The measurements are in ``search/modes.py`` (one function per mode), the synthetic corpus in
``search/corpus.py``, the ``/proc`` readings in ``harness/proc_stats.py``, the tables and the plot in
``search/report.py``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.harness import results as harness
from benchmarks.harness.texts import shakespeare_lines
from benchmarks.search.corpus import measure_real_norms
from benchmarks.search.modes import measure_memory, measure_size
from benchmarks.search.report import plot, print_report
from qrag_integrations.core.config import PACKAGED_MINILM

RESULTS = Path(__file__).resolve().parent / "results"

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
    p.add_argument(
        "--checkpoint",
        default=PACKAGED_MINILM,
        help="model searched (and encoding the dense baseline's questions); default the untrained MiniLM",
    )
    p.add_argument(
        "--lexical-depth",
        type=int,
        default=None,
        help="the search policy's lexical_depth (default: the model's own; 0: no BM25 fusion)",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "search.json"))
    p.add_argument("--plot", default=str(RESULTS / "search_latency.png"))
    p.add_argument("--plot-note", default="", help="text appended to the plot title")
    p.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--norm", type=float, default=0.38, help=argparse.SUPPRESS)
    p.add_argument("--dim", type=int, default=384, help=argparse.SUPPRESS)
    p.add_argument("--rotation", type=json.loads, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.memory_child is not None:
        torch.set_num_threads(args.threads)
        mem = measure_memory(
            args.memory_child, args.dim, args.norm, args.seed, args.device, args.rotation
        )
        print(json.dumps(mem))
        return 0
    args.sizes = sorted(
        {int(x) for x in args.sizes.split(",") if x}, reverse=True
    )  # largest first: cleanest RSS
    args.fp16_sizes = {int(x) for x in args.fp16_sizes.split(",") if x}

    import faiss

    harness.set_threads(args.threads)

    import qrag_integrations
    from qrag_integrations.core.config import PositionMode

    model = qrag_integrations.load_model(args.checkpoint, device=args.device).eval()
    if model.config.position_mode is PositionMode.DOCUMENT:  # the memory child measures its copy
        args.rotation = model.config.to_dict()
    if model.config.position_mode is not PositionMode.RELATIVE:
        print(
            f"note: the model uses {model.config.position_mode.value} positions",
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

    print_report(results, len(queries), args.threads, args.batch, args.batch_reps)

    out = {
        "benchmark": "search",
        "command": harness.command_line(argv),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, args.device, faiss=faiss.__version__),
        "model": {
            "base_model": model.config.base_model,
            "embedding_dim": model.embedding_dim,
            "position_mode": model.config.position_mode.value,
            "max_state_tokens": model.config.max_state_tokens,
            "checkpoint": args.checkpoint,
            "lexical_depth": model.config.lexical_depth
            if args.lexical_depth is None
            else args.lexical_depth,
            "lexical_steps": model.config.lexical_steps,
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
    harness.write_json(args.out, out)
    if args.plot:
        plot(results, Path(args.plot), args.threads, args.plot_note)
    print(f"\nwrote {args.out}" + (f" and {args.plot}" if args.plot else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
