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
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# --- vocabulary -------------------------------------------------------------------------

QA1_ACTORS: tuple[str, ...] = ("Mary", "John", "Sandra", "Daniel")
QA5_ACTORS: tuple[str, ...] = ("Fred", "Bill", "Mary", "Jeff")
#: Every person name any task uses (noise sources filter sentences mentioning these).
NAMES: tuple[str, ...] = tuple(dict.fromkeys(QA1_ACTORS + QA5_ACTORS))
LOCATIONS: tuple[str, ...] = ("bathroom", "hallway", "garden", "office", "bedroom", "kitchen")
OBJECTS: tuple[str, ...] = ("football", "apple", "milk")
DIRECTIONS: tuple[str, ...] = ("north", "south", "east", "west")
OPPOSITE: dict[str, str] = {"north": "south", "south": "north", "east": "west", "west": "east"}
_GRID_STEP: dict[str, tuple[int, int]] = {
    "north": (0, 1),
    "south": (0, -1),
    "east": (1, 0),
    "west": (-1, 0),
}

MOVE_VERBS: tuple[str, ...] = (
    "moved to",
    "went to",
    "journeyed to",
    "travelled to",
    "went back to",
)
PICK_VERBS: tuple[str, ...] = ("picked up", "got", "grabbed", "took")
DROP_VERBS: tuple[str, ...] = ("dropped", "discarded", "put down", "left")
GIVE_VERBS: tuple[str, ...] = ("gave", "handed", "passed")
#: Suffix bAbI sometimes adds to pick-up / drop sentences ("John got the milk there.").
THERE_SUFFIX = " there"

TASKS: tuple[str, ...] = ("qa1", "qa2", "qa3", "qa4", "qa5")
#: Default (min, max) number of story sentences per task (for qa4: relation facts).
DEFAULT_STORY_LEN: dict[str, tuple[int, int]] = {
    "qa1": (4, 12),
    "qa2": (6, 20),
    "qa3": (8, 30),
    "qa4": (2, 2),
    "qa5": (6, 20),
}
#: Shortest story that can answer each task's question (qa5: two moves, a pickup, a giving).
MIN_STORY_LEN: dict[str, int] = {"qa1": 1, "qa2": 2, "qa3": 3, "qa4": 1, "qa5": 4}
#: qa4 places distinct rooms on a grid, one relation fact per room after the first.
MAX_QA4_FACTS = len(LOCATIONS) - 1
_MAX_ATTEMPTS = 200  # story re-draws before giving up on one sample
_PREFER_TRICKY = 0.5  # qa1/qa2: chance to prefer a question whose answer changed over time

# Event kinds.
MOVE, PICK, DROP, GIVE, REL = "move", "pick", "drop", "give", "rel"
_KIND_WEIGHTS: dict[str, dict[str, float]] = {
    "qa1": {MOVE: 1.0},
    "qa2": {MOVE: 0.5, PICK: 0.3, DROP: 0.2},
    "qa3": {MOVE: 0.55, PICK: 0.3, DROP: 0.15},
    "qa5": {MOVE: 0.3, PICK: 0.2, DROP: 0.1, GIVE: 0.4},
}

