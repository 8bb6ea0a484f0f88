"""The long-context benchmark's pool-embedding cache and a tiny run of babilong/run.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.harness.embedding_cache import (
    CacheError,
    PoolEmbedder,
    cached_chunk_embeddings,
    pool_embedder,
)

TEXTS = [
    "the cat sat.",
    "mary went to the kitchen.",
    "a dog is red.",
    "the sky is blue.",
    "the cat sat.",
]


@pytest.fixture
def model(tiny_bert_dir):
    from qrag_integrations import load_model

    return load_model(str(tiny_bert_dir))


def _entries(folder: Path) -> list[Path]:
    """Entries and leftovers, but not the ``.<entry>.lock`` file every save keeps (atomic.py)."""
    return sorted(p for p in folder.iterdir() if p.suffix != ".lock") if folder.exists() else []


def test_second_run_reads_the_cache(model, tmp_path, monkeypatch):
    first, hit = cached_chunk_embeddings(model, TEXTS, tmp_path)
    assert not hit and first.shape == (len(TEXTS), model.embedding_dim)
    [entry] = _entries(tmp_path)  # one complete entry, no scratch folders left
    assert sorted(p.name for p in entry.iterdir()) == ["cache.json", "embeddings.safetensors"]

    def no_embedding(*args, **kwargs):
        raise AssertionError("a cache hit must not embed")

    monkeypatch.setattr(model, "embed_chunks", no_embedding)
    second, hit = cached_chunk_embeddings(model, TEXTS, tmp_path)
    assert hit and torch.equal(first, second)


def test_another_chunk_encoder_or_other_texts_miss_the_cache(model, tmp_path):
    cached_chunk_embeddings(model, TEXTS, tmp_path)
    _, hit = cached_chunk_embeddings(model, TEXTS[:-1], tmp_path)
    assert not hit
    with torch.no_grad():
        next(model.chunk_encoder.parameters()).add_(1e-3)  # another checkpoint's chunk encoder
    changed, hit = cached_chunk_embeddings(model, TEXTS, tmp_path)
    assert not hit and len(_entries(tmp_path)) == 3
    assert torch.allclose(changed, model.embed_chunks(TEXTS))


def _corrupt_weights(entry: Path) -> None:
    file = entry / "embeddings.safetensors"
    file.write_bytes(file.read_bytes()[:-40])


def _wrong_rows(entry: Path) -> None:
    manifest = json.loads((entry / "cache.json").read_text())
    manifest["rows"] += 1
    (entry / "cache.json").write_text(json.dumps(manifest))


def _not_a_manifest(entry: Path) -> None:
    (entry / "cache.json").write_text("{not json")


def _nan_values(entry: Path) -> None:
    from safetensors.torch import load_file, save_file

    emb = load_file(str(entry / "embeddings.safetensors"))["embeddings"]
    emb[1, 0] = float("nan")
    save_file({"embeddings": emb}, str(entry / "embeddings.safetensors"))


def _pickle_instead(entry: Path) -> None:
    torch.save(
        {"embeddings": torch.zeros(3)}, entry / "embeddings.safetensors"
    )  # a pickle, never loaded


@pytest.mark.parametrize(
    "damage", [_corrupt_weights, _wrong_rows, _not_a_manifest, _nan_values, _pickle_instead]
)
def test_a_damaged_entry_is_refused_with_its_path_and_left_alone(model, tmp_path, damage):
    cached_chunk_embeddings(model, TEXTS, tmp_path)
    [entry] = _entries(tmp_path)
    damage(entry)
    before = {p.name: p.read_bytes() for p in entry.iterdir()}
    with pytest.raises(CacheError, match="untrusted benchmark cache entry") as info:
        cached_chunk_embeddings(model, TEXTS, tmp_path)
    assert str(entry) in str(info.value) and "delete the folder" in str(info.value)
    assert {p.name: p.read_bytes() for p in entry.iterdir()} == before


def test_pool_embedder_embeds_only_texts_outside_the_pool(model, tmp_path):
    pool = TEXTS[:4]
    embed, info = pool_embedder(model, pool, tmp_path)
    assert info["pool_texts"] == 4 and not info["cache_hit"]
    texts = ["a dog is red.", "john got the apple.", "the cat sat.", "where is the milk?"]
    got = embed(texts)
    assert embed.fresh == 2
    assert torch.allclose(got, model.embed_chunks(texts), atol=1e-5)
    _, info = pool_embedder(model, pool, tmp_path)
    assert info["cache_hit"]
    with pytest.raises(ValueError, match="pool embeddings"):
        PoolEmbedder(model, pool, torch.zeros(3, model.embedding_dim))


def test_tiny_benchmark_run(tiny_bert_dir, tmp_path):
    from benchmarks.babilong import run as bench_babilong
    from benchmarks.babilong.report import paired_table, report

    out = tmp_path / "result.json"
    argv = [
        "--tasks",
        "qa1,qa2",
        "--lengths",
        "1000,2000",
        "--n",
        "2",
        "--ruler",
        "niah_single,niah_multivalue",
        "--ruler-lengths",
        "1000",
        "--ruler-n",
        "2",
        "--base",
        str(tiny_bert_dir),
        "--checkpoint",
        f"tiny={tiny_bert_dir}",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(out),
    ]
    result = bench_babilong.main(argv)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert out.with_suffix(".png").stat().st_size > 0
    assert result["methods"] == {
        "tiny": "multi-step",
        "untrained": "multi-step",
        "dense": "dense",
        "bm25": "bm25",
    }
    assert [(c["suite"], c["task"], c["tokens"]) for c in result["cells"]] == [
        ("babilong", "qa1", 1000),
        ("babilong", "qa2", 1000),
        ("babilong", "qa1", 2000),
        ("babilong", "qa2", 2000),
        ("ruler", "niah_single", 1000),
        ("ruler", "niah_multivalue", 1000),
    ]
    for cell in result["cells"]:
        for name, row in cell["methods"].items():
            assert 0 <= row["em@facts"] <= row["em@budget"] <= 1 and 0 <= row["recall@budget"] <= 1
            for metric, per in row["per_sample"].items():
                assert len(per) == cell["n"] and sum(per) / len(per) == pytest.approx(row[metric])
            assert ("stop" in row) == (name == "tiny")
            if name in (
                "tiny",
                "untrained",
                "dense",
            ):  # only story sentences and needles are embedded
                assert row["embedded_per_sample"] < cell["chunks"]
    # the checkpoint and the default share the tiny encoder: one pool embedding, read back once
    assert [i["cache_hit"] for i in result["pool_embedding"].values()] == [False, True]
    assert "| tiny |" in report(result) and "niah_multivalue" in report(result)
    # paired against dense on the same stories: a row per other method, each length a column
    paired = paired_table(result)
    assert "| method - dense | 1K EM@facts / EM@budget | 2K EM@facts / EM@budget |" in paired
    assert [line.split(" |")[0] for line in paired.splitlines()[2:]] == [
        "| tiny",
        "| untrained",
        "| bm25",
    ]
    again = bench_babilong.main([*argv, "--no-plot"])
    assert all(i["cache_hit"] for i in again["pool_embedding"].values())
    assert (
        again["cells"][0]["methods"]["tiny"]["em@budget"]
        == result["cells"][0]["methods"]["tiny"]["em@budget"]
    )


def test_merge_replaces_cells_of_the_same_suite_task_and_length():
    from benchmarks.babilong.report import merge

    def run(cells, seed=1, command="a"):
        return {
            "seed": seed,
            "steps": 6,
            "methods": {"m": "bm25"},
            "stop_thresholds": [],
            "command": command,
            "seconds": 1.0,
            "cells": [{"suite": "babilong", "task": t, "tokens": n, "n": k} for t, n, k in cells],
        }

    merged = merge(
        [
            run([("qa1", 1000, 100), ("qa1", 10**6, 25)]),
            run([("qa1", 10**6, 100), ("qa2", 10**6, 100)], command="b"),
        ]
    )
    assert [(c["task"], c["tokens"], c["n"]) for c in merged["cells"]] == [
        ("qa1", 1000, 100),
        ("qa1", 10**6, 100),
        ("qa2", 10**6, 100),
    ]
    assert merged["commands"] == ["a", "b"] and merged["seconds"] == 2.0
    with pytest.raises(ValueError, match="seed"):
        merge([run([]), run([], seed=2)])


def test_baselines_can_be_left_out_or_chosen(tiny_bert_dir, tmp_path):
    from benchmarks.babilong import run as bench_babilong

    argv = [
        "--tasks",
        "qa1",
        "--lengths",
        "1000",
        "--n",
        "2",
        "--ruler",
        "",
        "--base",
        str(tiny_bert_dir),
        "--checkpoint",
        f"tiny={tiny_bert_dir}",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--no-plot",
    ]
    alone = bench_babilong.main([*argv, "--baselines", "", "--out", str(tmp_path / "a.json")])
    assert alone["methods"] == {"tiny": "multi-step"}
    assert list(alone["cells"][0]["methods"]) == ["tiny"]
    some = bench_babilong.main(
        [*argv, "--baselines", "bm25,dense", "--out", str(tmp_path / "b.json")]
    )
    assert some["methods"] == {"tiny": "multi-step", "dense": "dense", "bm25": "bm25"}
    with pytest.raises(SystemExit, match="unknown baseline.*bm52"):
        bench_babilong.main([*argv, "--baselines", "bm52"])


def test_an_unseen_noise_source_gives_the_pool(tiny_bert_dir, tmp_path, monkeypatch):
    from benchmarks.babilong import run as bench_babilong
    from benchmarks.harness import noise_sources

    seen = []
    original = bench_babilong.cell_episodes

    def episodes(*args, **kwargs):
        out = original(*args, **kwargs)
        seen.extend(out)
        return out

    monkeypatch.setattr(bench_babilong, "cell_episodes", episodes)
    argv = ["--tasks", "qa1", "--lengths", "1000", "--n", "2", "--ruler", "", "--noise", "wiki"]
    argv += ["--checkpoint", f"tiny={tiny_bert_dir}", "--baselines", "", "--no-plot"]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "w.json")]
    result = bench_babilong.main(argv)
    first = noise_sources.wiki_noise().sentences[:40]  # 1K tokens: 40 sentences
    assert result["pool"]["kind"] == "wiki" and result["pool"]["sentences"] == len(first)
    for e in seen:
        story = set(e.meta["story_positions"])
        noise = [c for i, c in enumerate(e.chunks) if i not in story]
        assert noise and set(noise) <= set(first)
    with pytest.raises(SystemExit):
        bench_babilong.main([*argv[:-2], "--noise", "novels"])


def test_qa2_moves_is_a_task_and_test_noise_stays_out_of_validation(tiny_bert_dir, tmp_path):
    from benchmarks.babilong import run as bench_babilong

    argv = ["--split", "val", "--tasks", "qa2-moves", "--lengths", "1000", "--n", "2"]
    argv += ["--ruler", "", "--checkpoint", f"tiny={tiny_bert_dir}", "--baselines", "bm25"]
    argv += ["--no-plot", "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "m.json")]
    result = bench_babilong.main(argv)
    [cell] = result["cells"]
    assert cell["task"] == "qa2-moves" and cell["facts"] == 2 and cell["n"] == 2
    with pytest.raises(SystemExit, match="unknown task.*qa9"):
        bench_babilong.main([*argv, "--tasks", "qa2,qa9"])
    with pytest.raises(SystemExit, match="test split"):
        bench_babilong.main([*argv, "--noise", "wiki"])


def test_diagnose_names_the_role_of_each_pick():
    from qrag_training.data.babi_world import parse_fact
    from qrag_training.data.babilong import babilong_dataset

    from benchmarks.babilong.diagnose import move_shares_position, pick_roles

    [episode] = babilong_dataset("qa2-moves", 1, 2000, seed=1)
    story = episode.meta["story_positions"]
    take, move = sorted(episode.support, key=lambda i: parse_fact(episode.chunks[i]).kind != "pick")
    holder = parse_fact(episode.chunks[move]).actor
    earlier = [i for i in story if i < move and parse_fact(episode.chunks[i]).actor == holder]
    earlier = [i for i in earlier if parse_fact(episode.chunks[i]).kind == "move"]
    noise = next(i for i in range(len(episode.chunks)) if i not in story)
    assert pick_roles(episode, [take, move, earlier[0], noise]) == [
        "support",
        "support",
        "earlier move",
        "noise",
    ]
    # no positions: every earlier move shares the supporting move's; absolute: none does
    from qrag_integrations.core.config import QRAGConfig

    assert move_shares_position(episode, QRAGConfig(position_mode="none"), [take])
    assert not move_shares_position(episode, QRAGConfig(position_mode="absolute"), [take])
