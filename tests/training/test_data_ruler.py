"""Tests for the RULER needle-in-a-haystack generators."""

import re

import pytest
from qrag_training.data import NIAH_VARIANTS, ruler_dataset, tokens_to_sentences
from qrag_training.data.noise import BABI_VOCAB_RE
from qrag_training.data.ruler import NEEDLE_TEMPLATE

NEEDLE_RE = re.compile(r"^One of the special magic (\w+) for (\S+) is: (\S+)\.$")
EXPECTED_SUPPORT = {
    "niah_single": 1,
    "niah_multikey": 1,
    "niah_multivalue": 4,
    "niah_multiquery": 2,
}
EXPECTED_NEEDLES = {
    "niah_single": 1,
    "niah_multikey": 4,
    "niah_multivalue": 4,
    "niah_multiquery": 2,
}


@pytest.mark.parametrize("variant", NIAH_VARIANTS)
def test_support_chunks_hold_the_asked_keys_and_values(variant):
    for ep in ruler_dataset(variant, 20, 4000, seed=3):
        ep.validate()
        assert len(ep.chunks) == tokens_to_sentences(4000)
        assert len(ep.support) == EXPECTED_SUPPORT[variant]
        keys, values = ep.meta["keys"], ep.meta["values"]
        assert ep.answer == ", ".join(values)
        assert all(k in ep.question for k in keys)
        needles = {i: NEEDLE_RE.match(c) for i, c in enumerate(ep.chunks) if NEEDLE_RE.match(c)}
        assert len(needles) == EXPECTED_NEEDLES[variant]
        assert sorted(i for i, m in needles.items() if m.group(2) in keys) == sorted(ep.support)
        assert sorted(needles[i].group(3) for i in ep.support) == sorted(values)
        for i in ep.support:
            assert any(k in ep.chunks[i] for k in keys)
        for i, chunk in enumerate(ep.chunks):
            if i not in needles:
                assert not any(v in chunk for v in values)
                assert not BABI_VOCAB_RE.search(chunk)


def test_needle_phrasing_and_question_forms():
    single = ruler_dataset("niah_single", 1, 1000, seed=0)[0]
    key, value = single.meta["keys"][0], single.meta["values"][0]
    needle = NEEDLE_TEMPLATE.format(kind="numbers", key=key, value=value)
    assert single.chunks[single.support[0]] == needle
    assert single.question.startswith("What is the special magic number for")
    multi = ruler_dataset("niah_multiquery", 1, 1000, seed=0)[0]
    assert multi.question.startswith("What are all the special magic numbers for")
    assert " and " in multi.question


def test_key_and_value_kinds():
    ep = ruler_dataset(
        "niah_multikey", 3, 1000, seed=0, key_kind="uuids", value_kind="uuids", n_keys=6
    )[0]
    assert len([c for c in ep.chunks if NEEDLE_RE.match(c)]) == 6
    assert re.fullmatch(r"[0-9a-f-]{36}", ep.answer)
    with pytest.raises(ValueError, match="niah_single"):
        ruler_dataset("niah_everything", 1, 1000, seed=0)


def test_ruler_is_deterministic():
    assert ruler_dataset("niah_multivalue", 4, 2000, seed=8) == ruler_dataset(
        "niah_multivalue", 4, 2000, seed=8
    )
    assert ruler_dataset("niah_single", 4, 2000, seed=8) != ruler_dataset(
        "niah_single", 4, 2000, seed=9
    )