# --- sentence <-> event -----------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One story fact as structured data.

    Attributes:
        kind: One of "move", "pick", "drop", "give", "rel".
        actor: The person acting (move/pick/drop/give).
        obj: The object (pick/drop/give).
        loc: The destination (move), or the first location of a relation.
        other: The recipient (give), or the second location of a relation.
        direction: The relation's direction ("rel": ``loc`` is ``direction`` of ``other``).
    """

    kind: str
    actor: str = ""
    obj: str = ""
    loc: str = ""
    other: str = ""
    direction: str = ""


def _alt(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_NAME = r"[A-Z][a-z]+"
_WORD = r"[a-z]+"
_DIR = _alt(DIRECTIONS)
_MOVE_RE = re.compile(rf"^(?P<a>{_NAME}) (?:{_alt(MOVE_VERBS)}) the (?P<l>{_WORD})\.$")
_PICK_RE = re.compile(
    rf"^(?P<a>{_NAME}) (?:{_alt(PICK_VERBS)}) the (?P<o>{_WORD})(?:{THERE_SUFFIX})?\.$"
)
_DROP_RE = re.compile(
    rf"^(?P<a>{_NAME}) (?:{_alt(DROP_VERBS)}) the (?P<o>{_WORD})(?:{THERE_SUFFIX})?\.$"
)
_GIVE_RE = re.compile(
    rf"^(?P<a>{_NAME}) (?:{_alt(GIVE_VERBS)}) the (?P<o>{_WORD}) to (?P<b>{_NAME})\.$"
)
_REL_RE = re.compile(rf"^The (?P<x>{_WORD}) is (?P<d>{_DIR}) of the (?P<y>{_WORD})\.$")


def render_event(event: Event, rng: random.Random) -> str:
    """Write an event as a bAbI sentence, with a randomly chosen verb.

    Args:
        event: The event.
        rng: Source of the verb choice.

    Returns:
        The sentence, e.g. "Mary journeyed to the bathroom.".
    """
    if event.kind == MOVE:
        return f"{event.actor} {rng.choice(MOVE_VERBS)} the {event.loc}."
    if event.kind in (PICK, DROP):
        verb = rng.choice(PICK_VERBS if event.kind == PICK else DROP_VERBS)
        there = THERE_SUFFIX if rng.random() < 0.5 else ""
        return f"{event.actor} {verb} the {event.obj}{there}."
    if event.kind == GIVE:
        return f"{event.actor} {rng.choice(GIVE_VERBS)} the {event.obj} to {event.other}."
    if event.kind == REL:
        return f"The {event.loc} is {event.direction} of the {event.other}."
    raise ValueError(f"unknown event kind {event.kind!r}")


def parse_fact(sentence: str) -> Event:
    """Read a bAbI story sentence back into an event.

    Args:
        sentence: One story sentence in the style :func:`render_event` writes.

    Returns:
        The event.

    Raises:
        ValueError: If the sentence matches no known fact pattern.
    """
    s = sentence.strip()
    if m := _MOVE_RE.match(s):
        return Event(MOVE, actor=m["a"], loc=m["l"])
    if m := _PICK_RE.match(s):
        return Event(PICK, actor=m["a"], obj=m["o"])
    if m := _DROP_RE.match(s):
        return Event(DROP, actor=m["a"], obj=m["o"])
    if m := _GIVE_RE.match(s):
        return Event(GIVE, actor=m["a"], obj=m["o"], other=m["b"])
    if m := _REL_RE.match(s):
        return Event(REL, loc=m["x"], direction=m["d"], other=m["y"])
    raise ValueError(f"not a bAbI fact: {sentence!r}")


# --- the world, with provenance ---------------------------------------------------------


@dataclass(frozen=True)
class Known:
    """A piece of world state and the ids of the story sentences that establish it."""

    value: str
    support: frozenset[int]


@dataclass
class _Stay:
    """One stretch of an object's location history."""

    loc: str
    arrival: frozenset[int]  # sentences establishing the object's arrival here
    latest: frozenset[int]  # latest sentences establishing that it is (still) here


@dataclass
class World:
    """The state of a bAbI world, each fact annotated with the sentences that prove it.

    Apply events in story order with :meth:`apply`; the sentence index passed along becomes
    the provenance of the state it changes.
    """

    actor_loc: dict[str, Known] = field(default_factory=dict)
    holder: dict[str, Known] = field(default_factory=dict)
    lying: dict[str, Known] = field(default_factory=dict)  # where a non-held object lies
    history: dict[str, list[_Stay]] = field(default_factory=dict)
    gives: list[tuple[int, Event]] = field(default_factory=list)
    relations: list[tuple[int, Event]] = field(default_factory=list)
    moves: Counter[str] = field(default_factory=Counter)

    def object_location(self, obj: str) -> Known | None:
        """Where an object is now, with provenance; None if that is not known."""
        held_by = self.holder.get(obj)
        if held_by is None:
            return self.lying.get(obj)
        where = self.actor_loc.get(held_by.value)
        if where is None:
            return None
        return Known(where.value, held_by.support | where.support)

    def held_objects(self, actor: str) -> list[str]:
        """List the objects a person holds."""
        return [o for o, h in self.holder.items() if h.value == actor]

    def _record(self, obj: str) -> None:
        now = self.object_location(obj)
        if now is None:
            return
        stays = self.history.setdefault(obj, [])
        if stays and stays[-1].loc == now.value:
            stays[-1].latest = now.support
        else:
            stays.append(_Stay(now.value, now.support, now.support))

    def apply(self, event: Event, idx: int) -> None:
        """Update the state with one event.

        Args:
            event: The event.
            idx: Index of the event's sentence in the story (its provenance id).
        """
        here = frozenset({idx})
        if event.kind == MOVE:
            self.actor_loc[event.actor] = Known(event.loc, here)
            self.moves[event.actor] += 1
            for obj in self.held_objects(event.actor):
                self._record(obj)
        elif event.kind == PICK:
            self.lying.pop(event.obj, None)
            self.holder[event.obj] = Known(event.actor, here)
            self._record(event.obj)
        elif event.kind == DROP:
            self.holder.pop(event.obj, None)
            where = self.actor_loc.get(event.actor)
            if where is None:
                self.lying.pop(event.obj, None)
            else:
                self.lying[event.obj] = Known(where.value, here | where.support)
            self._record(event.obj)
        elif event.kind == GIVE:
            self.lying.pop(event.obj, None)
            self.holder[event.obj] = Known(event.other, here)
            self.gives.append((idx, event))
            self._record(event.obj)
        elif event.kind == REL:
            self.relations.append((idx, event))
        else:
            raise ValueError(f"unknown event kind {event.kind!r}")


