"""Saves never lose a user's files: a path holding anything but an earlier save of the same kind
is refused with a QRAGError naming it, and ``overwrite=True`` moves it aside, never deletes it.
Same for ``qrag-train``'s ``out_dir``."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch
from faults import folder_bytes, scratch_left
from hydra import compose, initialize_config_dir
from qrag_training.run_folder import prepare_run_dir
from qrag_training.train import CONF_DIR
from qrag_training.trainer import Trainer
from retriever_corpus import BABI_TEXTS, build_retriever

from qrag_integrations import ChunkIndex, QRAGError, QRAGRetriever, load_model

#: A user's file, with bytes that are not even UTF-8.
THESIS = b"My thesis, chapter 1.\n\xff\xfe\x00 binary tail"


@pytest.fixture(scope="module")
def retriever(tiny_bert_dir: Path) -> QRAGRetriever:
    return build_retriever(tiny_bert_dir, BABI_TEXTS[:4], k=2)


def user_folder(path: Path) -> dict[str, bytes]:
    """A folder of the user's own files; returns its content."""
    (path / "chapters").mkdir(parents=True)
    (path / "thesis.txt").write_bytes(THESIS)
    (path / "chapters" / "one.md").write_text("# One\n", encoding="utf-8")
    return folder_bytes(path)


def assert_untouched(parent: Path, names: list[str]) -> None:
    assert sorted(p.name for p in parent.iterdir()) == names
    assert scratch_left(parent) == []


# -- the reported cases -------------------------------------------------------------------------
def test_retriever_save_into_a_folder_of_user_files_is_refused(retriever, tmp_path):
    before = user_folder(tmp_path / "my_folder")
    with pytest.raises(
        QRAGError,
        match=r"my_folder: it is a folder that is not a saved QRAGRetriever "
        r"\(no retriever.json\); it holds chapters/, thesis.txt",
    ):
        retriever.save(tmp_path / "my_folder")
    assert folder_bytes(tmp_path / "my_folder") == before
    assert_untouched(tmp_path, ["my_folder"])


def test_save_pretrained_into_a_folder_with_notes_is_refused(retriever, tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "notes.md").write_bytes(THESIS)
    with pytest.raises(
        QRAGError, match=r"dir: it is a folder that is not a Q-RAG checkpoint .*notes.md"
    ):
        retriever.model.save_pretrained(str(tmp_path / "dir"))
    assert (tmp_path / "dir" / "notes.md").read_bytes() == THESIS
    assert_untouched(tmp_path, ["dir"])


@pytest.mark.parametrize("saver", ["retriever", "model", "index"])
def test_saving_onto_a_regular_file_is_refused(retriever, tmp_path, saver):
    file = tmp_path / "a_file"
    file.write_bytes(THESIS)
    save = {
        "retriever": retriever.save,
        "model": retriever.model.save_pretrained,
        "index": retriever.index.save,
    }[saver]
    with pytest.raises(QRAGError, match=rf"a_file: it is a file \({len(THESIS)} bytes\)"):
        save(str(file))
    assert file.read_bytes() == THESIS
    assert_untouched(tmp_path, ["a_file"])


def test_index_save_into_a_folder_of_user_files_is_refused(retriever, tmp_path):
    before = user_folder(tmp_path / "idx")
    with pytest.raises(QRAGError, match=r"idx: it is a folder that is not a saved index"):
        retriever.index.save(tmp_path / "idx")
    assert folder_bytes(tmp_path / "idx") == before


def test_a_save_of_another_kind_is_not_replaced(retriever, tmp_path):
    retriever.model.save_pretrained(str(tmp_path / "ckpt"))
    before = folder_bytes(tmp_path / "ckpt")
    with pytest.raises(QRAGError, match=r"not a saved QRAGRetriever .*qrag_config.json"):
        retriever.save(tmp_path / "ckpt")
    assert folder_bytes(tmp_path / "ckpt") == before


def test_a_file_the_user_put_into_an_earlier_save_is_kept(retriever, tmp_path):
    retriever.save(tmp_path / "saved")
    (tmp_path / "saved" / "thesis.txt").write_bytes(THESIS)
    with pytest.raises(
        QRAGError, match=r"saved QRAGRetriever that also holds files it does not write: thesis.txt"
    ):
        retriever.save(tmp_path / "saved")
    assert (tmp_path / "saved" / "thesis.txt").read_bytes() == THESIS


def test_a_symbolic_link_is_not_replaced(retriever, tmp_path):
    user_folder(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(QRAGError, match="link: it is a symbolic link"):
        retriever.save(tmp_path / "link")
    assert (tmp_path / "link").is_symlink() and (
        tmp_path / "real" / "thesis.txt"
    ).read_bytes() == THESIS


def test_a_parent_that_is_a_file_is_refused(retriever, tmp_path):
    (tmp_path / "a_file").write_bytes(THESIS)
    with pytest.raises(QRAGError, match="a parent of it is a file"):
        retriever.save(tmp_path / "a_file" / "saved")
    assert (tmp_path / "a_file").read_bytes() == THESIS


# -- what is allowed --------------------------------------------------------------------------------
def test_missing_empty_and_earlier_saves_are_written(retriever, tmp_path):
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "new" / "nested", tmp_path / "empty", tmp_path / "empty"):
        retriever.save(path)
        assert QRAGRetriever.load(path).index.ids == retriever.index.ids
    assert scratch_left(tmp_path) == [] and scratch_left(tmp_path / "new") == []


