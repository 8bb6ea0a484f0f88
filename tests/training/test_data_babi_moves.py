"""The qa2-moves generator: its supporting facts determine the answer, in a world simulated here
from the sentences alone, and the stories are the ones its docstring promises, the same per seed."""

from __future__ import annotations

import re

import pytest
from qrag_training.data.babi import parse_babi_format, write_babi_format
from qrag_training.data.babi_answers import answer_question
from qrag_training.data.babi_moves import MOVES_TASK, generate_moves
from qrag_training.data.babi_world import LOCATIONS, OBJECTS, QA1_ACTORS
from qrag_training.data.babilong import babilong_dataset

N = 400
SEED = 5

_MOVE = re.compile(
    r"^(\w+) (?:moved to|went to|journeyed to|travelled to|went back to) the (\w+)\.$"
)
_TAKE = re.compile(r"^(\w+) (?:picked up|got|grabbed|took) the (\w+)(?: there)?\.$")
_DROP = re.compile(r"^(\w+) (?:dropped|discarded|put down|left) the (\w+)(?: there)?\.$")


def _events(story: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for sentence in story:
        for kind, pattern in (("move", _MOVE), ("take", _TAKE), ("drop", _DROP)):
            if m := pattern.match(sentence):
                out.append((kind, m[1], m[2]))
                break
        else:
            raise AssertionError(f"not a story fact: {sentence!r}")
    return out


def _where(events: list[tuple[str, str, str]], obj: str) -> str | None:
    """Simulate the world: where ``obj`` is at the end (None if unknown). A take needs the taker
    where the object lies; a dropped object stays where its holder was."""
    at: dict[str, str] = {}
    holder: dict[str, str] = {}
    lies: dict[str, str] = {}
    for kind, person, what in events:
        if kind == "move":
            at[person] = what
        elif kind == "take":
            assert what not in holder, f"{what} taken while held"
            assert lies.get(what, at.get(person)) == at.get(person), "taken where it is not"
            holder[what] = person
            lies.pop(what, None)
        else:
            assert holder.pop(what) == person, f"{person} dropped what they do not hold"
            lies[what] = at[person]
    if obj in holder:
        return at.get(holder[obj])
    return lies.get(obj)


@pytest.fixture(scope="module")
def samples():
    return generate_moves(N, SEED)


def test_the_supporting_facts_alone_give_the_answer_the_whole_story_gives(samples):
    for s in samples:
        obj = re.fullmatch(r"Where is the (\w+)\?", s.question)[1]
        events = _events(s.story)
        assert _where(events, obj) == s.answer
        assert _where([events[i] for i in s.supporting], obj) == s.answer
        # and bAbI's own simulator (qa2's answers) agrees on the answer and the two facts
        assert answer_question(s.story, s.question) == (s.answer, s.supporting)


def test_the_support_is_the_holders_last_take_and_latest_move(samples):
    moved_after = 0
    for s in samples:
        obj = re.fullmatch(r"Where is the (\w+)\?", s.question)[1]
        events = _events(s.story)
        take = max(i for i, e in enumerate(events) if e[0] == "take" and e[2] == obj)
        holder = events[take][1]
        move = max(i for i, e in enumerate(events) if e[:2] == ("move", holder))
        assert s.supporting == sorted({take, move})
        before = sum(e[:2] == ("move", holder) for e in events[:take])
        after = sum(e[:2] == ("move", holder) for e in events[take:])
        assert before >= 2 and after <= 3
        moved_after += after > 0
        assert not any(e == ("drop", holder, obj) for e in events[take:])
    # most holders move after the take, some never do (the latest move before it supports)
    assert N * 0.7 < moved_after < N


def test_stories_have_the_promised_shape_and_distractors(samples):
    lengths = {len(s.story) for s in samples}
    assert min(lengths) == 8 and max(lengths) == 14
    others_took_it_first = 0
    for s in samples:
        events = _events(s.story)
        assert {p for _, p, _ in events} <= set(QA1_ACTORS)
        assert {w for k, _, w in events if k == "move"} <= set(LOCATIONS)
        assert {w for k, _, w in events if k != "move"} <= set(OBJECTS)
        obj = re.fullmatch(r"Where is the (\w+)\?", s.question)[1]
        holder = events[s.supporting[0]][1]
        assert any(p != holder for _, p, _ in events)  # facts about the other people
        takers = {p for k, p, w in events if k == "take" and w == obj}
        others_took_it_first += len(takers) > 1
        assert s.task == MOVES_TASK
    assert others_took_it_first > 0


def test_seeded_and_deterministic():
    assert generate_moves(30, 7) == generate_moves(30, 7)
    assert generate_moves(30, 7) != generate_moves(30, 8)
    assert generate_moves(10, 7) == generate_moves(30, 7)[:10]


def test_babi_format_keeps_the_supporting_ids(samples, tmp_path):
    path = tmp_path / "moves.txt"
    write_babi_format(samples[:20], path)
    first_question = path.read_text(encoding="utf-8").split("\n")[len(samples[0].story)]
    ids = " ".join(str(i + 1) for i in samples[0].supporting)
    assert first_question.endswith(f"\t{samples[0].answer}\t{ids}")
    assert parse_babi_format(path, task=MOVES_TASK) == samples[:20]


@pytest.mark.parametrize("story_len", [(3, 8), (9, 8)])
def test_a_bad_story_length_is_refused(story_len):
    with pytest.raises(ValueError, match="story_len"):
        generate_moves(1, 0, story_len)


def test_babilong_hides_qa2_moves_stories_in_noise():
    episodes = babilong_dataset(MOVES_TASK, 4, 2000, seed=3)
    for e, s in zip(episodes, generate_moves(4, 3)):
        assert e.question == s.question and e.meta["task"] == MOVES_TASK
        assert [e.chunks[i] for i in e.support] == [s.story[i] for i in s.supporting]
    with pytest.raises(ValueError, match="qa2-moves"):
        babilong_dataset("qa9", 1, 2000, seed=3)
