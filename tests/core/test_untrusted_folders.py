"""A checkpoint or index folder from someone else is data, never code: custom model or tokenizer
code in it is not run, the tokenizer reads no file outside the folder, and sizes in configs and
manifests are checked against the files' headers before anything is allocated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from saved_folders import drop_digests

from qrag_integrations import ChunkIndex, QRAGConfig, QRAGError, QRAGModel, load_model
from qrag_integrations.core import index_files as index_mod
from qrag_integrations.core import loading as ckpt_mod
from qrag_integrations.core.errors import CheckpointError

#: Python a hostile folder ships: importing it writes the file it names (transformers would run
#: a copy of it from its module cache, so the marker's path is absolute).
PAYLOAD = "import pathlib\npathlib.Path({marker!r}).write_text('code ran')\n"


@pytest.fixture(scope="module")
def full_checkpoint(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ckpt") / "full"
    load_model(str(tiny_bert_dir)).save_pretrained(str(folder))
    return folder


@pytest.fixture
def copy(full_checkpoint: Path, tmp_path: Path) -> Path:
    """A copy of the full checkpoint to tamper with, without the digests that would refuse any
    edit as damage (someone else's folder may carry none, or recomputed ones)."""
    folder = Path(shutil.copytree(full_checkpoint, tmp_path / "theirs"))
    drop_digests(folder / "qrag_config.json")
    return folder


def edit_json(file: Path, **changes: object) -> None:
    data = json.loads(file.read_text())
    data.update(changes)
    file.write_text(json.dumps(data))


def never_called(*args: object, **kwargs: object) -> None:
    raise AssertionError("tensors were read or a model was allocated before the sizes were checked")


def ship_code(folder: Path, config_name: str, auto_map: dict, **changes: object) -> Path:
    """Put code into ``folder`` that its config asks to run; returns the file it would write."""
    marker = folder.parent / "RAN"
    for module in {(v[0] if isinstance(v, list) else v).split(".")[0] for v in auto_map.values()}:
        (folder / f"{module}.py").write_text(PAYLOAD.format(marker=str(marker)))
    edit_json(folder / config_name, auto_map=auto_map, **changes)
    return marker


MODEL_CODE = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "modeling_evil.EvilModel"}
TOKENIZER_CODE = {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}


@pytest.fixture(autouse=True)
def user_says_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers asks on the terminal before running a folder's code unless told not to;
    here the user would answer yes."""
    monkeypatch.setattr("builtins.input", lambda *args: "y")


@pytest.mark.parametrize("model_type", ["bert", "evil"])
def test_model_code_in_a_checkpoint_is_never_run(copy: Path, model_type: str) -> None:
    marker = ship_code(copy / "state_encoder", "config.json", MODEL_CODE, model_type=model_type)
    ship_code(copy / "chunk_encoder", "config.json", MODEL_CODE, model_type=model_type)
    try:
        load_model(str(copy))
    except CheckpointError:
        pass  # refusing is as good as ignoring the code
    assert not marker.exists()


def test_tokenizer_code_in_a_checkpoint_is_never_run(copy: Path) -> None:
    marker = ship_code(
        copy / "tokenizer", "tokenizer_config.json", TOKENIZER_CODE, tokenizer_class="EvilTokenizer"
    )
    with pytest.raises(CheckpointError, match="cannot load tokenizer"):
        ckpt_mod._load_tokenizer(copy / "tokenizer")
    assert not marker.exists()


@pytest.mark.parametrize("model_type", ["bert", "evil"])
def test_code_in_a_base_encoder_folder_is_never_run(
    tiny_bert_dir: Path, tmp_path: Path, model_type: str
) -> None:
    """A partial checkpoint's manifest names its base encoder: a folder or hub model of anyone's."""
    base = Path(shutil.copytree(tiny_bert_dir, tmp_path / "base"))
    ship_code(base, "config.json", MODEL_CODE, model_type=model_type)
    marker = ship_code(
        base, "tokenizer_config.json", TOKENIZER_CODE, tokenizer_class="EvilTokenizer"
    )
    try:
        QRAGModel.from_base(QRAGConfig(base_model=str(base)))
    except CheckpointError:
        pass
    assert not marker.exists()


@pytest.mark.parametrize(
    "value", ["/etc/hostname", "../outside.json", "sub/vocab.txt", ["vocab.txt"]]
)
def test_tokenizer_files_come_only_from_the_tokenizer_folder(copy: Path, value: object) -> None:
    edit_json(copy / "tokenizer" / "tokenizer_config.json", vocab_file=value)
    with pytest.raises(
        CheckpointError, match=r"tokenizer_config.json names files outside .*vocab_file"
    ):
        load_model(str(copy))


def test_a_plain_file_name_in_the_tokenizer_config_is_fine(copy: Path) -> None:
    edit_json(copy / "tokenizer" / "tokenizer_config.json", tokenizer_file="tokenizer.json")
    load_model(str(copy))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vocab_size": 10**9}, r"embeddings.word_embeddings.weight is \(1000000000, 32\) there"),
        ({"num_hidden_layers": 500}, r"parameters there, \d+ in the file"),
        (
            {"hidden_size": 4096, "intermediate_size": 16384},
            r"is \(4096,\) there, \(32,\) in the file",
        ),
    ],
)
def test_an_encoder_config_larger_than_its_weights_is_refused_before_allocating(
    copy: Path, monkeypatch: pytest.MonkeyPatch, change: dict, message: str
) -> None:
    edit_json(copy / "chunk_encoder" / "config.json", **change)
    monkeypatch.setattr(ckpt_mod.AutoModel, "from_pretrained", never_called)
    with pytest.raises(
        CheckpointError,
        match=rf"chunk_encoder/config.json does not describe the weights .*{message}",
    ):
        ckpt_mod._load_encoder_dir(copy / "chunk_encoder", QRAGConfig())


def test_weights_that_are_not_a_regular_file_are_refused(copy: Path) -> None:
    (copy / "state_encoder" / "model.safetensors").unlink()
    (copy / "state_encoder" / "model.safetensors").symlink_to("/dev/zero")
    with pytest.raises(CheckpointError, match="lacks config.json or model.safetensors"):
        load_model(str(copy))


def test_partial_weights_of_other_shapes_are_refused_before_reading(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = QRAGModel.from_base(QRAGConfig(base_model=str(tiny_bert_dir), trainable_layers=1))
    model.save_pretrained(str(tmp_path / "partial"))
    drop_digests(tmp_path / "partial" / "qrag_config.json")
    file = tmp_path / "partial" / "trained_weights.safetensors"
    weights = load_file(str(file))
    key = min(weights)
    weights[key] = torch.zeros(7, 7)
    save_file(weights, str(file))
    monkeypatch.setattr(ckpt_mod, "load_file", never_called)
    with pytest.raises(CheckpointError, match=rf"{key} has shape \(7, 7\)"):
        load_model(str(tmp_path / "partial"))


@pytest.mark.parametrize("size", [10**9, 1, "3"])
def test_an_index_manifest_size_is_checked_against_the_file_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: object
) -> None:
    index = ChunkIndex(8)
    index.add(["a", "b", "c"], torch.randn(3, 8))
    index.save(tmp_path / "idx")
    drop_digests(tmp_path / "idx" / "index.json")
    edit_json(tmp_path / "idx" / "index.json", size=size)
    monkeypatch.setattr(index_mod, "load_file", never_called)
    with pytest.raises(
        QRAGError,
        match=r"embeddings.safetensors holds \{'embeddings': \(3, 8\)\}, but .*index.json says",
    ):
        ChunkIndex.load(tmp_path / "idx")
