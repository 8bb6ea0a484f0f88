"""Answering a bAbI question from a simulated story: the answer and its supporting sentences."""

from __future__ import annotations

import re
from collections.abc import Sequence

from qrag_training.data.babi_world import (
    _DIR,
    _NAME,
    _WORD,
    OPPOSITE,
    Event,
    Known,
    World,
    simulate,
)

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
