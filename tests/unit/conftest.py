"""Fixtures shared by the unit tests of the core search and the store-backed search."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_core_search import MODES

from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.model import QRAGModel


@pytest.fixture(scope="module")
def make_model(tiny_bert_dir: Path) -> Callable[[str], QRAGModel]:
    """Untrained tiny models by position mode name (:data:`test_core_search.MODES`), built once."""
    cache: dict[str, QRAGModel] = {}

    def get(mode: str) -> QRAGModel:
        if mode not in cache:
            cfg = QRAGConfig(base_model=str(tiny_bert_dir), **MODES[mode])
            cache[mode] = QRAGModel.from_base(cfg).eval()
        return cache[mode]

    return get
