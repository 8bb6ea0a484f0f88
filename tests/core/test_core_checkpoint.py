"""Checkpoint folders: round trips, manifest, model card, load errors, atomic saves."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import safetensors
import torch
import transformers
from saved_folders import drop_digests
from transformers import BertModel

import qrag_integrations
from qrag_integrations.core import checkpoint as ckpt_mod
from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.errors import CheckpointError, QRAGError
from qrag_integrations.core.loading import load_checkpoint_dir, load_model
from qrag_integrations.core.model import QRAGModel

TEXTS = [
    "mary went to the kitchen",
    "where is the football",
    "a",
    "john travelled back to the office there",
]


def perturb(model: QRAGModel, seed: int, only_trainable: bool = False) -> None:
    """Make the model differ from its base (as training would)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if only_trainable and not p.requires_grad:
                continue
            p.add_(torch.randn(p.shape, generator=g) * 0.05)


def embeddings(model: QRAGModel) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        return model.embed_states(TEXTS), model.embed_chunks(TEXTS)


def folder_digest(path: Path) -> dict[str, str]:
    return {
        str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }


@pytest.fixture()
def full_model(tiny_bert_dir: Path) -> QRAGModel:
    m = QRAGModel.from_base(
        QRAGConfig(base_model=str(tiny_bert_dir), relative_step=10, extra={"run": "ü-1"})
    )
    perturb(m, 0)
    return m.eval()


@pytest.fixture()
def partial_model(tiny_bert_dir: Path) -> QRAGModel:
    m = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1))
    perturb(m, 1, only_trainable=True)
    return m.eval()


# --------------------------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------------------------
def test_full_round_trip(full_model: QRAGModel, tmp_path: Path, tiny_bert_dir: Path) -> None:
    out = tmp_path / "ckpt"
    assert save_pretrained(full_model, out) == out
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["qrag_config.json", "README.md", "tokenizer", "state_encoder", "chunk_encoder"]
    )
    loaded = load_model(out)
    assert loaded.config == full_model.config
    assert loaded.config.to_dict() == full_model.config.to_dict()
    s0, c0 = embeddings(full_model)
    s1, c1 = embeddings(loaded)
    assert torch.equal(s0, s1) and torch.equal(c0, c1)
    sd0, sd1 = full_model.state_dict(), loaded.state_dict()
    assert set(sd0) == set(sd1) and all(torch.equal(sd0[k], sd1[k]) for k in sd0)
    # the saved weights are the trained ones, not the base
    base = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir)))
    assert not torch.allclose(embeddings(base)[1], c1, atol=1e-4)
    assert loaded.training is False


def test_partial_round_trip(partial_model: QRAGModel, tmp_path: Path) -> None:
    out = tmp_path / "partial"
    partial_model.save_pretrained(str(out))
    assert (out / "trained_weights.safetensors").is_file()
    assert not (out / "state_encoder").exists() and not (out / "chunk_encoder").exists()
    manifest = json.loads((out / "qrag_config.json").read_text())
    assert manifest["weights"] == "partial" and len(manifest["base_fingerprint"]) == 64
    from safetensors.torch import load_file

    stored = load_file(str(out / "trained_weights.safetensors"))
    assert set(stored) == set(partial_model.trained_state_dict())
    assert all(".encoder.layer.1." in k for k in stored)
    loaded = load_model(out)
    assert loaded.config == partial_model.config
    s0, c0 = embeddings(partial_model)
    s1, c1 = embeddings(loaded)
    assert torch.equal(s0, s1) and torch.equal(c0, c1)
    assert all(
        torch.equal(v, loaded.state_dict()[k]) for k, v in partial_model.state_dict().items()
    )


def test_manifest_and_model_card(
    full_model: QRAGModel, tmp_path: Path, tiny_bert_dir: Path
) -> None:
    out = tmp_path / "ckpt"
    save_pretrained(full_model, out, card_notes="## Results\nfact EM 0.42")
    manifest = json.loads((out / "qrag_config.json").read_text(encoding="utf-8"))
    assert manifest["format"] == "qrag-checkpoint"
    assert manifest["format_version"] == 1
    assert manifest["weights"] == "full"
    assert manifest["embedding_dim"] == 32
    assert manifest["config"] == full_model.config.to_dict()
    assert manifest["library_versions"] == {
        "qrag_integrations": qrag_integrations.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
    }
    assert manifest["chunk_encoder_fingerprint"] == ckpt_mod.chunk_encoder_fingerprint(full_model)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert str(tiny_bert_dir) in card
    assert "| weights stored | full |" in card
    assert "fact EM 0.42" in card
    assert '"run": "\\u00fc-1"' in card or '"run": "ü-1"' in card  # provenance block


