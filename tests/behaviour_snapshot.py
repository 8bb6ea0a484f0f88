"""Snapshot of observable behaviour: picks, Q-values and metrics on a fixed sample.

Run before and after a refactor; the two JSON files must agree (picks exactly, scores to 1e-4).
It goes through public entry points only (``QRAGRetriever``, ``from_store``, the ``qrag-eval``
command), so the same script runs on both sides of a change of module layout.

    python tests/behaviour_snapshot.py OUT.json
    python tests/behaviour_snapshot.py --compare A.json B.json
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).resolve().parents[1] / "qrag_integrations" / "assets" / "demo_sample.json"
SCORE_TOLERANCE = 1e-4
QRAG_EVAL = str(
    Path(sys.executable).with_name("qrag-eval")
)  # the console script beside this Python
#: The sample is one story: its sentences form one document, in order.
STORY = "story"
QUESTIONS = ["Where is the apple?", "Where was Mary before the kitchen?", "Who went to the garden?"]
CHECKPOINTS = [
    None,
    "packaged:all-MiniLM-L6-v2",
    "packaged:qrag-babi-demo",
    "packaged:qrag-hotpotqa-minilm",
]


def _picks(docs: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "text": d.page_content[:60],
            "q": round(float(d.metadata["qrag_q_value"]), 6),
            "step": d.metadata["qrag_step"],
            "position": d.metadata["qrag_position"],
        }
        for d in docs
    ]


def retriever_cases(chunks: list[str]) -> dict[str, Any]:
    """In-memory index: every packaged checkpoint, invoke and batch, a filter and a stop threshold."""
    from qrag_integrations import QRAGRetriever

    out: dict[str, Any] = {}
    metas = [{"part": i % 3} for i in range(len(chunks))]
    for ckpt in CHECKPOINTS:
        r = QRAGRetriever.from_texts(chunks, metadatas=metas, checkpoint=ckpt, k=4, doc_id=STORY)
        name = ckpt or "default"
        out[f"{name}/invoke"] = [_picks(r.invoke(q)) for q in QUESTIONS]
        out[f"{name}/batch"] = [_picks(d) for d in r.batch(QUESTIONS, k=3)]
        out[f"{name}/filter"] = _picks(r.invoke(QUESTIONS[0], filter={"part": [0, 1]}))
        out[f"{name}/stop"] = _picks(r.invoke(QUESTIONS[0], k=6, stop_threshold=0.5))
        nodes = r.retrieve(QUESTIONS[1])
        out[f"{name}/llama_index"] = [
            [n.node.get_content()[:60], round(float(n.score), 6)] for n in nodes
        ]
    return out


def store_cases(chunks: list[str]) -> dict[str, Any]:
    """Store-backed search over Qdrant local mode and a LangChain InMemoryVectorStore."""
    from langchain_core.vectorstores import InMemoryVectorStore
    from qdrant_client import QdrantClient

    from qrag_integrations import QRAGRetriever
    from qrag_integrations.frameworks.embeddings import QRAGEmbeddings

    out: dict[str, Any] = {}
    metas = [{"part": i % 3} for i in range(len(chunks))]
    qdrant = QRAGRetriever.from_store(
        QdrantClient(":memory:"),
        collection_name="facts",
        checkpoint="packaged:qrag-babi-demo",
        k=4,
        candidates_per_step=16,
    )
    qdrant.add_texts(chunks, metadatas=metas, doc_id=STORY)
    out["qdrant/invoke"] = [_picks(qdrant.invoke(q)) for q in QUESTIONS]
    out["qdrant/filter"] = _picks(qdrant.invoke(QUESTIONS[0], filter={"part": 2}))
    model = qdrant.model
    memory = QRAGRetriever.from_store(
        InMemoryVectorStore(embedding=QRAGEmbeddings(model)),
        checkpoint="packaged:qrag-babi-demo",
        k=4,
        candidates_per_step=16,
    )
    memory.add_texts(chunks, metadatas=metas, doc_id=STORY)
    out["langchain_store/invoke"] = [_picks(memory.invoke(q)) for q in QUESTIONS]
    return out


def eval_cases() -> dict[str, Any]:
    """``qrag-eval`` on generated bAbI qa2 episodes: the demo checkpoint and three baselines."""
    out: dict[str, Any] = {}
    demo = Path(__file__).resolve().parents[1] / "qrag_integrations" / "assets" / "demo_checkpoint"
    runs = {
        "demo": [str(demo)],
        "dense": ["--baseline", "dense"],
        "bm25": ["--baseline", "bm25"],
        "base": ["--baseline", "base"],
    }
    for name, who in runs.items():
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                QRAG_EVAL,
                *who,
                "--env",
                "babilong",
                "--set",
                "env.task=qa2",
                "--set",
                "env.eval_target_tokens=2000",
                "--n",
                "12",
                "--seed",
                "4242",
                "--steps",
                "4",
                "--out",
                tmp,
            ]
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            summary = json.loads((Path(tmp) / "summary.json").read_text())
            samples = [
                json.loads(line) for line in (Path(tmp) / "samples.jsonl").read_text().splitlines()
            ]
        out[f"eval/{name}/metrics"] = {
            k: v
            for k, v in summary.items()
            if isinstance(v, (int, float)) and "time" not in k and "sec" not in k
        }
        out[f"eval/{name}/picks"] = [
            [s["picked"], [round(x, 6) for x in s.get("scores", [])]] for s in samples
        ]
    return out


def compare(a: Any, b: Any, where: str = "") -> list[str]:
    """Differences between two snapshots (numbers within SCORE_TOLERANCE count as equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = [f"{where}/{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            diffs += compare(a[k], b[k], f"{where}/{k}")
        return diffs
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in compare(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, (int, float)):
        same = (math.isnan(a) and math.isnan(b)) or abs(a - b) <= SCORE_TOLERANCE
        return [] if same else [f"{where}: {a} != {b}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", nargs="?", help="snapshot JSON to write")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two snapshots")
    args = p.parse_args()
    if args.compare:
        a, b = (json.loads(Path(f).read_text()) for f in args.compare)
        diffs = compare(a, b)
        print("\n".join(diffs) or f"identical: {len(a)} cases")
        sys.exit(1 if diffs else 0)
    if not args.out:
        p.error("give OUT.json or --compare A B")
    chunks = json.loads(SAMPLE.read_text())["chunks"]
    snap = {**retriever_cases(chunks), **store_cases(chunks), **eval_cases()}
    Path(args.out).write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    print(f"{len(snap)} cases -> {args.out}")


if __name__ == "__main__":
    main()
