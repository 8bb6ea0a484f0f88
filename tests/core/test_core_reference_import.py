"""Importing checkpoints of the paper's reference code (critic state dict + Hydra config.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from transformers import BertModel

from qrag_integrations.core.config import PositionMode, StateOrder
from qrag_integrations.core.errors import CheckpointError
from qrag_integrations.core.positions import rope_inv_freq
from qrag_integrations.core.reference_import import import_reference_checkpoint, reference_config


class CustomPayload:
    """Not a tensor or plain container: a weights-only load must refuse it."""

    def __init__(self) -> None:
        self.value = 42


class SideEffectPayload:
    """Unpickling this would create a file; a weights-only load must never run it."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def random_bert(tiny_bert_dir: Path, seed: int) -> dict[str, torch.Tensor]:
    bert = BertModel.from_pretrained(tiny_bert_dir)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in bert.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return {k: v.clone() for k, v in bert.state_dict().items()}


def critic_dict(
    state_w: dict[str, torch.Tensor], chunk_w: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    critic: dict[str, torch.Tensor] = {}
    critic.update({f"state_embed.model.{k}": v for k, v in state_w.items()})
    critic["state_embed.head.weight"] = torch.randn(32, 32)
    critic["state_embed.head.bias"] = torch.randn(32)
    critic["state_embed.cls_token"] = torch.tensor([2])
    critic["state_embed.sep_token"] = torch.tensor([3])
    critic.update({f"action_embed.model.model.{k}": v for k, v in chunk_w.items()})
    critic["action_embed.model.head.weight"] = torch.randn(32, 32)
    critic["action_embed.model.cls_token"] = torch.tensor([2])
    critic["action_embed.rotary_emb.freqs"] = rope_inv_freq(16, 10000.0)
    return critic


def reference_yaml(
    model_name: str, mode: str = "relative", step: int = 20, chunk: int = 64, state: int = 64
) -> dict:
    return {
        "algo": {"model": {"model_name": model_name}, "gamma": 0.99},
        "envs": {
            "positions_processor": mode,
            "positions_processor_dict": {"relative": {"step_size": step}},
        },
        "max_action_length": chunk,
        "max_action_length_in_memory": state,
    }


@pytest.fixture(scope="module")
def weights(tiny_bert_dir: Path) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    return random_bert(tiny_bert_dir, 10), random_bert(tiny_bert_dir, 20)


def write_run(folder: Path, blob, cfg: dict | None, name: str = "model_best.pt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(blob, folder / name)
    if cfg is not None:
        (folder / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return folder


def full_blob(state_w, chunk_w) -> dict:
    critic = critic_dict(state_w, chunk_w)
    first = next(iter(critic.values()))
    return {
        "critic": critic,
        "critic_optim": {
            "state": {
                0: {
                    "step": torch.tensor(3.0),
                    "exp_avg": torch.zeros_like(first, dtype=torch.float32),
                }
            },
            "param_groups": [{"lr": 5e-5, "betas": (0.9, 0.98), "params": [0]}],
        },
        "step": 50_000,
    }


def test_import_gives_both_encoders(tiny_bert_dir: Path, tmp_path: Path, weights) -> None:
    state_w, chunk_w = weights
    run = write_run(
        tmp_path / "run", full_blob(state_w, chunk_w), reference_yaml(str(tiny_bert_dir))
    )
    model = import_reference_checkpoint(run)
    got_s = model.state_encoder.model.state_dict()
    got_c = model.chunk_encoder.model.state_dict()
    assert set(got_s) <= set(state_w)
    assert all(torch.equal(got_s[k], state_w[k]) for k in got_s)
    assert all(torch.equal(got_c[k], chunk_w[k]) for k in got_c)
    assert not torch.equal(
        got_s["embeddings.word_embeddings.weight"], got_c["embeddings.word_embeddings.weight"]
    )
    # the embeddings are the reference forward: masked mean of a BERT with those weights / 10
    bert = BertModel.from_pretrained(tiny_bert_dir)
    bert.load_state_dict(chunk_w)
    batch = model.tokenizer(["mary went to the kitchen"], return_tensors="pt")
    with torch.no_grad():
        expected = bert(**batch).last_hidden_state[0].mean(0) / 10
    assert torch.allclose(model.embed_chunks(["mary went to the kitchen"])[0], expected, atol=1e-5)
    cfg = model.config
    assert cfg.base_model == str(tiny_bert_dir)
    assert cfg.position_mode is PositionMode.RELATIVE
    assert cfg.relative_step == 20
    assert cfg.max_chunk_tokens == 64 and cfg.max_state_tokens == 64
    assert cfg.state_order is StateOrder.DOCUMENT
    assert "imported_from" in cfg.extra
    assert model.training is False


def test_import_pt_file_and_last(tiny_bert_dir: Path, tmp_path: Path, weights) -> None:
    state_w, chunk_w = weights
    run = write_run(
        tmp_path / "run",
        {"critic": critic_dict(chunk_w, state_w)},
        reference_yaml(str(tiny_bert_dir)),
        "model_last.pt",
    )
    model = import_reference_checkpoint(run, which="last")
    assert torch.equal(
        model.state_encoder.model.state_dict()["pooler.dense.weight"],
        chunk_w["pooler.dense.weight"],
    )
    model2 = import_reference_checkpoint(run / "model_last.pt")
    assert torch.equal(
        model2.chunk_encoder.model.state_dict()["pooler.dense.weight"],
        state_w["pooler.dense.weight"],
    )
    with pytest.raises(CheckpointError, match=r"model_best\.pt is missing"):
        import_reference_checkpoint(run)


def test_bare_critic_state_dict_is_accepted(tiny_bert_dir: Path, tmp_path: Path, weights) -> None:
    run = write_run(tmp_path / "run", critic_dict(*weights), reference_yaml(str(tiny_bert_dir)))
    model = import_reference_checkpoint(run)
    assert torch.equal(
        model.state_encoder.model.state_dict()["encoder.layer.1.output.dense.weight"],
        weights[0]["encoder.layer.1.output.dense.weight"],
    )


def test_config_translation() -> None:
    cfg = reference_config(
        reference_yaml("some/encoder", mode="absolute", step=10, chunk=32, state=48)
    )
    assert cfg.base_model == "some/encoder"
    assert cfg.position_mode is PositionMode.ABSOLUTE
    assert cfg.relative_step == 10 and cfg.max_chunk_tokens == 32 and cfg.max_state_tokens == 48
    assert (
        reference_config(reference_yaml("e", mode="random")).position_mode is PositionMode.ABSOLUTE
    )
    assert reference_config(reference_yaml("e", mode="none")).position_mode is PositionMode.NONE
    assert reference_config(reference_yaml("e"), base_model="override").base_model == "override"
    pick = reference_yaml("e")
    pick["envs"]["sort_by_index"] = False
    assert reference_config(pick).state_order is StateOrder.PICK
    only_chunk = {"algo": {"model": {"model_name": "e"}}, "max_action_length": 100}
    assert reference_config(only_chunk).max_state_tokens == 100
    with pytest.raises(CheckpointError, match="model_name"):
        reference_config({"envs": {}})


def test_missing_config_yaml(tmp_path: Path, weights) -> None:
    run = write_run(tmp_path / "run", full_blob(*weights), None)
    with pytest.raises(CheckpointError, match=r"config\.yaml is missing"):
        import_reference_checkpoint(run)


def test_unparsable_config_yaml(tmp_path: Path, weights) -> None:
    run = write_run(tmp_path / "run", full_blob(*weights), None)
    (run / "config.yaml").write_text("algo: [unclosed\n  - : :", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"cannot parse .*config\.yaml"):
        import_reference_checkpoint(run)


def test_missing_keys(tiny_bert_dir: Path, tmp_path: Path, weights) -> None:
    blob = full_blob(*weights)
    del blob["critic"]["action_embed.model.model.encoder.layer.1.output.dense.weight"]
    run = write_run(tmp_path / "run", blob, reference_yaml(str(tiny_bert_dir)))
    with pytest.raises(
        CheckpointError, match=r"action_embed\.model\.model weights do not fit .*missing"
    ):
        import_reference_checkpoint(run)


def test_missing_encoder_prefix(tiny_bert_dir: Path, tmp_path: Path, weights) -> None:
    blob = full_blob(*weights)
    blob["critic"] = {
        k: v for k, v in blob["critic"].items() if not k.startswith("state_embed.model.")
    }
    run = write_run(tmp_path / "run", blob, reference_yaml(str(tiny_bert_dir)))
    with pytest.raises(CheckpointError, match=r"no 'state_embed\.model\.\*' keys"):
        import_reference_checkpoint(run)


def test_wrong_shapes(tiny_bert_dir: Path, tmp_path: Path, weights) -> None:
    blob = full_blob(*weights)
    blob["critic"]["state_embed.model.encoder.layer.0.attention.self.query.weight"] = torch.zeros(
        48, 32
    )
    run = write_run(tmp_path / "run", blob, reference_yaml(str(tiny_bert_dir)))
    with pytest.raises(
        CheckpointError,
        match=r"encoder\.layer\.0\.attention\.self\.query\.weight has shape \(48, 32\)",
    ):
        import_reference_checkpoint(run)


def test_other_architecture_rejected(tiny_bert_dir_48: Path, tmp_path: Path, weights) -> None:
    run = write_run(tmp_path / "run", full_blob(*weights), reference_yaml(str(tiny_bert_dir_48)))
    with pytest.raises(CheckpointError, match="expects"):
        import_reference_checkpoint(run)


def test_no_critic_dict(tiny_bert_dir: Path, tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [torch.zeros(2)], reference_yaml(str(tiny_bert_dir)))
    with pytest.raises(CheckpointError, match="holds no 'critic' state dict"):
        import_reference_checkpoint(run)


def test_pickled_custom_class_is_refused(tiny_bert_dir: Path, tmp_path: Path, weights) -> None:
    blob = full_blob(*weights)
    blob["extra"] = CustomPayload()
    run = write_run(tmp_path / "run", blob, reference_yaml(str(tiny_bert_dir)))
    with pytest.raises(CheckpointError, match="weights-only"):
        import_reference_checkpoint(run)


def test_pickle_code_never_runs(tiny_bert_dir: Path, tmp_path: Path, weights) -> None:
    sentinel = tmp_path / "pwned.txt"
    blob = full_blob(*weights)
    blob["critic"]["state_embed.evil"] = SideEffectPayload(str(sentinel))
    run = write_run(tmp_path / "run", blob, reference_yaml(str(tiny_bert_dir)))
    assert not sentinel.exists()
    with pytest.raises(CheckpointError, match="weights-only"):
        import_reference_checkpoint(run)
    assert not sentinel.exists()


def test_garbage_pt_file(tiny_bert_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "model_best.pt").write_bytes(b"\x80\x02garbage" * 20)
    (run / "config.yaml").write_text(yaml.safe_dump(reference_yaml(str(tiny_bert_dir))))
    with pytest.raises(CheckpointError, match=r"cannot read .*model_best\.pt"):
        import_reference_checkpoint(run)


def test_imported_model_round_trips_through_save(
    tiny_bert_dir: Path, tmp_path: Path, weights
) -> None:
    from qrag_integrations.core.loading import load_model

    run = write_run(
        tmp_path / "run", full_blob(*weights), reference_yaml(str(tiny_bert_dir), step=10)
    )
    model = import_reference_checkpoint(run)
    model.save_pretrained(str(tmp_path / "converted"))
    loaded = load_model(tmp_path / "converted")
    assert loaded.config == model.config and loaded.config.relative_step == 10
    texts = ["where is mary", "john went to the garden"]
    with torch.no_grad():
        assert torch.equal(loaded.embed_states(texts), model.embed_states(texts))
    assert torch.equal(loaded.embed_chunks(texts), model.embed_chunks(texts))
