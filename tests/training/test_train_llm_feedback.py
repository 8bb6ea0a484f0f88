"""The LLM-answer reward: EM / F1 values, per-step gains, one batched reader call per step, the
answer cache, and how it plugs into the environments and the config."""

from __future__ import annotations

import pytest
from qrag_training.data.episode import Episode
from qrag_training.env import EnvSettings, RetrievalEnv, VectorEnv
from qrag_training.feedback import BatchFeedback, Feedback, RewardQuery, score_picks
from qrag_training.llm_feedback import AnswerCache, LLMAnswerFeedback
from scripted_readers import ScriptedReader, context_of

FACT = "mary went to the kitchen."


def episode(i: int = 0, answer: str | None = "kitchen") -> Episode:
    chunks = [f"noise {i} a.", FACT, f"noise {i} b.", f"noise {i} c."]
    return Episode(
        id=str(i), question=f"where is mary {i}?", chunks=chunks, support=[1], answer=answer
    )


def fact_reader() -> ScriptedReader:
    """'the kitchen' when the fact is in the prompt, else 'garden kitchen' (EM 0, F1 2/3)."""
    return ScriptedReader(lambda p: "the kitchen" if FACT in context_of(p) else "garden kitchen")


def rewards(fb: LLMAnswerFeedback, ep: Episode, picks: list[int]) -> list[float]:
    return [
        fb.reward(ep, picks[: k + 1], k + 1, final=k + 1 == len(picks)) for k in range(len(picks))
    ]


def test_final_reward_in_em_and_f1_modes() -> None:
    em = LLMAnswerFeedback(fact_reader(), metric="em")
    assert rewards(em, episode(), [0, 1, 2]) == [0.0, 0.0, 1.0]
    assert rewards(em, episode(), [0, 2, 3]) == [0.0, 0.0, 0.0]
    f1 = LLMAnswerFeedback(fact_reader(), metric="f1")
    assert rewards(f1, episode(), [0, 2, 3]) == [0.0, 0.0, pytest.approx(2 / 3)]
    assert len(f1.reader.batches) == 1  # the steps before the last one ask nothing
    label = LLMAnswerFeedback(ScriptedReader(lambda p: "Mary is in the kitchen."), metric="label")
    assert rewards(label, episode(), [0, 1]) == [0.0, 1.0]
    assert (
        isinstance(em, BatchFeedback) and isinstance(em, Feedback) and em.requires_support is False
    )


def test_per_step_rewards_are_gains_that_sum_to_the_final_score() -> None:
    fb = LLMAnswerFeedback(fact_reader(), metric="f1", per_step=True)
    got = rewards(fb, episode(), [0, 1, 2])
    assert got == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert sum(got) == pytest.approx(1.0)
    assert fb.stats()["cache_hits"] == 2  # picks[:-1] of every step was answered the step before


def test_prompt_follows_the_chunk_order_and_template() -> None:
    reader = ScriptedReader(lambda p: "x")
    fb = LLMAnswerFeedback(reader, chunk_order="document", template="C:{context}|Q:{question}")
    fb.reward(episode(), [2, 0], 2, final=True)
    fb.reward(episode(), [0, 2], 2, final=True)  # the same prompt in document order: cached
    assert reader.prompts == ["C:noise 0 a.\nnoise 0 b.|Q:where is mary 0?"]
    LLMAnswerFeedback(reader).reward(episode(), [2, 0], 2, final=True)  # retrieval order
    assert (
        reader.prompts[-1].startswith("Answer the question")
        and "noise 0 b.\nnoise 0 a." in reader.prompts[-1]
    )


def test_one_reader_call_per_step_for_every_finishing_environment() -> None:
    reader = fact_reader()
    fb = LLMAnswerFeedback(reader)
    eps = [episode(i) for i in range(4)]
    stream = iter(eps * 3)
    envs = [RetrievalEnv(EnvSettings(max_steps=2), fb, lambda q, t, o: q) for _ in range(4)]
    venv = VectorEnv(envs, lambda: next(stream))
    venv.reset()
    first = venv.step([0, 1, 0, 2])
    assert reader.batches == [] and list(first.rewards) == [0.0] * 4
    second = venv.step([1, 0, 2, 3])  # every episode ends: one call, four prompts
    assert [len(b) for b in reader.batches] == [4]
    assert list(second.rewards) == [1.0, 1.0, 0.0, 0.0] and list(second.truncated) == [True] * 4
    assert second.episode_returns == [1.0, 1.0, 0.0, 0.0]
    # the same episodes again with the same picks: every answer comes from the cache
    venv.step([0, 1, 0, 2])
    again = venv.step([1, 0, 2, 3])
    assert list(again.rewards) == list(second.rewards) and len(reader.batches) == 1
    stats = fb.stats()
    assert stats["cache_hits"] == 4 and stats["cache_misses"] == 4 and stats["reader_calls"] == 1
    assert stats["cache_hit_rate"] == 0.5 and stats["reader_prompts"] == 4


