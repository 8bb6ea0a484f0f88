"""The README's main command runs: the demo over the bundled sample."""

from __future__ import annotations

from qrag_integrations import demo


def test_bundled_sample_is_consistent():
    sample = demo.load_sample()
    assert sample["question"].endswith("?") and sample["answer"]
    assert all(0 <= i < len(sample["chunks"]) for i in sample["support"])
    # the answer is named by one of the supporting facts (qa2: the holder's last location)
    assert any(sample["answer"] in sample["chunks"][i] for i in sample["support"])


def test_demo_runs_both_frameworks(tiny_bert_dir, capsys):
    demo.main(["--checkpoint", str(tiny_bert_dir), "--k", "2", "--reader", "none"])
    out = capsys.readouterr().out
    assert "LangChain" in out and "LlamaIndex" in out
    assert out.count("step 1") == 2 and out.count("step 2") == 2  # one trace per framework
    assert "supporting facts found" in out
