"""Printing and plotting of ``search/run.py`` results (the ``results`` list of its JSON)."""

from __future__ import annotations

from pathlib import Path

from qrag_training.plot import save_figure


def fmt_other(x: float | None) -> str:
    return "    -" if x is None else f"{x:5.2f}"


def fmt_ms(s: float) -> str:
    return f"{s * 1e3:8.2f}"


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


def print_scan_table(results: list[dict]) -> None:
    """Scan cost alone (single queries): estimated and with precomputed states, vs FAISS."""
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


def print_memory_table(results: list[dict]) -> None:
    """Bytes per chunk of each size's index, measured in a fresh process."""
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
        for kind, what in (("document", "one document"), ("short_documents", "short documents")):
            if f"{kind}_layout" in m:  # document positions: runs, or the search's rotated copy
                peak = m[f"{kind}_rotation_peak_rss_per_chunk"]
                print(
                    f"{'':>7} | document positions, {what}: {m[f'{kind}_layout']}, kept RSS/N "
                    f"{m[f'{kind}_copy_rss_per_chunk']:.0f}, peak/N while laid out "
                    f"{'-' if peak is None else f'{peak:.0f}'}, "
                    f"{m[f'{kind}_rotation_seconds']:.2f} s once per snapshot"
                )


def print_fp16_lines(results: list[dict]) -> None:
    """One line per size also measured with fp16 storage."""
    for r in results:
        if "fp16" in r:
            f = r["fp16"]
            print(
                f"\nfp16 storage at N={r['n']}: nbytes/N {f['index_nbytes_per_chunk']:.0f}, qrag {fmt_ms(f['t_qrag'])} ms "
                f"vs fp32 {fmt_ms(f['t_qrag_fp32_same_run'])} ms (x{f['ratio_fp16_over_fp32']:.2f}), "
                f"ratio_total {f['ratio_total']:.2f}, target {'pass' if f['target_pass'] else 'FAIL'}"
            )


def print_report(
    results: list[dict], queries: int, threads: int, batch: int, batch_reps: int
) -> None:
    """Every table: single-query latency, scan only, batched latency, memory, fp16."""
    print(
        f"\nper-query latency, ms (median of {queries} queries); threads={threads}; "
        "other = cores kept busy by other processes while measuring"
    )
    print(
        "single = t_enc + faiss; bound = 3.5*single + 2*t_enc (the target); "
        "bound' = 3.5*single + (enc3 - t_enc), enc3 = the 3 state encodings the search really made"
    )
    print_latency_table(results, "single")
    print_scan_table(results)
    print(
        f"\nbatched: {batch} questions per call, per-query ms (median of {batch_reps}); "
        "single = batched encode + faiss search of the batch"
    )
    print_latency_table(results, "batched", with_scan=True)
    print_memory_table(results)
    print_fp16_lines(results)


def plot(results: list[dict], path: Path, threads: int, note: str = "") -> None:
    """Per-query latency against index size (log-log), single queries."""
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
    save_figure(fig, path, dpi=120)
