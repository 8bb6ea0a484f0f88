"""A second qa2-style story generator, ``qa2-moves``: the object's holder moves several times
before and after taking it, among distractor facts about the same people.

Written apart from :mod:`qrag_training.data.babi` (which draws random events and asks about
whatever the world ends up in), this generator plans the story around one question,
"Where is the <object>?":

- 4 people, 6 places, 3 objects (bAbI's vocabulary, so the noise filters still apply), 8-14 facts;
- the holder moves 2-3 times before taking the object and 0-3 times after (0 in about one story
  in nine), and never drops it again;
- distractors: the other people move, any of the people take and drop the other objects, and
  before the holder's take another person may take the same object and drop it somewhere (the
  holder then goes there to take it); at least one fact is about another person.

The supporting facts are the holder's last take of the object and the holder's latest move
before the question (after the take, or, when the holder never moved after it, the latest move
before it). The generator tracks them as it writes the story; :func:`story_support` recomputes
them by simulating the sentences, and every sample is checked with it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from qrag_training.data.babi import BabiSample
from qrag_training.data.babi_world import (
    DROP_VERBS,
    LOCATIONS,
    MOVE_VERBS,
    OBJECTS,
    PICK_VERBS,
    QA1_ACTORS,
    THERE_SUFFIX,
)

#: Task name of this generator (episode ids, ``--tasks`` of the BabiLong benchmark).
MOVES_TASK = "qa2-moves"
#: Default (min, max) facts in a story.
MOVES_STORY_LEN: tuple[int, int] = (8, 14)
#: Fewest facts a story can have: two moves, the take, and one distractor.
MIN_MOVES_FACTS = 4
_MOVES_BEFORE = (2, 3)
_MOVES_AFTER = (0, 1, 2, 3)
_MOVES_AFTER_WEIGHTS = (1, 3, 3, 2)
_DISTRACTOR_KINDS = ("move", "take", "drop")
_DISTRACTOR_WEIGHTS = (0.55, 0.25, 0.2)
_MAX_ATTEMPTS = 200


@dataclass
class _State:
    """Where people are and who holds which object, while a story is written."""

    at: dict[str, str]
    holds: dict[str, str]  # object -> person
    lies: dict[str, str]  # object -> place, for a dropped object


def _move(person: str, place: str, rng: random.Random) -> str:
    return f"{person} {rng.choice(MOVE_VERBS)} the {place}."


def _take(person: str, obj: str, rng: random.Random) -> str:
    there = THERE_SUFFIX if rng.random() < 0.5 else ""
    return f"{person} {rng.choice(PICK_VERBS)} the {obj}{there}."


def _drop(person: str, obj: str, rng: random.Random) -> str:
    there = THERE_SUFFIX if rng.random() < 0.5 else ""
    return f"{person} {rng.choice(DROP_VERBS)} the {obj}{there}."


def _distractor(
    state: _State, holder: str, target: str, taken: bool, rng: random.Random
) -> tuple[str, str, str] | None:
    """One distractor event ``(kind, person, place-or-object)`` that keeps the world consistent:
    the target object is only taken or dropped by others before the holder's take."""
    kind = rng.choices(_DISTRACTOR_KINDS, weights=_DISTRACTOR_WEIGHTS)[0]
    others = [p for p in QA1_ACTORS if p != holder]
    if kind == "move":
        person = rng.choice(others)
        return "move", person, rng.choice([p for p in LOCATIONS if p != state.at.get(person)])
    placed = [p for p in QA1_ACTORS if p in state.at]
    if kind == "take":
        options = [
            (person, obj)
            for obj in OBJECTS
            if obj not in state.holds and not (obj == target and taken)
            for person in placed
            if state.lies.get(obj, state.at[person]) == state.at[person]
            and (obj != target or person != holder)  # the holder's take of the target is planned
        ]
        return ("take", *rng.choice(options)) if options else None
    options = [(p, o) for o, p in state.holds.items() if o != target or p != holder]
    options = [(p, o) for p, o in options if p in state.at]
    return ("drop", *rng.choice(options)) if options else None


def _apply(state: _State, kind: str, person: str, what: str) -> None:
    if kind == "move":
        state.at[person] = what
    elif kind == "take":
        state.holds[what] = person
        state.lies.pop(what, None)
    else:
        del state.holds[what]
        state.lies[what] = state.at[person]