def test_fingerprint_is_dtype_and_order_stable() -> None:
    a = {"x": torch.arange(6.0).reshape(2, 3), "y": torch.ones(2)}
    b = {"y": torch.ones(2, dtype=torch.float16), "x": torch.arange(6.0).reshape(2, 3)}
    assert ckpt_mod.tensor_fingerprint(a) == ckpt_mod.tensor_fingerprint(b)
    c = {"x": torch.arange(6.0).reshape(2, 3), "y": torch.tensor([1.0, 2.0])}
    assert ckpt_mod.tensor_fingerprint(a) != ckpt_mod.tensor_fingerprint(c)


@pytest.mark.parametrize(("dtype", "atol"), [(torch.float16, 1e-3), (torch.bfloat16, 1e-2)])
def test_partial_weights_stored_in_half_precision(
    partial_model: QRAGModel, tmp_path: Path, dtype: torch.dtype, atol: float
) -> None:
    """weights_dtype=float16 or bfloat16 halves the file; loading casts back to float32 (rounding
    only)."""
    full, half = tmp_path / "fp32", tmp_path / "half"
    partial_model.save_pretrained(str(full))
    partial_model.save_pretrained(str(half), weights_dtype=dtype)
    from safetensors.torch import load_file

    stored = load_file(str(half / "trained_weights.safetensors"))
    assert all(v.dtype == dtype for v in stored.values())
    size = lambda p: (p / "trained_weights.safetensors").stat().st_size
    assert size(half) < 0.6 * size(full)
    loaded = load_model(half)
    assert all(p.dtype == torch.float32 for p in loaded.parameters())
    trained = loaded.trained_state_dict()
    for key, value in partial_model.trained_state_dict().items():
        assert torch.equal(trained[key], value.to(dtype).float())
    s0, c0 = embeddings(partial_model)
    s1, c1 = embeddings(loaded)
    assert torch.allclose(s0, s1, atol=atol) and torch.allclose(c0, c1, atol=atol)


def test_overwrite_replaces_folder_whole(
    full_model: QRAGModel, partial_model: QRAGModel, tmp_path: Path
) -> None:
    out = tmp_path / "ckpt"
    save_pretrained(full_model, out)
    save_pretrained(partial_model, out)
    assert not (out / "state_encoder").exists()
    assert load_model(out).config.trainable_layers == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ckpt.lock", "ckpt"]


def test_a_file_added_to_a_checkpoint_is_never_deleted(
    full_model: QRAGModel, partial_model: QRAGModel, tmp_path: Path
) -> None:
    out = tmp_path / "ckpt"
    save_pretrained(full_model, out)
    (out / "stray.txt").write_text("old")
    with pytest.raises(QRAGError, match=r"ckpt.*also holds files it does not write: stray\.txt"):
        save_pretrained(partial_model, out)
    assert (out / "stray.txt").read_text() == "old" and (out / "state_encoder").is_dir()
    save_pretrained(partial_model, out, overwrite=True)  # moved aside, not deleted
    assert load_model(out).config.trainable_layers == 1
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("ckpt.old-")]
    assert (aside / "stray.txt").read_text() == "old" and (aside / "state_encoder").is_dir()


# --------------------------------------------------------------------------------------------
# load errors
# --------------------------------------------------------------------------------------------
def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(tmp_path / "nope")


def test_file_instead_of_folder(tmp_path: Path) -> None:
    f = tmp_path / "weights.bin"
    f.write_bytes(b"123")
    with pytest.raises(CheckpointError, match="is a file"):
        load_model(f)


