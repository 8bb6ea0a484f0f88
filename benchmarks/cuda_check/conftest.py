"""The test suite's tiny-model fixtures for ``test_cuda_paths.py`` (outside ``tests/``, since the
suite runs everywhere without skips and this check needs a GPU): ``tests/conftest.py`` loaded by
path, ``tests/`` on the path for ``search_reference``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests"
sys.path.insert(0, str(TESTS))
_spec = importlib.util.spec_from_file_location("qrag_tests_conftest", TESTS / "conftest.py")
assert _spec is not None and _spec.loader is not None
_suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_suite)

tiny_bert_dir = _suite.tiny_bert_dir
make_model = _suite.make_model
