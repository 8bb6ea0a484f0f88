"""``VLLMReader``: the engine's API through a stand-in ``vllm`` module, and the real one where it
starts (vLLM is an optional extra; on this CPU machine it must fail with ``ReaderUnavailable``)."""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from qrag_integrations.llm import ReaderError, ReaderUnavailable, VLLMReader, smollm2_path


@dataclass
class FakeParams:
    temperature: float = 1.0
    max_tokens: int = 16


class FakeLLM:
    """Answers like ``vllm.LLM``: one RequestOutput-shaped object per prompt or conversation."""

    calls: ClassVar[list[tuple[str, Any, FakeParams]]] = []

    def __init__(self, model: str, **options: Any) -> None:
        self.model, self.options = model, options

    @staticmethod
    def _output(text: str) -> Any:
        return types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f" {text}\nmore")])

    def chat(self, messages: Any, sampling_params: FakeParams, use_tqdm: bool = True) -> list[Any]:
        FakeLLM.calls.append(("chat", messages, sampling_params))
        return [self._output(conv[-1]["content"].upper()) for conv in messages]

    def generate(
        self, prompts: Any, sampling_params: FakeParams, use_tqdm: bool = True
    ) -> list[Any]:
        FakeLLM.calls.append(("generate", prompts, sampling_params))
        return [self._output(p[::-1]) for p in prompts]


def fake_vllm(monkeypatch: pytest.MonkeyPatch, llm: type = FakeLLM) -> None:
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = llm, FakeParams  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.calls = []


def test_chat_mode_sends_conversations_with_greedy_params(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_vllm(monkeypatch)
    reader = VLLMReader(
        "some/model", max_tokens=7, system_prompt="be brief", engine_options={"max_model_len": 4096}
    )
    assert reader._engine.options == {"max_model_len": 4096} and reader.name == "vllm:some/model"
    assert reader.generate(["where", "who"]) == ["WHERE", "WHO"]
    assert reader.generate([]) == []
    ((kind, conversations, params),) = FakeLLM.calls
    assert kind == "chat" and params == FakeParams(temperature=0, max_tokens=7)
    assert conversations[0] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "where"},
    ]


def test_plain_mode_sends_the_prompts_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_vllm(monkeypatch)
    assert VLLMReader("m", chat=False).generate(["abc", "xy"]) == ["cba", "yx"]
    assert FakeLLM.calls[0][:2] == ("generate", ["abc", "xy"])


def test_vllm_not_importable_is_reader_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(
        ReaderUnavailable,
        match=r"vLLM is not usable here \(ModuleNotFoundError.*qrag-integrations\[vllm\]",
    ):
        VLLMReader("m")


def test_an_engine_that_cannot_start_is_reader_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoDevice(FakeLLM):
        def __init__(self, model: str, **options: Any) -> None:
            raise RuntimeError("Failed to infer device type")

    fake_vllm(monkeypatch, NoDevice)
    with pytest.raises(
        ReaderUnavailable,
        match="vLLM engine could not start here: RuntimeError: Failed to infer device type",
    ):
        VLLMReader("m")


def test_an_engine_failure_while_generating_is_a_reader_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Crashes(FakeLLM):
        def chat(self, *args: Any, **kwargs: Any) -> list[Any]:
            raise ValueError("prompt too long")

    fake_vllm(monkeypatch, Crashes)
    with pytest.raises(ReaderError, match="vllm:m failed to generate: ValueError: prompt too long"):
        VLLMReader("m").generate(["q"])


def test_the_real_engine_answers_or_is_reader_unavailable() -> None:
    """Where vLLM runs (a GPU machine with the ``vllm`` extra) it answers; anywhere else the
    failure must be a ``ReaderUnavailable`` with the cause, never vLLM's own exception. The model
    is ``$QRAG_TEST_VLLM_MODEL`` (default: the SmolLM2 GGUF file). No ``pytest.skip``: the suite
    never skips (``tests/project/test_packaging.py``)."""
    model = os.environ.get("QRAG_TEST_VLLM_MODEL") or str(smollm2_path())
    try:
        reader = VLLMReader(model, max_tokens=8)
    except ReaderUnavailable as exc:
        assert str(exc).startswith(("vLLM is not usable here", "vLLM engine could not start here"))
        return
    assert len(reader.generate(["What is the capital of France?"])) == 1
