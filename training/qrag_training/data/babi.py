"""A seeded generator of bAbI-style stories for tasks qa1..qa5, and bAbI's text format.

The tasks (Weston et al., 2015, "Towards AI-Complete Question Answering"):

- ``qa1`` single supporting fact: people move between rooms; "Where is Mary?".
- ``qa2`` two supporting facts: people also pick up and drop objects;
  "Where is the football?" (the holder's pickup and the holder's latest move).
- ``qa3`` three supporting facts: "Where was the football before the kitchen?".
- ``qa4`` two-argument relations: "The kitchen is north of the bedroom.";
  "What is north of the bedroom?" / "What is the kitchen north of?".
- ``qa5`` three-argument relations: "Fred gave the apple to Bill."; "Who gave the apple to
  Bill?", "What did Fred give to Bill?", "Who received the apple?", ...

Nothing is guessed: every story is a sequence of world events, the answer is obtained by
re-reading the rendered sentences (:func:`parse_fact`) and simulating the world
(:class:`World`), and the supporting facts are the provenance that the simulation attaches
to every piece of state (which sentences establish where a person is, who holds an object,
where an object lies). The generator checks that simulating only the supporting sentences
gives the same answer.

This module is our own code; it reproduces bAbI's sentence style, not its source.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from qrag_training.data.babi_answers import _GIVE_FORMS, answer_question
from qrag_training.data.babi_world import (
    DEFAULT_STORY_LEN,
    DIRECTIONS,
    DROP,
    GIVE,
    LOCATIONS,
    MAX_QA4_FACTS,
    MIN_STORY_LEN,
    MOVE,
    OBJECTS,
    OPPOSITE,
    PICK,
    QA1_ACTORS,
    QA5_ACTORS,
    REL,
    TASKS,
    Event,
    World,
    render_event,
)

_MAX_ATTEMPTS = 200  # story re-draws before giving up on one sample
_PREFER_TRICKY = 0.5  # qa1/qa2: chance to prefer a question whose answer changed over time
_GRID_STEP: dict[str, tuple[int, int]] = {
    "north": (0, 1),
    "south": (0, -1),
    "east": (1, 0),
    "west": (-1, 0),
}
_KIND_WEIGHTS: dict[str, dict[str, float]] = {
    "qa1": {MOVE: 1.0},
    "qa2": {MOVE: 0.5, PICK: 0.3, DROP: 0.2},
    "qa3": {MOVE: 0.55, PICK: 0.3, DROP: 0.15},
    "qa5": {MOVE: 0.3, PICK: 0.2, DROP: 0.1, GIVE: 0.4},
}


@dataclass(frozen=True)
class BabiSample:
    """One bAbI question over a story.

    Attributes:
        story: The story sentences, in order.
        question: The question.
        answer: The single-word answer.
        supporting: Sorted indices into ``story`` of the supporting facts.
        task: The task name ("qa1".."qa5"), empty if unknown.
    """

    story: list[str]
    question: str
    answer: str
    supporting: list[int]
    task: str = ""


def _options(world: World, actors: Sequence[str], kind: str) -> list[Event]:
    placed = [a for a in actors if a in world.actor_loc]
    if kind == MOVE:
        return [
            Event(MOVE, actor=a, loc=loc)
            for a in actors
            for loc in LOCATIONS
            if a not in world.actor_loc or world.actor_loc[a].value != loc
        ]
    if kind == PICK:
        out = []
        for obj in OBJECTS:
            if obj in world.holder:
                continue
            lies = world.lying.get(obj)
            out += [
                Event(PICK, actor=a, obj=obj)
                for a in placed
                if lies is None or lies.value == world.actor_loc[a].value
            ]
        return out
    if kind == DROP:
        return [Event(DROP, actor=h.value, obj=o) for o, h in world.holder.items()]
    if kind == GIVE:
        return [
            Event(GIVE, actor=h.value, obj=o, other=b)
            for o, h in world.holder.items()
            for b in placed
            if b != h.value and world.actor_loc[b].value == world.actor_loc[h.value].value
        ]
    raise ValueError(f"unknown event kind {kind!r}")


def _random_story(task: str, n: int, rng: random.Random) -> tuple[list[Event], World]:
    actors = QA5_ACTORS if task == "qa5" else QA1_ACTORS
    weights = _KIND_WEIGHTS[task]
    world, events = World(), []
    while len(events) < n:
        options = {k: _options(world, actors, k) for k in weights}
        kinds = [k for k in weights if options[k]]
        kind = rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
        event = rng.choice(options[kind])
        world.apply(event, len(events))
        events.append(event)
    return events, world


def _pick(rng: random.Random, preferred: list[str], others: list[str]) -> str | None:
    if preferred and (not others or rng.random() < _PREFER_TRICKY):
        return rng.choice(preferred)
    pool = preferred + others
    return rng.choice(pool) if pool else None


def _question_qa1(world: World, rng: random.Random) -> str | None:
    moved_twice = [a for a in world.actor_loc if world.moves[a] > 1]
    once = [a for a in world.actor_loc if world.moves[a] == 1]
    actor = _pick(rng, moved_twice, once)
    return None if actor is None else f"Where is {actor}?"


def _question_qa2(world: World, rng: random.Random) -> str | None:
    carried, other = [], []
    for obj in OBJECTS:
        where = world.object_location(obj)
        if where is None:
            continue
        held_by = world.holder.get(obj)
        # Tricky case: picked up, then the holder moved (answer is not in the pickup's room).
        if held_by is not None and max(where.support) > max(held_by.support):
            carried.append(obj)
        else:
            other.append(obj)
    obj = _pick(rng, carried, other)
    return None if obj is None else f"Where is the {obj}?"


def _question_qa3(world: World, rng: random.Random) -> str | None:
    options = []
    for obj, stays in world.history.items():
        counts = Counter(s.loc for s in stays)
        options += [(obj, s.loc) for i, s in enumerate(stays) if i > 0 and counts[s.loc] == 1]
    if not options:
        return None
    obj, loc = rng.choice(options)
    return f"Where was the {obj} before the {loc}?"


def _question_qa5(world: World, rng: random.Random) -> str | None:
    forms = []
    for template, _, keys, _ in _GIVE_FORMS:
        counts = Counter(tuple(getattr(e, k) for k in keys) for _, e in world.gives)
        unique = [e for _, e in world.gives if counts[tuple(getattr(e, k) for k in keys)] == 1]
        if unique:
            forms.append((template, unique))
    if not forms:
        return None
    template, events = rng.choice(forms)
    event = rng.choice(events)
    return template.format(actor=event.actor, obj=event.obj, other=event.other)


_QUESTIONERS: dict[str, Callable[[World, random.Random], str | None]] = {
    "qa1": _question_qa1,
    "qa2": _question_qa2,
    "qa3": _question_qa3,
    "qa5": _question_qa5,
}


def _qa4_story(n_facts: int, rng: random.Random) -> tuple[list[Event], str]:
    """Lay rooms out on a grid (a random tree of adjacent cells) and state its edges."""
    rooms = rng.sample(LOCATIONS, n_facts + 1)
    cell = {rooms[0]: (0, 0)}
    taken = {(0, 0)}
    events: list[Event] = []
    for room in rooms[1:]:
        while True:
            anchor = rng.choice(list(cell))
            direction = rng.choice(DIRECTIONS)
            dx, dy = _GRID_STEP[direction]
            pos = (cell[anchor][0] + dx, cell[anchor][1] + dy)
            if pos not in taken:
                break
        cell[room] = pos
        taken.add(pos)
        if rng.random() < 0.5:  # state it either way round
            events.append(Event(REL, loc=room, direction=direction, other=anchor))
        else:
            events.append(Event(REL, loc=anchor, direction=OPPOSITE[direction], other=room))
    rng.shuffle(events)
    asked = rng.choice(events)
    direction, x, y = asked.direction, asked.loc, asked.other
    if rng.random() < 0.5:  # ask about the inverse reading of the same fact
        direction, x, y = OPPOSITE[direction], y, x
    if rng.random() < 0.5:
        question = f"What is {direction} of the {y}?"
    else:
        question = f"What is the {x} {direction} of?"
    return events, question


def _one_sample(task: str, lo: int, hi: int, rng: random.Random) -> BabiSample:
    for _ in range(_MAX_ATTEMPTS):
        n = rng.randint(lo, hi)
        if task == "qa4":
            events, question = _qa4_story(n, rng)
        else:
            events, world = _random_story(task, n, rng)
            question = _QUESTIONERS[task](world, rng)
            if question is None:
                continue
        story = [render_event(e, rng) for e in events]
        answer, support = answer_question(story, question)
        sub_answer, _ = answer_question([story[i] for i in support], question, ids=support)
        if sub_answer != answer:
            raise RuntimeError(f"supporting facts do not determine the answer: {story} {question}")
        return BabiSample(story, question, answer, support, task)
    raise RuntimeError(f"could not generate a {task} sample with story length in [{lo}, {hi}]")


def generate_babi(
    task: str, n: int, seed: int, story_len: tuple[int, int] | None = None
) -> list[BabiSample]:
    """Generate bAbI-style samples.

    Args:
        task: One of "qa1".."qa5".
        n: Number of samples.
        seed: Random seed; the same arguments always give the same samples.
        story_len: Inclusive (min, max) number of story sentences (for qa4: relation facts,
            at most :data:`MAX_QA4_FACTS`); default :data:`DEFAULT_STORY_LEN` for the task;
            min must be at least :data:`MIN_STORY_LEN` of the task.

    Returns:
        ``n`` samples, one question each, asked at the end of the story.

    Raises:
        ValueError: For an unknown task or a bad story length.
    """
    if task not in TASKS:
        raise ValueError(f"unknown bAbI task {task!r}; valid tasks: {', '.join(TASKS)}")
    lo, hi = story_len if story_len is not None else DEFAULT_STORY_LEN[task]
    if not MIN_STORY_LEN[task] <= lo <= hi:
        raise ValueError(
            f"{task} story_len must satisfy {MIN_STORY_LEN[task]} <= min <= max, got {(lo, hi)}"
        )
    if task == "qa4" and hi > MAX_QA4_FACTS:
        raise ValueError(f"qa4 stories have at most {MAX_QA4_FACTS} facts, got {(lo, hi)}")
    rng = random.Random(f"babi-{task}-{seed}")
    return [_one_sample(task, lo, hi, rng) for _ in range(n)]


# --- bAbI's text format -----------------------------------------------------------------


def write_babi_format(samples: Iterable[BabiSample], path: str | Path) -> None:
    r"""Write samples in bAbI's text format, one story (restarting at line 1) per sample.

    Fact lines are ``"<id> <sentence>"``; the question line is
    ``"<id> <question>\\t<answer>\\t<supporting ids>"`` with 1-based, space-separated ids.

    Args:
        samples: The samples.
        path: Output file.
    """
    lines = []
    for s in samples:
        lines += [f"{i} {sentence}" for i, sentence in enumerate(s.story, start=1)]
        ids = " ".join(str(i + 1) for i in s.supporting)
        lines.append(f"{len(s.story) + 1} {s.question}\t{s.answer}\t{ids}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def parse_babi_format(path: str | Path, task: str = "") -> list[BabiSample]:
    """Read a file in bAbI's text format.

    A story may hold several questions (as in the original bAbI files); each becomes one
    sample whose story is every fact line before it (question lines are not facts).

    Args:
        path: The file.
        task: Task name stored on the samples.

    Returns:
        The samples, in file order.

    Raises:
        ValueError: On a malformed line (reported with its line number).
    """
    samples: list[BabiSample] = []
    facts: list[str] = []
    fact_pos: dict[int, int] = {}
    for line_no, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        head, _, rest = raw.partition(" ")
        if not head.isdigit() or not rest:
            raise ValueError(f"{path}:{line_no}: expected '<id> <text>', got {raw!r}")
        line_id = int(head)
        if line_id == 1:
            facts, fact_pos = [], {}
        if "\t" not in rest:
            fact_pos[line_id] = len(facts)
            facts.append(rest.strip())
            continue
        parts = rest.split("\t")
        if len(parts) < 2:
            raise ValueError(f"{path}:{line_no}: question line needs '\\t<answer>'")
        try:
            support = sorted(fact_pos[int(i)] for i in parts[2].split()) if len(parts) > 2 else []
        except (KeyError, ValueError) as err:
            raise ValueError(f"{path}:{line_no}: bad supporting fact ids {parts[2]!r}") from err
        samples.append(BabiSample(list(facts), parts[0].strip(), parts[1].strip(), support, task))
    return samples
