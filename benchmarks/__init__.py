"""Benchmarks of qrag-integrations, one folder (a package) per benchmark: its script(s), report
and ``results/``. Run them from the repository root as modules, e.g.
``python -m benchmarks.hotpotqa.run --help``; shared code is in :mod:`benchmarks.harness`, the
metrics and baselines are the trainer's (:mod:`qrag_training.metrics`,
:mod:`qrag_training.baselines`).

Importing the package sets ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (unless already set):
models come from installed packages, before anything loads ``transformers``.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
