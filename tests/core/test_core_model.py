"""QRAGModel: encoders, pooling, twin heads, state text, truncation, trainable layers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from qrag_integrations.core.config import PositionMode, QRAGConfig, StateOrder
from qrag_integrations.core.encoder import MeanPoolEncoder, load_base
from qrag_integrations.core.model import QRAGModel
from qrag_integrations.core.positions import rotate


def paper_config(tiny_bert_dir: Path, **fields) -> QRAGConfig:
    """The paper's model: mean / 10, relative positions, 64-token budgets, document order."""
    return QRAGConfig(
        base_model=str(tiny_bert_dir),
        normalize=False,
        position_mode=PositionMode.RELATIVE,
        max_state_tokens=64,
        max_chunk_tokens=64,
        state_order=StateOrder.DOCUMENT,
        **fields,
    )


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> QRAGModel:
    return QRAGModel.from_base(paper_config(tiny_bert_dir)).eval()


def manual_mean_pool(
    encoder: MeanPoolEncoder, tokenizer, text: str, max_tokens: int, scale: float
) -> torch.Tensor:
    batch = tokenizer([text], truncation=True, max_length=max_tokens, return_tensors="pt")
    with torch.no_grad():
        hidden = encoder.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state
    return hidden[0].mean(0) / scale


def test_tiny_bert_tokenizer_knows_fixture_words(tiny_bert_dir: Path) -> None:
    """The fixture writes a word list into vocab.txt; texts made of those words must not all
    become [UNK] (otherwise every same-length text embeds identically and tests go blind)."""
    _, tokenizer = load_base(str(tiny_bert_dir))
    tokens = tokenizer.tokenize("mary went to the kitchen")
    assert tokens == ["mary", "went", "to", "the", "kitchen"]
    assert len(tokenizer) > 100


def test_embedding_shapes_and_dtypes(model: QRAGModel, tiny_bert_dir_48: Path) -> None:
    assert model.embedding_dim == 32
    with torch.no_grad():
        states = model.embed_states(["where is mary", "what did john give to sandra"])
    assert states.shape == (2, 32) and states.dtype == torch.float32
    chunks = model.embed_chunks(["mary went to the kitchen", "a", "john took the milk there"])
    assert chunks.shape == (3, 32) and chunks.dtype == torch.float32
    assert model.embed_chunks([]).shape == (0, 32)
    assert model.embed_chunks(["a b", "c"], out_dtype=torch.float16).dtype == torch.float16
    assert model.embed_chunks_grad(["a b"]).requires_grad
    m48 = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir_48)))
    assert m48.embedding_dim == 48
    assert m48.embed_chunks(["x"]).shape == (1, 48)


def test_mean_pooling_matches_manual_computation(model: QRAGModel) -> None:
    text = "sandra journeyed to the office"
    with torch.no_grad():
        got = model.embed_states([text])[0]
    expected = manual_mean_pool(model.state_encoder, model.tokenizer, text, 64, 10.0)
    assert torch.allclose(got, expected, atol=1e-6)
    got_chunk = model.embed_chunks([text])[0]
    expected_chunk = manual_mean_pool(model.chunk_encoder, model.tokenizer, text, 64, 10.0)
    assert torch.allclose(got_chunk, expected_chunk, atol=1e-6)


def test_mean_pooling_ignores_padding(model: QRAGModel) -> None:
    short = "where is mary"
    long = "john travelled to the hallway and then the garden and then back to the kitchen again"
    with torch.no_grad():
        alone = model.embed_states([short])[0]
        batched = model.embed_states([long, short])[1]
        assert (
            model.tokenize([long, short], 64)["attention_mask"][1].sum()
            < model.tokenize([long, short], 64)["attention_mask"][0].sum()
        )
    assert torch.allclose(alone, batched, atol=1e-5)
    # embed_chunks sorts by length internally; rows come back in input order
    texts = ["a", long, "mary went to the kitchen", short, "the"]
    rows = model.embed_chunks(texts, batch_size=2)
    for i, t in enumerate(texts):
        assert torch.allclose(rows[i], model.embed_chunks([t])[0], atol=1e-5), i


def test_many_states_are_encoded_in_length_batches_in_input_order(model: QRAGModel) -> None:
    words = ["mary", "went", "to", "the", "kitchen", "garden", "office"]
    texts = [" ".join(words[: 1 + i % 7] * (1 + i % 3)) for i in range(40)]
    with torch.inference_mode():
        together = model.embed_states(texts, batch_size=8)
        alone = torch.cat([model.embed_states([t]) for t in texts])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-4)
    # with gradients on (training) one batch, differentiable
    assert model.embed_states(texts[:3], batch_size=1).requires_grad