PACKAGED_LIST = (
    r"the packaged ones are packaged:all-MiniLM-L6-v2 \(the encoder, not trained for Q-RAG\), "
    r"packaged:qrag-babi-demo, packaged:qrag-general-minilm, packaged:qrag-hotpotqa-minilm "
    r"\(the default: packaged:qrag-general-minilm\)$"
)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("packaged:no-such-model", ""),
        ("packaged:qrag-babi-dem", r" \(did you mean 'packaged:qrag-babi-demo'\?\)"),
    ],
)
def test_an_unknown_packaged_name_lists_the_packaged_checkpoints(
    tiny_bert_dir: Path, name: str, hint: str
) -> None:
    pattern = rf"^unknown packaged checkpoint '{name}'{hint}; {PACKAGED_LIST}"
    with pytest.raises(CheckpointError, match=pattern):
        load_model(name)
    with pytest.raises(CheckpointError, match=pattern):  # as the base encoder a checkpoint names
        QRAGModel.from_base(QRAGConfig(base_model=name))
    from qrag_integrations import QRAGRetriever

    with pytest.raises(CheckpointError, match=pattern):
        QRAGRetriever.from_texts(["a"], checkpoint=name)


def test_a_hub_name_that_cannot_load_offline_says_so_in_one_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError) as caught:
        load_model("someone-qrag-test/no-such-encoder")
    message = str(caught.value)
    assert message == (
        "'someone-qrag-test/no-such-encoder' is not a local folder or a packaged checkpoint, and the Hugging Face "
        "hub is offline (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE) with no copy of it in the local cache, so it cannot "
        "be loaded; pass a local folder or a packaged:NAME instead"
    )


