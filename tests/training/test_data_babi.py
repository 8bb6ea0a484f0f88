"""Tests for the bAbI-style generator: answers follow from the supporting facts."""

import re

import pytest
from qrag_training.data import (
    TASKS,
    BabiSample,
    generate_babi,
    parse_babi_format,
    write_babi_format,
)
from qrag_training.data.babi_answers import answer_question
from qrag_training.data.babi_world import DROP, GIVE, LOCATIONS, MOVE, NAMES, PICK, parse_fact

N_SAMPLES = 300
SEED = 11


@pytest.fixture(scope="module")
def samples():
    return {task: generate_babi(task, N_SAMPLES, SEED) for task in TASKS}


def _reference_object_history(story):
    """Independent, provenance-free simulation: each object's list of distinct locations."""
    person_at, holder, lying, history = {}, {}, {}, {}

    def note(obj):
        where = person_at.get(holder[obj]) if obj in holder else lying.get(obj)
        if where and (not history.get(obj) or history[obj][-1] != where):
            history.setdefault(obj, []).append(where)

    for sentence in story:
        ev = parse_fact(sentence)
        if ev.kind == MOVE:
            person_at[ev.actor] = ev.loc
            for obj in [o for o, h in holder.items() if h == ev.actor]:
                note(obj)
        elif ev.kind == PICK:
            holder[ev.obj] = ev.actor
            note(ev.obj)
        elif ev.kind == DROP:
            holder.pop(ev.obj, None)
            lying[ev.obj] = person_at[ev.actor]
        elif ev.kind == GIVE:
            holder[ev.obj] = ev.other
    return history


def test_every_task_produces_valid_samples(samples):
    for task, batch in samples.items():
        assert len(batch) == N_SAMPLES
        for s in batch:
            assert isinstance(s, BabiSample) and s.task == task
            assert s.story and s.question.endswith("?") and s.answer
            assert s.supporting == sorted(set(s.supporting))
            assert all(0 <= i < len(s.story) for i in s.supporting)
            for sentence in s.story:
                parse_fact(sentence)  # every story sentence is a well-formed fact


@pytest.mark.parametrize("task", TASKS)
def test_supporting_facts_alone_determine_the_answer(samples, task):
    for s in samples[task]:
        assert answer_question(s.story, s.question) == (s.answer, s.supporting)
        facts = [s.story[i] for i in s.supporting]
        answer, _ = answer_question(facts, s.question, ids=s.supporting)
        assert answer == s.answer


def test_number_of_supporting_facts_matches_the_task(samples):
    expected = {"qa1": 1, "qa2": 2, "qa3": 3, "qa4": 1, "qa5": 1}
    for task, batch in samples.items():
        assert {len(s.supporting) for s in batch} == {expected[task]}


def test_qa1_answer_is_the_last_move_of_the_person(samples):
    for s in samples["qa1"]:
        person = re.fullmatch(r"Where is (\w+)\?", s.question).group(1)
        moves = [i for i, x in enumerate(s.story) if x.startswith(person + " ")]
        assert s.supporting == [moves[-1]]
        assert s.story[moves[-1]].endswith(f" the {s.answer}.")


def test_qa2_answer_matches_independent_simulation(samples):
    carried = 0
    for s in samples["qa2"]:
        obj = re.fullmatch(r"Where is the (\w+)\?", s.question).group(1)
        assert _reference_object_history(s.story)[obj][-1] == s.answer
        assert any(s.answer in s.story[i] for i in s.supporting)
        assert any(obj in s.story[i] for i in s.supporting)
        first, second = (parse_fact(s.story[i]) for i in s.supporting)
        if first.kind == PICK and second.kind == MOVE:
            carried += 1
    assert carried > 0  # the tricky case: picked up, then the holder moved