def test_length_order_is_by_tokens_after_truncation_across_windows(
    model: QRAGModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Longest first by token count (not characters), capped at the budget, ties in input order,
    the same when lengths are counted in several windows."""
    from qrag_integrations.core import model as model_module

    # "kitchen" is one token of 7 characters, "a b c d" four tokens of 7 characters
    texts = ["kitchen", "a b c d", "mary went to the garden again", "x", "the the the"]
    counts = [len(model.tokenizer(t, truncation=True, max_length=5)["input_ids"]) for t in texts]
    expected = sorted(range(len(texts)), key=lambda i: -counts[i])
    assert model.length_order(texts, 5) == expected
    assert counts[2] == 5 and counts[1] > counts[0]  # truncated to the budget; tokens, not chars
    monkeypatch.setattr(model_module, "LENGTH_WINDOW", 2)
    assert model.length_order(texts, 5) == expected
    assert model.length_order([], 5) == []


def test_output_scale_divides(tiny_bert_dir: Path) -> None:
    m10 = QRAGModel.from_base(paper_config(tiny_bert_dir, output_scale=10.0))
    m4 = QRAGModel.from_base(paper_config(tiny_bert_dir, output_scale=4.0))
    texts = ["mary went back to the garden", "the cat"]
    with torch.no_grad():
        s10, s4 = m10.embed_states(texts), m4.embed_states(texts)
    assert torch.allclose(s4, s10 * 2.5, atol=1e-6)
    assert torch.allclose(m4.embed_chunks(texts), m10.embed_chunks(texts) * 2.5, atol=1e-6)


def test_both_encoders_start_from_base_but_are_separate(model: QRAGModel) -> None:
    s = model.state_encoder.state_dict()
    c = model.chunk_encoder.state_dict()
    assert set(s) == set(c)
    assert all(torch.equal(s[k], c[k]) for k in s)
    key = next(k for k, v in model.state_encoder.named_parameters())
    p_state = dict(model.state_encoder.named_parameters())[key]
    p_chunk = dict(model.chunk_encoder.named_parameters())[key]
    assert p_state.data_ptr() != p_chunk.data_ptr()


def test_twin_q_sum_equals_q_values_and_manual_heads(model: QRAGModel) -> None:
    g = torch.Generator().manual_seed(0)
    states = torch.randn(3, 32, generator=g)
    chunks = torch.randn(7, 32, generator=g)
    pos = torch.tensor([0, 3, 9, 20, 21, 40, 58])
    rotated = rotate(chunks, pos, model.config.rope_theta)
    q1, q2 = model.twin_q(states, rotated)
    assert q1.shape == (3, 7) and q2.shape == (3, 7)
    assert torch.allclose(q1, states[:, :16] @ rotated[:, :16].T, atol=1e-6)
    assert torch.allclose(q2, states[:, 16:] @ rotated[:, 16:].T, atol=1e-6)
    assert torch.allclose(model.q_values(states, chunks, pos), q1 + q2, atol=1e-6)
    # Q1 + Q2 is the full inner product with the rotated chunk
    assert torch.allclose(q1 + q2, states @ rotated.T, atol=1e-5)


def test_q_values_2d_and_3d_chunks_agree(model: QRAGModel) -> None:
    g = torch.Generator().manual_seed(1)
    states = torch.randn(4, 32, generator=g)
    chunks = torch.randn(6, 32, generator=g)
    pos = torch.tensor([0, 4, 9, 13, 18, 20])
    q2d = model.q_values(states, chunks, pos)
    q3d = model.q_values(states, chunks.expand(4, 6, 32), pos.expand(4, 6))
    assert q3d.shape == (4, 6)
    assert torch.allclose(q2d, q3d, atol=1e-5)
    # per-state positions in the 3-D form equal row-by-row 2-D calls
    per_state = torch.stack([pos, pos + 20, pos * 2, torch.zeros_like(pos)])
    q_rows = model.q_values(states, chunks.expand(4, 6, 32), per_state)
    for b in range(4):
        assert torch.allclose(
            q_rows[b], model.q_values(states[b : b + 1], chunks, per_state[b])[0], atol=1e-5
        )
    assert not torch.allclose(q_rows[1], q2d[1], atol=1e-4)  # positions do change Q


def test_none_mode_ignores_positions(tiny_bert_dir: Path) -> None:
    m = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), position_mode=PositionMode.NONE)
    )
    g = torch.Generator().manual_seed(2)
    s, c = torch.randn(2, 32, generator=g), torch.randn(5, 32, generator=g)
    assert torch.allclose(m.q_values(s, c, torch.arange(5) * 7), s @ c.T, atol=1e-6)


def test_state_text_document_vs_pick_order(tiny_bert_dir: Path) -> None:
    doc = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), state_order=StateOrder.DOCUMENT)
    )
    pick = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), state_order=StateOrder.PICK)
    )
    picked = ["third", "first", "second"]
    order = [30, 2, 11]
    assert doc.state_text("q?", picked, order) == "q? [SEP] first [SEP] second [SEP] third"
    assert pick.state_text("q?", picked, order) == "q? [SEP] third [SEP] first [SEP] second"
    # no document keys: pick order either way
    assert doc.state_text("q?", picked) == "q? [SEP] third [SEP] first [SEP] second"
    assert doc.state_text("q?", []) == "q?"
    sep = QRAGModel.from_base(
        QRAGConfig(
            base_model=str(tiny_bert_dir), state_separator=" | ", state_order=StateOrder.DOCUMENT
        )
    )
    assert sep.state_text("q", ["b", "a"], [1, 0]) == "q | a | b"


def test_long_and_odd_texts_are_truncated(model: QRAGModel) -> None:
    huge = " ".join(["mary"] * 10_000)
    assert model.tokenize([huge], model.config.max_chunk_tokens)["input_ids"].shape == (1, 64)
    emb = model.embed_chunks([huge, "mary"])
    assert torch.isfinite(emb).all()
    # everything past the budget is dropped: 10,000 words embed like 500 of the same words
    assert torch.allclose(emb[0], model.embed_chunks([" ".join(["mary"] * 500)])[0], atol=1e-6)
    assert not torch.allclose(emb[0], emb[1], atol=1e-4)
    odd = [
        "中文文本" * 3000,
        "🙂🚀👍🏽 emoji " * 2000,
        "naïve café — ﬁ ligature, Ω, \u200b zero width, \u202e rtl",
        "",
        " ",
        "\x00\x01\n\t",
    ]
    out = model.embed_chunks(odd)
    assert out.shape == (len(odd), 32) and torch.isfinite(out).all()
    ids = model.tokenize(odd, model.config.max_chunk_tokens)["input_ids"]
    assert ids.shape[1] == 64
    with torch.no_grad():
        states = model.embed_states(odd)
    assert states.shape == (len(odd), 32) and torch.isfinite(states).all()


def test_state_budget_is_max_state_tokens(tiny_bert_dir: Path) -> None:
    m = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), max_state_tokens=8, max_chunk_tokens=16)
    )
    text = " ".join(["john"] * 100)
    calls = []
    original = m.tokenize

    def spy(texts, max_tokens):
        calls.append(max_tokens)
        return original(texts, max_tokens)

    m.tokenize = spy  # type: ignore[method-assign]
    with torch.no_grad():
        a = m.embed_states([text])
        b = m.embed_states([" ".join(["john"] * 6)])  # 6 words + [CLS] + [SEP] = 8 tokens
    m.embed_chunks([text])
    assert calls == [8, 8, 16]
    assert torch.allclose(a, b, atol=1e-6)


def test_trainable_layers_freeze_and_trained_state_dict(tiny_bert_dir: Path) -> None:
    m = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1))
    for name in ("state_encoder", "chunk_encoder"):
        for pname, p in getattr(m, name).named_parameters():
            expected = pname.startswith("model.encoder.layer.1.")
            assert p.requires_grad is expected, (name, pname)
    trained = m.trained_state_dict()
    assert trained
    assert all(
        k.startswith(
            ("state_encoder.model.encoder.layer.1.", "chunk_encoder.model.encoder.layer.1.")
        )
        for k in trained
    )
    full = m.state_dict()
    top = {k for k in full if ".encoder.layer.1." in k}
    assert set(trained) == top
    assert all(torch.equal(trained[k], full[k]) for k in trained)

    m2 = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=2))
    names = {k for k, p in m2.named_parameters() if p.requires_grad}
    assert any(".encoder.layer.0." in k for k in names) and any(
        ".encoder.layer.1." in k for k in names
    )
    assert not any("embeddings" in k for k in names)  # embeddings stay frozen

    m_all = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir)))
    assert all(p.requires_grad for p in m_all.parameters())
    assert set(m_all.trained_state_dict()) == set(m_all.state_dict())


def test_mismatched_encoders_are_rejected(tiny_bert_dir: Path, tiny_bert_dir_48: Path) -> None:
    a, tok = load_base(str(tiny_bert_dir))
    b, _ = load_base(str(tiny_bert_dir_48))
    with pytest.raises(ValueError, match="same embedding size"):
        QRAGModel(
            QRAGConfig(base_model=str(tiny_bert_dir)),
            MeanPoolEncoder(a, 10.0),
            MeanPoolEncoder(b, 10.0),
            tok,
        )


def test_config_validation() -> None:
    for bad in (
        {"relative_step": 0},
        {"relative_span": 0.0},
        {"relative_span": 1.5},
        {"max_state_tokens": 1},
        {"max_chunk_tokens": 0},
        {"output_scale": 0.0},
        {"trainable_layers": 0},
        {"position_mode": "sideways"},
        {"state_order": "random"},
    ):
        with pytest.raises(ValueError):
            QRAGConfig(**bad)
    cfg = QRAGConfig(
        base_model="x", position_mode="absolute", state_order="pick", extra={"run": "é"}
    )
    assert cfg.position_mode is PositionMode.ABSOLUTE and cfg.state_order is StateOrder.PICK
    assert QRAGConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="bogus"):
        QRAGConfig.from_dict({**cfg.to_dict(), "bogus": 1})


def test_untrained_defaults_are_cosine_without_positions_and_long_budgets(
    tiny_bert_dir: Path,
) -> None:
    """The defaults an untrained model gets: unit-length embeddings (Q = cosine), no rotation,
    256-token budgets, picks in pick order."""
    m = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir)))
    assert m.config.position_mode is PositionMode.NONE and m.config.normalize
    assert (m.config.max_chunk_tokens, m.config.max_state_tokens) == (256, 256)
    assert m.config.state_order is StateOrder.PICK
    assert m.config.question_weight == 3.0  # later states stay anchored on the question
    texts = ["mary went to the kitchen", "john took the milk there", "the"]
    emb = m.embed_chunks(texts)
    assert torch.allclose(emb.norm(dim=-1), torch.ones(3), atol=1e-5)
    raw = manual_mean_pool(m.chunk_encoder, m.tokenizer, texts[0], 256, 1.0)
    assert torch.allclose(emb[0], raw / raw.norm(), atol=1e-5)
    with torch.no_grad():
        s = m.embed_states(["where is mary"])
    q = m.q_values(s, emb, torch.arange(3) * 20)  # positions are ignored without rotation
    assert torch.allclose(q[0], torch.nn.functional.cosine_similarity(s, emb), atol=1e-5)


def test_budgets_are_clamped_to_the_encoder_position_table(tiny_bert_dir: Path) -> None:
    m = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), max_chunk_tokens=100_000))
    assert m.state_encoder.max_positions == 512
    huge = " ".join(["mary"] * 5_000)
    assert m.tokenize([huge], m.config.max_chunk_tokens)["input_ids"].shape == (1, 512)
    assert torch.isfinite(m.embed_chunks([huge])).all()


def test_question_weight_anchors_later_states(tiny_bert_dir: Path) -> None:
    g = torch.Generator().manual_seed(3)
    state, question = torch.randn(2, 32, generator=g), torch.randn(2, 32, generator=g)
    plain = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), question_weight=0.0))
    assert plain.anchor_states(state, question) is state
    anchored = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), question_weight=0.5))
    assert torch.allclose(anchored.anchor_states(state, question), (state + 0.5 * question) / 1.5)
    with pytest.raises(ValueError, match="question_weight"):
        QRAGConfig(question_weight=-1.0)


def test_configs_saved_before_normalize_load_as_the_paper_model() -> None:
    old = QRAGConfig().to_dict()
    del old["normalize"], old["question_weight"]
    cfg = QRAGConfig.from_dict(old)
    assert cfg.normalize is False and cfg.question_weight == 0.0
    assert QRAGConfig.from_dict(QRAGConfig().to_dict()).normalize is True


def test_tokenize_is_safe_from_several_threads(make_model) -> None:
    """Fast tokenizers change shared padding / truncation state on every call (transformers
    issue 47085): concurrent calls (the LlamaIndex async embedding path runs batches in threads)
    came back unpadded or raised 'Already borrowed' before the model serialised them."""
    from concurrent.futures import ThreadPoolExecutor

    model = make_model("none")
    texts = [["a b c d e f g h i j", "k"], ["l m", "n o p q r s t u v w x y z"]]

    def call(i: int) -> tuple[int, ...]:
        batch = model.tokenize(texts[i % 2], max_tokens=8 + i % 5)
        order = model.length_order(texts[i % 2], max_tokens=4 + i % 3)
        return (*batch["input_ids"].shape, len(order))

    with ThreadPoolExecutor(max_workers=8) as pool:
        shapes = list(pool.map(call, range(400)))
    assert all(s[0] == 2 and s[2] == 2 for s in shapes)