def simulate(story: Sequence[str], ids: Sequence[int] | None = None) -> World:
    """Parse and apply story sentences in order.

    Args:
        story: The story sentences.
        ids: Provenance id of each sentence (default: its index in ``story``).

    Returns:
        The final world state.
    """
    world = World()
    for pos, sentence in enumerate(story):
        world.apply(parse_fact(sentence), pos if ids is None else ids[pos])
    return world


# --- questions --------------------------------------------------------------------------

_Q_WHERE_ACTOR = re.compile(rf"^Where is (?P<a>{_NAME})\?$")
_Q_WHERE_OBJ = re.compile(rf"^Where is the (?P<o>{_WORD})\?$")
_Q_BEFORE = re.compile(rf"^Where was the (?P<o>{_WORD}) before the (?P<l>{_WORD})\?$")
_Q_DIR_OF = re.compile(rf"^What is (?P<d>{_DIR}) of the (?P<y>{_WORD})\?$")
_Q_IS_DIR_OF = re.compile(rf"^What is the (?P<x>{_WORD}) (?P<d>{_DIR}) of\?$")
_SLOT_PATTERNS = {"actor": _NAME, "obj": _WORD, "other": _NAME}


def _template_regex(template: str) -> re.Pattern[str]:
    """Compile a question template such as "Who gave the {obj}?" into an anchored regex."""
    pattern = re.escape(template)
    for slot, sub in _SLOT_PATTERNS.items():
        pattern = pattern.replace(re.escape("{" + slot + "}"), f"(?P<{slot}>{sub})")
    return re.compile(f"^{pattern}$")


# qa5 question forms: (template, give-event fields forming the key, field answered).
_GIVE_TEMPLATES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("Who gave the {obj} to {other}?", ("obj", "other"), "actor"),
    ("What did {actor} give to {other}?", ("actor", "other"), "obj"),
    ("Who received the {obj}?", ("obj",), "other"),
    ("Who gave the {obj}?", ("obj",), "actor"),
    ("Who did {actor} give the {obj} to?", ("actor", "obj"), "other"),
)
_GIVE_FORMS = tuple((t, _template_regex(t), keys, target) for t, keys, target in _GIVE_TEMPLATES)


def _last_give(world: World, **want: str) -> tuple[int, Event]:
    hits = [(i, e) for i, e in world.gives if all(getattr(e, k) == v for k, v in want.items())]
    if not hits:
        raise ValueError(f"no giving event matches {want}")
    return hits[-1]


def _relations(world: World) -> list[tuple[int, str, str, str]]:
    """Stated relations plus their inverses, as (sentence id, x, direction, y)."""
    out = []
    for idx, e in world.relations:
        out.append((idx, e.loc, e.direction, e.other))
        out.append((idx, e.other, OPPOSITE[e.direction], e.loc))
    return out


def answer_question(
    story: Sequence[str], question: str, ids: Sequence[int] | None = None
) -> tuple[str, list[int]]:
    """Answer a bAbI question by simulating the story.

    Where several facts match (e.g. two givings of the apple to Bill), the latest counts.

    Args:
        story: The story sentences, in order.
        question: A question of one of the qa1..qa5 forms.
        ids: Provenance id of each sentence (default: its index in ``story``).

    Returns:
        The answer and the sorted ids of the sentences it follows from.

    Raises:
        ValueError: If the question has an unknown form or the story does not answer it.
    """
    world = simulate(story, ids)
    q = question.strip()
    known: Known | None = None
    if m := _Q_WHERE_ACTOR.match(q):
        known = world.actor_loc.get(m["a"])
    elif m := _Q_WHERE_OBJ.match(q):
        known = world.object_location(m["o"])
    elif m := _Q_BEFORE.match(q):
        stays = world.history.get(m["o"], [])
        pos = [i for i, s in enumerate(stays) if s.loc == m["l"] and i > 0]
        if pos:
            before, at = stays[pos[-1] - 1], stays[pos[-1]]
            known = Known(before.loc, before.latest | at.arrival)
    elif m := _Q_DIR_OF.match(q):
        hits = [(i, x) for i, x, d, y in _relations(world) if d == m["d"] and y == m["y"]]
        if hits:
            known = Known(hits[-1][1], frozenset({hits[-1][0]}))
    elif m := _Q_IS_DIR_OF.match(q):
        hits = [(i, y) for i, x, d, y in _relations(world) if d == m["d"] and x == m["x"]]
        if hits:
            known = Known(hits[-1][1], frozenset({hits[-1][0]}))
    else:
        for _, pattern, keys, target in _GIVE_FORMS:
            if m := pattern.match(q):
                idx, ev = _last_give(world, **{k: m[k] for k in keys})
                known = Known(getattr(ev, target), frozenset({idx}))
                break
        else:
            raise ValueError(f"unknown bAbI question form: {question!r}")
    if known is None:
        raise ValueError(f"the story does not answer {question!r}")
    return known.value, sorted(known.support)


# --- generation -------------------------------------------------------------------------


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
