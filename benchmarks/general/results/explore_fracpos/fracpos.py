"""Exploration (session 41): document positions as fractions (order * M / (L - 1)) instead of
their floor; patches the in-memory search's layout, then runs a benchmark module."""

import runpy
import sys

import numpy as np

import qrag_integrations.core.candidates as cand
from qrag_integrations.core.positions import document_layout


def frac_positions(doc_ids, step, span):
    order, length = document_layout(doc_ids)
    m = int(span * step)
    return np.where(length > 1, order * m / np.maximum(length - 1, 1), 0.0)


cand.document_positions = frac_positions
mod = sys.argv[1]
sys.argv = [mod] + sys.argv[2:]
runpy.run_module(mod, run_name="__main__")
