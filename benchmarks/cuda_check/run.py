"""The core's ``device="cuda"`` paths against the CPU, on a GPU machine (no framework needed).

For each position mode (none / absolute / relative), embedding kind (cosine / the paper's
mean / 10) and question weight (0 / 3), one tiny random BERT is loaded on the CPU and on the
GPU with the same weights. Its chunk embeddings are compared, then the multi-step search over a
shared index (with and without a stop threshold and a metadata filter, with BM25 fusion
(``lexical_depth=5``); one question at a time and batched), on a CPU fp32 index (the reference;
its single-question scans use faiss), a CUDA fp32 index and a CUDA fp16 index, all holding the
same well-separated random chunk embeddings. It prints, per case, how many questions got the
same picks, and the largest Q-value difference where the picks agree. An fp16 index may break near-ties differently; fp32 should agree exactly.

    python -m benchmarks.cuda_check.run [--out benchmarks/cuda_check/results/cuda_check.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import random
import tempfile
from pathlib import Path

import torch

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.search import MultiStepSearcher

#: The repository root (the test suite's tiny BERT is built from its tests/conftest.py).
REPO = Path(__file__).resolve().parents[2]


def _build_tiny_bert(folder: Path) -> Path:
    """The test suite's tiny random BERT (tests/conftest.py), imported by path."""
    spec = importlib.util.spec_from_file_location(
        "qrag_tests_conftest", REPO / "tests" / "conftest.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_tiny_bert(folder)


def _corpus(n: int, seed: int) -> tuple[list[str], list[dict], list[str]]:
    rng = random.Random(seed)
    names = ["mary", "john", "sandra", "daniel", "fred", "bill"]
    verbs = ["went", "travelled", "journeyed", "moved", "got", "took", "dropped", "left"]
    places = [
        "kitchen",
        "garden",
        "office",
        "bathroom",
        "hallway",
        "bedroom",
        "football",
        "apple",
        "milk",
    ]
    texts = [
        f"{rng.choice(names)} {rng.choice(verbs)} to the {rng.choice(places)}." for _ in range(n)
    ]
    metas = [{"part": i % 3} for i in range(n)]
    questions = [f"where is the {p}?" for p in places[:8]]
    return texts, metas, questions


def _compare(a: list, b: list) -> tuple[int, float]:
    same, max_dq = 0, 0.0
    for ha, hb in zip(a, b, strict=True):
        if [h.chunk.id for h in ha] == [h.chunk.id for h in hb]:
            same += 1
            for x, y in zip(ha, hb):
                max_dq = max(max_dq, abs(x.q_value - y.q_value))
    return same, max_dq


def run(device: str) -> list[dict]:
    if importlib.util.find_spec("faiss") is None:
        # a GPU machine without faiss: the CPU reference uses torch's block scan instead of
        # FAISS's inner products (the CPU test suite checks that the two agree)
        from qrag_integrations.core import exact_scan

        exact_scan.cpu_fp32 = lambda emb: False
    texts, metas, questions = _corpus(400, 0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = _build_tiny_bert(Path(tmp) / "tiny")
        for mode, normalize, weight in itertools.product(
            ("none", "absolute", "relative"), (True, False), (0.0, 3.0)
        ):
            config = QRAGConfig(
                base_model=str(base),
                position_mode=mode,
                normalize=normalize,
                question_weight=weight,
                max_chunk_tokens=32,
                max_state_tokens=64,
            )
            cpu = QRAGModel.from_base(config).eval()
            gpu = QRAGModel.from_base(config).eval()
            gpu.load_state_dict(cpu.state_dict())
            gpu.to(device)
            emb_cpu = cpu.embed_chunks(texts)
            emb_gpu = gpu.embed_chunks(texts)
            emb_err = float((emb_gpu.cpu() - emb_cpu).norm() / emb_cpu.norm())
            indexes = {
                "ref_cpu_fp32": (cpu, ChunkIndex(cpu.embedding_dim)),
                "dev_fp32": (gpu, ChunkIndex(gpu.embedding_dim, device=device)),
                "dev_fp16": (
                    gpu,
                    ChunkIndex(gpu.embedding_dim, dtype=torch.float16, device=device),
                ),
            }
            # A random tiny BERT gives near-identical embeddings to every sentence (every score a
            # near-tie); well-separated random chunk embeddings test the search itself.
            chunk_emb = torch.nn.functional.normalize(
                torch.randn(
                    len(texts), cpu.embedding_dim, generator=torch.Generator().manual_seed(1)
                ),
                dim=-1,
            )
            for model, index in indexes.values():
                index.add(
                    texts, chunk_emb, metadatas=metas, ids=[str(i) for i in range(len(texts))]
                )
            results = {}
            for name, (model, index) in indexes.items():
                searcher = MultiStepSearcher(model, index)
                fused = MultiStepSearcher(
                    model, index, policy=SearchPolicy.of(model.config, lexical_depth=5)
                )
                results[name] = {
                    "lexical": fused.search(questions, k=4),
                    "plain": searcher.search(questions, k=4),
                    "threshold": searcher.search(questions, k=4, stop_threshold=0.0),
                    "filter": searcher.search(questions, k=4, filter={"part": 1}),
                    "single": [searcher.search([q], k=4)[0] for q in questions[:3]],
                }
            for name in indexes:
                if name == "ref_cpu_fp32":
                    continue
                for case, hits in results[name].items():
                    same, max_dq = _compare(results["ref_cpu_fp32"][case], hits)
                    rows.append(
                        {
                            "position_mode": mode,
                            "normalize": normalize,
                            "question_weight": weight,
                            "index": name,
                            "case": case,
                            "same_picks": same,
                            "questions": len(hits),
                            "max_q_diff": round(max_dq, 6),
                            "chunk_emb_rel_err": round(emb_err, 8),
                        }
                    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: run this on a GPU machine")
    rows = run(args.device)
    print(f"device {args.device}; reference: CPU fp32 index")
    print(
        f"{'mode':9} {'norm':5} {'w':>3} {'index':10} {'case':9} {'same picks':>10} {'max dQ':>9} {'emb err':>9}"
    )
    for r in rows:
        print(
            f"{r['position_mode']:9} {r['normalize']!s:5} {r['question_weight']:3.0f} {r['index']:10} "
            f"{r['case']:9} {r['same_picks']:>4}/{r['questions']:<5} {r['max_q_diff']:9.2e} {r['chunk_emb_rel_err']:9.1e}"
        )
    fp32 = [r for r in rows if r["index"].endswith("fp32")]
    print(
        f"fp32 cases with identical picks: {sum(r['same_picks'] == r['questions'] for r in fp32)}/{len(fp32)}"
    )
    if args.out:
        payload = {
            "device": torch.cuda.get_device_name(0)
            if args.device.startswith("cuda")
            else args.device,
            "torch": torch.__version__,
            "rows": rows,
        }
        args.out.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
