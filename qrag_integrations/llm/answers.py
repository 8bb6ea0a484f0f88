"""Answer exact match and F1 with the SQuAD / HotpotQA normalisation.

Written here rather than imported: the reference implementations live in evaluation scripts
(SQuAD's, HotpotQA's ``hotpot_evaluate_v1.py``) that are not installable packages, and the
``evaluate`` library fetches its metrics from the Hub at run time, which fails offline.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_em(prediction: str, gold: str) -> float:
    """1.0 when the normalised prediction equals the normalised gold answer."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def answer_f1(prediction: str, gold: str) -> float:
    """Token F1 of the normalised answers (HotpotQA: yes / no / noanswer must match exactly)."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    special = {"yes", "no", "noanswer"}
    if (pred in special or ref in special) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)
