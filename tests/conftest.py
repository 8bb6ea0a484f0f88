"""Shared fixtures: a tiny random BERT built once per session, offline settings."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path

import pytest
import torch

if TYPE_CHECKING:
    from qrag_integrations.core.model import QRAGModel

# Tests run many tiny ops; extra intra-op threads only stall on a busy 2-core machine.
torch.set_num_threads(1)

#: A small English word list; with BERT's special tokens and WordPiece suffixes it covers the
#: test corpora well enough for a random model.
_WORDS = [
    "the",
    "a",
    "an",
    "is",
    "was",
    "to",
    "of",
    "in",
    "on",
    "at",
    "and",
    "or",
    "where",
    "who",
    "what",
    "did",
    "give",
    "gave",
    "got",
    "took",
    "picked",
    "up",
    "dropped",
    "put",
    "left",
    "moved",
    "went",
    "travelled",
    "journeyed",
    "back",
    "mary",
    "john",
    "sandra",
    "daniel",
    "fred",
    "bill",
    "jeff",
    "julie",
    "emma",
    "kitchen",
    "garden",
    "office",
    "bathroom",
    "hallway",
    "bedroom",
    "football",
    "apple",
    "milk",
    "north",
    "south",
    "east",
    "west",
    "before",
    "after",
    "there",
    "here",
    "it",
    "he",
    "she",
    "they",
    "cat",
    "dog",
    "sky",
    "blue",
    "red",
    "green",
    "paris",
    "france",
    "capital",
    "city",
    "river",
    "born",
    "year",
    "film",
    "directed",
    "by",
    "question",
    "answer",
]


def build_tiny_bert(folder: Path, hidden_size: int = 32, seed: int = 0) -> Path:
    """Write a randomly initialised 2-layer BERT and its WordPiece tokenizer to ``folder``."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = list("abcdefghijklmnopqrstuvwxyz0123456789.,?!'")
    vocab = specials + letters + ["##" + c for c in letters] + _WORDS
    vocab = list(dict.fromkeys(vocab))
    # transformers 5 takes the vocabulary itself (`vocab=`), not a vocab_file path.
    tokenizer = BertTokenizerFast(vocab={tok: i for i, tok in enumerate(vocab)}, do_lower_case=True)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=512,
    )
    BertModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder with a tiny random BERT (hidden 32, 2 layers) and tokenizer, HF layout."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_bert_dir_48(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Like ``tiny_bert_dir`` with hidden size 48 (for embedding-size mismatch tests)."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert_48"), hidden_size=48, seed=1)


@pytest.fixture(scope="session", autouse=True)
def _reader_cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Converted reader models (``TransformersReader``'s GGUF cache) go to a folder of this
    session, not the user's ``~/.cache``; a ``QRAG_CACHE_DIR`` set by the caller is kept (a
    persistent one spares the slow tests the SmolLM2 conversion)."""
    if "QRAG_CACHE_DIR" in os.environ:
        yield
        return
    os.environ["QRAG_CACHE_DIR"] = str(tmp_path_factory.mktemp("qrag_cache"))
    yield
    os.environ.pop("QRAG_CACHE_DIR", None)


@pytest.fixture(scope="module")
def make_model(tiny_bert_dir: Path) -> Callable[[str], QRAGModel]:
    """Untrained tiny models by position mode name (:data:`search_reference.MODES`), built once."""
    cache: dict[str, QRAGModel] = {}

    from search_reference import MODES

    from qrag_integrations.core.config import QRAGConfig
    from qrag_integrations.core.model import QRAGModel

    def get(mode: str) -> QRAGModel:
        if mode not in cache:
            cfg = QRAGConfig(base_model=str(tiny_bert_dir), **MODES[mode])
            cache[mode] = QRAGModel.from_base(cfg).eval()
        return cache[mode]

    return get
