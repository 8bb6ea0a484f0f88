"""``benchmarks/search/report.py``: the tables ``search/run.py`` prints, pinned to the output
the script had before it was split into modules (same text for the same results)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "search/report.py"
_SPEC = importlib.util.spec_from_file_location("search_report", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
search_report = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(search_report)

LAT = {
    "t_enc": 0.0145,
    "t_enc_states": 0.0557,
    "t_faiss_search": 0.0005,
    "t_single": 0.015,
    "t_qrag": 0.0605,
    "ratio_total": 4.03,
    "target_bound": 0.0818,
    "target_pass": True,
    "target_bound_measured_states": 0.0939,
    "target_pass_measured_states": True,
    "t_qrag_scan_direct": 0.0025,
    "other_processes_busy_cores": 1.01,
}
RESULT = {
    "n": 3000,
    "single": {**LAT, "t_qrag_scan": 0.0168, "ratio_scan": 33.6, "ratio_scan_direct": 5.0},
    "batched": {**LAT, "target_pass": False, "other_processes_busy_cores": None},
    "memory": {
        "index_nbytes_per_chunk": 1552.0,
        "embedding_bytes_per_chunk": 1536,
        "nbytes_over_embedding": 0.0104,
        "target_nbytes_le_embedding_plus_10pct": True,
        "rss_delta_per_chunk": 3096.6,
        "peak_rss_delta_per_chunk_during_build": None,
        "python_objects_per_chunk_estimate": 400.5,
        "mean_text_chars": 91.9,
    },
    "fp16": {
        "index_nbytes_per_chunk": 784.0,
        "t_qrag": 0.0759,
        "t_qrag_fp32_same_run": 0.0848,
        "ratio_fp16_over_fp32": 0.89,
        "ratio_total": 5.51,
        "target_pass": False,
    },
}

EXPECTED = """
per-query latency, ms (median of 4 queries); threads=1; other = cores kept busy by other processes while measuring
single = t_enc + faiss; bound = 3.5*single + 2*t_enc (the target); bound' = 3.5*single + (enc3 - t_enc), enc3 = the 3 state encodings the search really made
      N |   t_enc    enc3   faiss  single    qrag | ratio   bound pass |  bound' pass' | other
----------------------------------------------------------------------------------------------
   3000 |   14.50   55.70    0.50   15.00   60.50 |  4.03   81.80  yes |   93.90   yes |  1.01

scan-only, ms: scan = qrag - 3*t_enc; scanD = qrag with state embeddings precomputed
      N |   faiss    scan  /faiss   scanD  /faiss
-------------------------------------------------
   3000 |    0.50   16.80   33.60    2.50    5.00

batched: 4 questions per call, per-query ms (median of 2); single = batched encode + faiss search of the batch
      N |   t_enc    enc3   faiss  single    qrag | ratio   bound pass |  bound' pass' |   scanD | other
--------------------------------------------------------------------------------------------------------
   3000 |   14.50   55.70    0.50   15.00   60.50 |  4.03   81.80   NO |   93.90   yes |    2.50 |     -

memory per chunk, bytes (each size built in a fresh process)
      N | nbytes/N   D*4   over pass |   RSS/N  peak/N pyobj/N chars
--------------------------------------------------------------------
   3000 |   1552.0  1536  1.04%  yes |    3097       -     400    92

fp16 storage at N=3000: nbytes/N 784, qrag    75.90 ms vs fp32    84.80 ms (x0.89), ratio_total 5.51, target FAIL
"""


def test_report_prints_the_tables_of_the_unsplit_script(capsys: pytest.CaptureFixture[str]) -> None:
    search_report.print_report([RESULT], queries=4, threads=1, batch=4, batch_reps=2)
    assert capsys.readouterr().out == EXPECTED
