"""Tests for the HotpotQA loader and the hash splits."""

import hashlib
import json

import pytest
from qrag_training.data import hash_bucket, load_hotpotqa, split_of
from qrag_training.data.hotpotqa import default_path

LIMIT = 200


@pytest.fixture(scope="module")
def raw_by_id():
    with default_path().open(encoding="utf-8") as fh:
        return {r["_id"]: r for r in json.load(fh)}


@pytest.fixture(scope="module")
def splits():
    return {split: load_hotpotqa(split, limit=LIMIT) for split in ("train", "val", "eval", "all")}


def test_hash_bucket_is_stable():
    assert hash_bucket("5a8b57f25542995d1e6f1371") == 2
    assert hash_bucket("5a85ea095542994775f606a8") == 0
    assert hash_bucket("abc", 7) == int(hashlib.sha1(b"abc").hexdigest(), 16) % 7
    assert split_of("5a85ea095542994775f606a8") == "eval"


def test_splits_load_disjoint_and_by_bucket(splits):
    train, held_out = splits["train"], splits["eval"]
    assert len(train) == len(held_out) == len(splits["all"]) == LIMIT
    assert not {e.id for e in train} & {e.id for e in held_out}
    assert all(hash_bucket(e.id) == 0 and e.meta["split"] == "eval" for e in held_out)
    assert all(hash_bucket(e.id) != 0 and e.meta["split"] == "train" for e in train)
    assert [e.id for e in load_hotpotqa("eval", limit=20)] == [e.id for e in held_out[:20]]


def test_validation_slice_is_on_the_training_side_and_not_trained_on(splits):
    """Checkpoints are chosen on "val": ids of hash buckets 1-4 (never the held-out bucket 0),
    one in 25, and "train" does not contain them."""
    val = splits["val"]
    assert len(val) == LIMIT
    assert all(
        hash_bucket(e.id) == 1 and hash_bucket(e.id, 25) == 1 and e.meta["split"] == "val"
        for e in val
    )
    assert not {e.id for e in val} & (
        {e.id for e in splits["train"]} | {e.id for e in splits["eval"]}
    )
    everything = load_hotpotqa("all")
    counts = {s: sum(e.meta["split"] == s for e in everything) for s in ("train", "val", "eval")}
    assert sum(counts.values()) == len(everything) == 7405
    assert counts["val"] == len(load_hotpotqa("val")) and 200 < counts["val"] < 400


def test_trainer_configs_choose_checkpoints_on_val_never_on_the_held_out_bucket():
    from qrag_training.evaluate import compose_config

    for env in ("hotpotqa", "musique", "twowiki"):
        cfg = compose_config(env, ["env.path=x.jsonl"] if env != "hotpotqa" else [])
        assert cfg.env.eval.split == "val" and cfg.env.train.split == "train"
    for name in ("hotpotqa_cpu", "hotpotqa_gpu"):
        preset = compose_config("hotpotqa", [f"preset={name}"])
        assert preset.env.eval.split == "val" and preset.algo.kind == "next_hop"
    gpu = compose_config("hotpotqa", ["preset=hotpotqa_gpu"])
    assert (
        gpu.device == "cuda"
        and gpu.algo.questions_per_step == 16
        and gpu.model.trainable_layers == 2
    )


def test_support_paragraphs_match_supporting_fact_titles(splits, raw_by_id):
    for ep in splits["all"]:
        ep.validate()
        raw = raw_by_id[ep.id]
        assert ep.question == raw["question"] and ep.answer == raw["answer"]
        assert ep.titles == [t for t, _ in raw["context"]]
        assert {ep.titles[i] for i in ep.support} == {t for t, _ in raw["supporting_facts"]}
        for title, chunk in zip(ep.titles, ep.chunks, strict=True):
            assert chunk.startswith(f"{title}: ") and "  " not in chunk[: len(title) + 3]
        assert len(ep.support) == 2


def test_unknown_split_raises():
    with pytest.raises(ValueError, match="train"):
        load_hotpotqa("test", limit=1)