def test_missing_manifest_direct(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    with pytest.raises(CheckpointError, match="qrag_config.json is missing"):
        load_checkpoint_dir(tmp_path / "c")


def test_missing_manifest_via_load_model_names_the_file(
    full_model: QRAGModel, tmp_path: Path
) -> None:
    """A saved checkpoint that lost qrag_config.json must say so, not that it is a bad HF encoder."""
    out = tmp_path / "ckpt"
    save_pretrained(full_model, out)
    (out / "qrag_config.json").unlink()
    with pytest.raises(CheckpointError) as err:
        load_model(out)
    assert str(out) in str(err.value)
    assert "qrag_config.json" in str(err.value)


def test_corrupt_manifest(full_model: QRAGModel, tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    save_pretrained(full_model, out)
    (out / "qrag_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"corrupt .*qrag_config\.json"):
        load_model(out)
    (out / "qrag_config.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CheckpointError, match=r"corrupt .*qrag_config\.json"):
        load_model(out)
    (out / "qrag_config.json").write_text('["a list"]', encoding="utf-8")
    with pytest.raises(CheckpointError, match="not a qrag-checkpoint manifest"):
        load_model(out)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda m: m.update(format_version=99), "format_version 99"),
        (lambda m: m.update(weights="quantum"), "unknown weights kind 'quantum'"),
        (lambda m: m.update(embedding_dim=64), "manifest says 64"),
        (lambda m: m["config"].update(bogus_field=1), "bad config"),
        (lambda m: m["config"].update(relative_step=0), "bad config"),
    ],
)
def test_bad_manifest_fields(full_model: QRAGModel, tmp_path: Path, edit, message: str) -> None:
    out = tmp_path / "ckpt"
    save_pretrained(full_model, out)
    manifest = json.loads((out / "qrag_config.json").read_text())
    manifest.pop("digests")  # the checks behind the digests
    edit(manifest)
    (out / "qrag_config.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=message):
        load_model(out)


def test_corrupt_full_safetensors(full_model: QRAGModel, tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    save_pretrained(full_model, out)
    (out / "chunk_encoder" / "model.safetensors").write_bytes(
        b"\x00garbage bytes, not a safetensors file" * 10
    )
    with pytest.raises(CheckpointError, match=r"chunk_encoder"):
        load_model(out)


def test_corrupt_partial_safetensors(partial_model: QRAGModel, tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    save_pretrained(partial_model, out)
    (out / "trained_weights.safetensors").write_bytes(b"\x13\x37" * 100)
    with pytest.raises(CheckpointError, match=r"corrupt .*trained_weights\.safetensors"):
        load_model(out)
    (out / "trained_weights.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"trained_weights\.safetensors is missing"):
        load_model(out)


def test_partial_with_wrong_keys_or_shapes(partial_model: QRAGModel, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    out = tmp_path / "ckpt"
    save_pretrained(partial_model, out)
    drop_digests(out / "qrag_config.json")  # the checks behind the digests
    file = out / "trained_weights.safetensors"
    weights = load_file(str(file))
    key = min(weights)
    save_file({k: v for k, v in weights.items() if k != key}, str(file))
    with pytest.raises(CheckpointError, match="missing"):
        load_model(out)
    bad = dict(weights)
    bad[key] = torch.zeros(3, 3)
    save_file(bad, str(file))
    with pytest.raises(CheckpointError, match="has shape"):
        load_model(out)


def test_missing_encoder_folder(full_model: QRAGModel, tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    save_pretrained(full_model, out)
    drop_digests(out / "qrag_config.json")  # the check behind the digests
    shutil.rmtree(out / "state_encoder")
    with pytest.raises(
        CheckpointError, match=r"state_encoder lacks config\.json or model\.safetensors"
    ):
        load_model(out)


def test_missing_tokenizer_folder(full_model: QRAGModel, tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    save_pretrained(full_model, out)
    shutil.rmtree(out / "tokenizer")
    with pytest.raises(CheckpointError, match="tokenizer"):
        load_model(out)


def test_partial_checkpoint_over_different_base(tiny_bert_dir: Path, tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(tiny_bert_dir, base)
    m = QRAGModel.from_base(QRAGConfig(base_model=str(base), trainable_layers=1))
    perturb(m, 2, only_trainable=True)
    out = tmp_path / "ckpt"
    save_pretrained(m, out)
    assert torch.equal(embeddings(load_model(out))[0], embeddings(m)[0])
    # the installed base changes (another seed / another version of the encoder)
    other = BertModel.from_pretrained(base)
    torch.manual_seed(123)
    with torch.no_grad():
        for p in other.embeddings.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    other.save_pretrained(base)
    with pytest.raises(CheckpointError, match="hash mismatch"):
        load_model(out)


def test_reference_checkpoint_folder_points_to_importer(tmp_path: Path) -> None:
    ref = tmp_path / "run"
    ref.mkdir()
    (ref / "model_best.pt").write_bytes(b"not loaded")
    with pytest.raises(CheckpointError, match="import_reference_checkpoint"):
        load_model(ref)


# --------------------------------------------------------------------------------------------
# atomic saves
# --------------------------------------------------------------------------------------------
@pytest.fixture()
def failed_save_keeps_previous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``check(model, target, name, error, message, seed=..., only_trainable=...)``: save
    ``model`` to ``tmp_path / "ckpt"``, ``perturb`` it with ``seed`` if given, make
    ``target.name`` raise ``error``, and check that the second save fails with it and leaves the
    first checkpoint untouched. The patch stays in place for the rest of the test."""

    def check(
        model: QRAGModel,
        target: object,
        name: str,
        error: type[BaseException],
        message: str | None = None,
        *,
        seed: int | None = None,
        only_trainable: bool = False,
    ) -> None:
        out = tmp_path / "ckpt"
        save_pretrained(model, out)
        before = folder_digest(out)
        if seed is not None:
            perturb(model, seed, only_trainable=only_trainable)

        def boom(*args, **kwargs):
            raise error if message is None else error(message)

        monkeypatch.setattr(target, name, boom)
        with pytest.raises(error, match=message):
            save_pretrained(model, out)
        assert folder_digest(out) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == [".ckpt.lock", "ckpt"]

    return check


def test_failed_partial_save_keeps_previous_checkpoint(
    partial_model: QRAGModel, failed_save_keeps_previous
) -> None:
    failed_save_keeps_previous(
        partial_model, ckpt_mod, "save_file", OSError, "disk full", seed=7, only_trainable=True
    )


def test_failed_tokenizer_save_keeps_previous_checkpoint(
    full_model: QRAGModel, failed_save_keeps_previous
) -> None:
    failed_save_keeps_previous(
        full_model, full_model.tokenizer, "save_pretrained", RuntimeError, "tokenizer exploded"
    )


def test_failure_after_first_encoder_written(
    full_model: QRAGModel, tmp_path: Path, failed_save_keeps_previous
) -> None:
    failed_save_keeps_previous(
        full_model, full_model.chunk_encoder.model, "save_pretrained", KeyboardInterrupt, seed=8
    )
    # a failed first save leaves nothing at all
    fresh = tmp_path / "fresh"
    with pytest.raises(KeyboardInterrupt):
        save_pretrained(full_model, fresh)
    assert not fresh.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ckpt.lock", "ckpt"]
