"""LangChain's standard retriever integration suite run against ``QRAGRetriever``.

The suite's properties cannot take pytest fixtures, so the tiny random BERT of
``tests/conftest.py`` is built once, on first use, into a temporary folder removed at exit.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import build_tiny_bert
from langchain_tests.integration_tests import RetrieversIntegrationTests
from retriever_corpus import BABI_TEXTS

from qrag_integrations import QRAGRetriever


@functools.cache
def _tiny_bert_path() -> str:
    root = Path(tempfile.mkdtemp(prefix="qrag-lc-standard-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return str(build_tiny_bert(root / "tiny_bert"))


class TestQRAGRetrieverStandard(RetrieversIntegrationTests):
    # pytest-asyncio runs in strict mode, so the suite's async test needs a mark; anyio's
    # (asyncio backend) ignores the sync tests, and overriding the test to mark it is
    # refused by test_no_overrides_DO_NOT_OVERRIDE.
    pytestmark = pytest.mark.anyio

    @property
    def retriever_constructor(self) -> type[QRAGRetriever]:
        return QRAGRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"texts": list(BABI_TEXTS), "checkpoint": _tiny_bert_path()}

    @property
    def retriever_query_example(self) -> str:
        return "Where is the football?"
