"""A small seeded corpus of made-up towns for the question-generation tests: each town's founder
(a name no other document has), years and counts (answers), and a twin town named in two
documents (bridges)."""

from __future__ import annotations

import random

FIRST = ["Oren", "Ilsa", "Tobias", "Mara", "Edric", "Sela", "Bram", "Wenna", "Corin", "Lysa"]
LAST = ["Kask", "Varn", "Quill", "Fenwick", "Holl", "Brannock", "Tarrow", "Meade", "Ostrin"]
STEMS = ["Alder", "Brack", "Corv", "Dun", "Ester", "Fallow", "Grey", "Hollin", "Ivor", "Jessen"]
ENDS = ["mere", "water", "ell", "marrow", "gard", "holt", "ford", "wick"]
RIVERS = ["Tamber", "Sollow", "Kessel", "Wenmoor"]


def town_names(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct made-up town names."""
    names = [s + e for s in STEMS for e in ENDS]
    return rng.sample(names, n)


def documents(n: int = 24, seed: int = 0) -> list[dict[str, str]]:
    """``n`` documents ``{"id", "title", "text"}``, each about one town; town ``i`` names town
    ``i + 1`` as its twin."""
    rng = random.Random(seed)
    towns = town_names(n, rng)
    founders = rng.sample([f"{f} {la}" for f in FIRST for la in LAST], n)
    docs = []
    for i, town in enumerate(towns):
        twin, river = towns[(i + 1) % n], rng.choice(RIVERS)
        year, people, mills = rng.randint(1100, 1900), rng.randint(200, 9000), rng.randint(2, 40)
        text = (
            f"{town} is a market town on the {river} river. "
            f"It was founded in {year} by {founders[i]}. "
            f"The town has {mills} water mills and about {people} inhabitants.\n\n"
            f"Its twin town is {twin}, which lies {rng.randint(3, 90)} miles upstream. "
            f"Every spring the fishermen hold a regatta on the {river}."
        )
        docs.append({"id": f"town-{i}", "title": town, "text": text})
    return docs