# -- overwrite=True: moved aside, never deleted ------------------------------------------------------
def test_overwrite_moves_the_user_folder_aside(retriever, tmp_path, caplog):
    before = user_folder(tmp_path / "my_folder")
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        retriever.save(tmp_path / "my_folder", overwrite=True)
    assert QRAGRetriever.load(tmp_path / "my_folder").index.ids == retriever.index.ids
    (aside,) = [p for p in tmp_path.iterdir() if p.name not in ("my_folder", ".my_folder.lock")]
    assert aside.name.startswith("my_folder.old-") and folder_bytes(aside) == before
    assert f"moved {tmp_path / 'my_folder'} aside to {aside}" in caplog.text


def test_overwrite_moves_aside_under_a_new_name_each_time(retriever, tmp_path):
    (tmp_path / "a_file").write_bytes(THESIS)
    retriever.index.save(tmp_path / "a_file", overwrite=True)
    (tmp_path / "a_file" / "thesis.txt").write_bytes(THESIS)  # the user adds a file to the save
    retriever.index.save(tmp_path / "a_file", overwrite=True)
    assert ChunkIndex.load(tmp_path / "a_file").ids == retriever.index.ids
    file, folder = sorted(
        (p for p in tmp_path.iterdir() if p.name not in ("a_file", ".a_file.lock")), key=Path.is_dir
    )
    assert file.name.startswith("a_file.old-") and file.read_bytes() == THESIS
    assert folder.name.startswith("a_file.old-") and (folder / "thesis.txt").read_bytes() == THESIS


def test_overwrite_never_moves_the_working_directory(retriever, tmp_path, monkeypatch):
    user_folder(tmp_path / "cwd")
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(QRAGError, match="holds the working directory"):
        retriever.save(".", overwrite=True)
    assert (tmp_path / "cwd" / "thesis.txt").read_bytes() == THESIS


def test_overwrite_of_an_earlier_save_replaces_it_in_place(retriever, tmp_path):
    retriever.save(tmp_path / "saved")
    retriever.save(tmp_path / "saved", overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".saved.lock", "saved"]


# -- qrag-train out_dir ----------------------------------------------------------------------------------
def train_config(out_dir: Path, *overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(
            "train",
            overrides=[f"out_dir={out_dir}", "model=tiny", "model.base_model=unused", *overrides],
        )


def test_train_into_a_folder_of_user_files_is_refused(tmp_path):
    before = user_folder(tmp_path / "run")
    for resume in ("false", "true"):
        with pytest.raises(
            QRAGError,
            match=r"out_dir .*run is a folder that is not a qrag-train run folder"
            r".*chapters/, thesis.txt.*overwrite=true",
        ):
            Trainer(train_config(tmp_path / "run", f"resume={resume}"))
    assert folder_bytes(tmp_path / "run") == before
    assert_untouched(tmp_path, ["run"])


def fake_run(out_dir: Path, tiny_bert_dir: Path) -> None:
    """A run folder as qrag-train leaves it (metrics, TensorBoard, checkpoints)."""
    (out_dir / "tb").mkdir(parents=True)
    (out_dir / "metrics.jsonl").write_text('{"step": 0}\n')
    load_model(str(tiny_bert_dir)).save_pretrained(str(out_dir / "best"))


def test_train_into_an_earlier_run_needs_resume_or_overwrite(tmp_path, tiny_bert_dir):
    fake_run(tmp_path / "run", tiny_bert_dir)
    before = folder_bytes(tmp_path / "run")
    with pytest.raises(QRAGError, match="is an earlier qrag-train run .*resume=true"):
        prepare_run_dir(tmp_path / "run", resume=False, overwrite=False)
    prepare_run_dir(tmp_path / "run", resume=True, overwrite=False)
    assert folder_bytes(tmp_path / "run") == before
    prepare_run_dir(tmp_path / "run", resume=False, overwrite=True)
    (aside,) = [p for p in tmp_path.iterdir() if p.name != "run"]
    assert folder_bytes(aside) == before and list((tmp_path / "run").iterdir()) == []


def test_train_refuses_a_run_whose_checkpoint_holds_a_user_file(tmp_path, tiny_bert_dir):
    fake_run(tmp_path / "run", tiny_bert_dir)
    (tmp_path / "run" / "best" / "notes.md").write_bytes(THESIS)
    with pytest.raises(
        QRAGError,
        match=r"a run folder whose best/ is a qrag-train checkpoint that also holds .*notes.md",
    ):
        prepare_run_dir(tmp_path / "run", resume=True, overwrite=False)
    assert (tmp_path / "run" / "best" / "notes.md").read_bytes() == THESIS


def test_train_overwrite_moves_user_files_aside(tmp_path):
    before = user_folder(tmp_path / "run")
    prepare_run_dir(tmp_path / "run", resume=False, overwrite=True)
    (aside,) = [p for p in tmp_path.iterdir() if p.name != "run"]
    assert folder_bytes(aside) == before


def test_train_into_a_missing_or_empty_folder(tmp_path):
    prepare_run_dir(tmp_path / "a" / "run", resume=False, overwrite=False)
    prepare_run_dir(tmp_path / "a" / "run", resume=False, overwrite=False)  # still empty
    assert (tmp_path / "a" / "run").is_dir()


def test_the_index_is_unchanged_by_a_refused_save(retriever, tmp_path):
    ids, emb = retriever.index.ids, retriever.index.snapshot().embeddings.clone()
    (tmp_path / "a_file").write_bytes(THESIS)
    with pytest.raises(QRAGError):
        retriever.save(tmp_path / "a_file")
    assert retriever.index.ids == ids and torch.equal(retriever.index.snapshot().embeddings, emb)
    assert os.listdir(tmp_path) == ["a_file"]
