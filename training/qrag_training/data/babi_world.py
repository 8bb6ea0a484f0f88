"""The bAbI world (tasks qa1..qa5): its vocabulary, events and their sentences, reading a
sentence back into an event (:func:`parse_fact`), and simulating a story (:class:`World`) with the
provenance of every piece of state (which sentences support it)."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# --- vocabulary -------------------------------------------------------------------------

QA1_ACTORS: tuple[str, ...] = ("Mary", "John", "Sandra", "Daniel")
QA5_ACTORS: tuple[str, ...] = ("Fred", "Bill", "Mary", "Jeff")
#: Every person name any task uses (noise sources filter sentences mentioning these).
NAMES: tuple[str, ...] = tuple(dict.fromkeys(QA1_ACTORS + QA5_ACTORS))
LOCATIONS: tuple[str, ...] = ("bathroom", "hallway", "garden", "office", "bedroom", "kitchen")
OBJECTS: tuple[str, ...] = ("football", "apple", "milk")
DIRECTIONS: tuple[str, ...] = ("north", "south", "east", "west")
OPPOSITE: dict[str, str] = {"north": "south", "south": "north", "east": "west", "west": "east"}

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

# Event kinds.
MOVE, PICK, DROP, GIVE, REL = "move", "pick", "drop", "give", "rel"

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