def _one_story(
    n_facts: int, rng: random.Random
) -> tuple[list[tuple[str, str, str]], str, str] | None:
    """Events of one story, its holder and its object; None if the plan does not fit."""
    holder, target = rng.choice(QA1_ACTORS), rng.choice(OBJECTS)
    before = rng.randint(*_MOVES_BEFORE)
    after = rng.choices(_MOVES_AFTER, weights=_MOVES_AFTER_WEIGHTS)[0]
    plan = ["move"] * before + ["take"] + ["move"] * after
    state = _State({}, {}, {})
    events: list[tuple[str, str, str]] = []
    while plan or len(events) < n_facts:
        slots = n_facts - len(events)
        if plan and (slots <= len(plan) or rng.random() < len(plan) / slots):
            step = plan.pop(0)
            if step == "take":
                # the target must be free and where the holder is: fetch it first if not
                if target in state.holds:
                    events.append(("drop", state.holds[target], target))
                    _apply(state, *events[-1])
                if target in state.lies and state.lies[target] != state.at.get(holder):
                    events.append(("move", holder, state.lies[target]))
                    _apply(state, *events[-1])
                event = ("take", holder, target)
            else:
                event = (
                    "move",
                    holder,
                    rng.choice([p for p in LOCATIONS if p != state.at.get(holder)]),
                )
        else:
            event = _distractor(state, holder, target, "take" not in plan, rng)
            if event is None:
                continue
        events.append(event)
        _apply(state, *event)
    if len(events) > n_facts + 2 or all(person == holder for _, person, _ in events):
        return None  # too long after fetching the object, or nobody else in the story
    return events, holder, target


def _render(event: tuple[str, str, str], rng: random.Random) -> str:
    kind, person, what = event
    return {"move": _move, "take": _take, "drop": _drop}[kind](person, what, rng)


def story_support(events: list[tuple[str, str, str]], target: str) -> tuple[str, list[int]] | None:
    """Simulate a story's events: where ``target`` is at the end and the ids of the facts that
    say so (its holder's last take of it, the holder's latest move); None when nobody holds it or
    its holder's place is unknown."""
    at: dict[str, tuple[str, int]] = {}
    held: tuple[str, int] | None = None
    for i, (kind, person, what) in enumerate(events):
        if kind == "move":
            at[person] = (what, i)
        elif what == target:
            held = (person, i) if kind == "take" else None
    if held is None or held[0] not in at:
        return None
    place, moved = at[held[0]]
    return place, sorted({held[1], moved})


def generate_moves(n: int, seed: int, story_len: tuple[int, int] | None = None) -> list[BabiSample]:
    """Generate ``qa2-moves`` samples (see the module docstring).

    Args:
        n: Number of samples.
        seed: Random seed; the same arguments always give the same samples.
        story_len: Inclusive (min, max) facts in a story, default :data:`MOVES_STORY_LEN`; min
            at least :data:`MIN_MOVES_FACTS`.

    Returns:
        ``n`` samples with task :data:`MOVES_TASK`, the question asked after the last fact.

    Raises:
        ValueError: For a bad ``n`` or story length.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    lo, hi = story_len if story_len is not None else MOVES_STORY_LEN
    if not MIN_MOVES_FACTS <= lo <= hi:
        raise ValueError(
            f"{MOVES_TASK} story_len must satisfy {MIN_MOVES_FACTS} <= min <= max, got {(lo, hi)}"
        )
    rng = random.Random(f"{MOVES_TASK}-{seed}")
    samples = []
    while len(samples) < n:
        for _ in range(_MAX_ATTEMPTS):
            planned = _one_story(rng.randint(lo, hi), rng)
            if planned is not None and lo <= len(planned[0]) <= hi:
                break
        else:
            raise RuntimeError(f"could not plan a {MOVES_TASK} story of {lo}-{hi} facts")
        events, holder, target = planned
        take = max(i for i, e in enumerate(events) if e == ("take", holder, target))
        moved = max(i for i, e in enumerate(events) if e[:2] == ("move", holder))
        answer = story_support(events, target)
        if answer is None or answer[1] != sorted({take, moved}):
            raise RuntimeError(f"{MOVES_TASK}: the plan and the simulation disagree: {events}")
        story = [_render(e, rng) for e in events]
        samples.append(
            BabiSample(story, f"Where is the {target}?", answer[0], answer[1], MOVES_TASK)
        )
    return samples
