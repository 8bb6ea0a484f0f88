"""Tests for qrag_training.data.episode."""

import json

import pytest
from qrag_training.data import Episode


def _episode(**overrides):
    fields = {
        "id": "e1",
        "question": "Where is Mary?",
        "chunks": ["a.", "b.", "c."],
        "support": [2, 0],
        "answer": "garden",
        "titles": ["t0", "t1", "t2"],
        "meta": {"task": "qa1"},
    }
    fields.update(overrides)
    return Episode(**fields)


def test_valid_episode_passes_and_returns_itself():
    ep = _episode()
    assert ep.validate() is ep
    assert ep.supporting_chunks == ["c.", "a."]


def test_unlabeled_episode_is_valid():
    _episode(support=[], answer=None, titles=None).validate()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"support": [3]}, "out of range"),
        ({"support": [-1]}, "out of range"),
        ({"support": [1, 1]}, "duplicate"),
        ({"chunks": [], "support": [], "titles": None}, "empty"),
        ({"titles": ["only one"]}, "titles"),
        ({"question": "  "}, "question"),
        ({"support": ["1"]}, "not an int"),
    ],
)
def test_validate_rejects_bad_episodes(overrides, message):
    with pytest.raises(ValueError, match=message):
        _episode(**overrides).validate()


def test_json_round_trip():
    ep = _episode()
    data = json.loads(json.dumps(ep.to_json()))
    assert Episode.from_json(data) == ep


def test_from_json_requires_core_keys():
    with pytest.raises(ValueError, match="chunks"):
        Episode.from_json({"id": "x", "question": "q", "support": []})


def test_episode_is_frozen():
    ep = _episode()
    with pytest.raises(AttributeError):
        ep.question = "other"  # type: ignore[misc]