def test_qa3_before_questions_match_independent_simulation(samples):
    for s in samples["qa3"]:
        obj, loc = re.fullmatch(r"Where was the (\w+) before the (\w+)\?", s.question).groups()
        history = _reference_object_history(s.story)[obj]
        assert history.count(loc) == 1
        assert history[history.index(loc) - 1] == s.answer
        text = " ".join(s.story[i] for i in s.supporting)
        assert s.answer in text and loc in text and obj in text


def test_qa4_and_qa5_single_fact_holds_the_answer(samples):
    for s in samples["qa4"]:
        fact = s.story[s.supporting[0]]
        assert s.answer in fact and s.answer in LOCATIONS
        assert any(loc in s.question and loc in fact for loc in LOCATIONS if loc != s.answer)
    for s in samples["qa5"]:
        fact = parse_fact(s.story[s.supporting[0]])
        assert fact.kind == GIVE
        assert s.answer in (fact.actor, fact.obj, fact.other)


def test_stories_contain_distractors(samples):
    for task in ("qa1", "qa2", "qa3", "qa5"):
        with_distractors = [s for s in samples[task] if len(s.story) > len(s.supporting)]
        assert len(with_distractors) > 0.9 * N_SAMPLES
        people = {n for s in samples[task] for n in NAMES if any(x.startswith(n) for x in s.story)}
        assert len(people) == 4


def test_generation_is_deterministic():
    for task in TASKS:
        assert generate_babi(task, 20, 3) == generate_babi(task, 20, 3)
        assert generate_babi(task, 20, 3) != generate_babi(task, 20, 4)


def test_story_length_is_respected():
    for s in generate_babi("qa2", 50, 0, story_len=(10, 12)):
        assert 10 <= len(s.story) <= 12


def test_unknown_task_and_bad_length_raise():
    with pytest.raises(ValueError, match="qa1"):
        generate_babi("qa9", 1, 0)
    with pytest.raises(ValueError):
        generate_babi("qa1", 1, 0, story_len=(5, 2))
    with pytest.raises(ValueError, match="qa5"):
        generate_babi("qa5", 1, 0, story_len=(3, 3))
    with pytest.raises(ValueError, match="at most 5"):
        generate_babi("qa4", 1, 0, story_len=(2, 6))


def test_shortest_stories_are_possible():
    for task in TASKS:
        n = {"qa1": 1, "qa2": 2, "qa3": 3, "qa4": 1, "qa5": 4}[task]
        for s in generate_babi(task, 10, 0, story_len=(n, n)):
            assert len(s.story) == n


def test_babi_format_round_trip(tmp_path, samples):
    path = tmp_path / "qa3_train.txt"
    batch = [s for task in TASKS for s in samples[task][:5]]
    write_babi_format(batch, path)
    parsed = parse_babi_format(path)
    assert [(s.story, s.question, s.answer, s.supporting) for s in parsed] == [
        (s.story, s.question, s.answer, s.supporting) for s in batch
    ]


def test_parse_original_layout_with_several_questions(tmp_path):
    path = tmp_path / "qa1.txt"
    path.write_text(
        "1 Mary moved to the bathroom.\n2 John went to the hallway.\n"
        "3 Where is Mary? \tbathroom\t1\n4 Daniel went back to the hallway.\n"
        "5 Sandra moved to the garden.\n6 Where is Daniel? \thallway\t4\n"
        "1 Sandra travelled to the office.\n2 Where is Sandra? \toffice\t1\n",
        encoding="utf-8",
    )
    first, second, third = parse_babi_format(path, task="qa1")
    assert first.story == ["Mary moved to the bathroom.", "John went to the hallway."]
    assert (first.answer, first.supporting) == ("bathroom", [0])
    assert len(second.story) == 4 and second.supporting == [2]
    assert second.story[2] == "Daniel went back to the hallway."
    assert third.story == ["Sandra travelled to the office."] and third.task == "qa1"


def test_parse_reports_bad_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("1 Mary moved to the bathroom.\nWhere is Mary?\tbathroom\t1\n")
    with pytest.raises(ValueError, match=":2:"):
        parse_babi_format(path)