def test_batch_size_splits_a_step_and_identical_prompts_are_asked_once() -> None:
    reader = fact_reader()
    fb = LLMAnswerFeedback(reader, batch_size=2, cache_size=0)
    queries = [RewardQuery(episode(i % 3), (0, 1), final=True) for i in range(6)]
    assert score_picks(fb, queries) == [1.0] * 6
    assert [len(b) for b in reader.batches] == [2, 1]  # 3 distinct prompts
    assert fb.stats()["reader_calls"] == 2


def test_answer_cache_is_lru() -> None:
    cache = AnswerCache(2)
    a, b, c = ("q", ("a",)), ("q", ("b",)), ("q", ("c",))
    cache.put(a, "1")
    cache.put(b, "2")
    assert cache.get(a) == "1"  # a is now the most recent
    cache.put(c, "3")
    assert cache.get(b) is None and cache.get(a) == "1" and cache.get(c) == "3" and len(cache) == 2
    assert (cache.hits, cache.misses) == (3, 1)
    with pytest.raises(ValueError):
        AnswerCache(-1)


def test_episode_without_answer_and_bad_settings_are_refused() -> None:
    fb = LLMAnswerFeedback(fact_reader())
    with pytest.raises(ValueError, match="episode '0' has no gold answer; feedback=llm needs one"):
        fb.reward(episode(answer=None), [1], 1, final=True)
    with pytest.raises(ValueError, match="metric must be one of em, f1, label"):
        LLMAnswerFeedback(fact_reader(), metric="bleu")
    with pytest.raises(ValueError, match="chunk order"):
        LLMAnswerFeedback(fact_reader(), chunk_order="random")


def test_unlabeled_episodes_play_with_the_llm_reward() -> None:
    fb = LLMAnswerFeedback(fact_reader())
    env = RetrievalEnv(EnvSettings(max_steps=2), fb, lambda q, t, o: q)
    unlabeled = Episode("u", "where is mary?", [FACT, "noise."], support=[], answer="kitchen")
    env.reset(unlabeled)
    env.step(1)
    assert env.step(0).reward == 1.0


def test_config_group_builds_the_reader_from_its_spec(monkeypatch) -> None:
    from qrag_training.evaluate import compose_config
    from qrag_training.settings import feedback_from, feedback_needs
    from scripted_readers import install_factory

    from qrag_integrations.llm import DEFAULT_TEMPLATE

    reader = fact_reader()
    calls = install_factory(monkeypatch, reader)
    cfg = compose_config(
        "babilong",
        [
            "feedback=llm",
            "feedback.reader='openai:http://h:8000/v1#m'",
            "+feedback.reader_options.timeout=30",
            "feedback.metric=f1",
        ],
    )
    fb = feedback_from(cfg)
    assert calls == [("openai:http://h:8000/v1#m", {"timeout": 30})]
    assert isinstance(fb, LLMAnswerFeedback) and fb.reader is reader and fb.metric == "f1"
    assert fb.template == DEFAULT_TEMPLATE and fb.per_step is False and fb.cache.size == 100_000
    assert feedback_needs(fb) == {"needs_support": False, "needs_answer": True}


def test_every_field_of_the_config_group_is_an_argument_and_documented() -> None:
    import inspect
    from pathlib import Path

    from qrag_training.train import CONF_DIR

    lines = [
        line
        for line in (Path(CONF_DIR) / "feedback" / "llm.yaml").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    keys = {line.split(":", 1)[0] for line in lines}
    params = set(inspect.signature(LLMAnswerFeedback.__init__).parameters) - {"self"}
    assert keys == {"kind"} | (params - {"reader"}) | {"reader", "reader_options"}
    assert all("  # " in line for line in lines)
