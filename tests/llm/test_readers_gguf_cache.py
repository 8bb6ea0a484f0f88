"""The cache of converted GGUF reader models (``readers.gguf_cache``), on a tiny GGUF Llama built
here: same tokens from the cache as from the file, keyed by content, written atomically, damage
detected and rebuilt, folders that are not ours refused and kept."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_llm import build_tiny_llama_gguf

from qrag_integrations.llm import ReaderError, TransformersReader, build_prompt
from qrag_integrations.llm.gguf_cache import (
    CACHE_ENV,
    MANIFEST_FILE,
    cache_key,
    entry_problem,
    file_sha256,
    load_gguf_cached,
    reader_cache_dir,
    write_entry,
)

PROMPTS = ["the apple", "where is the app", "mary went to the kitchen"]


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama_gguf(tmp_path_factory.mktemp("tiny_gguf") / "tiny.Q8_0.gguf")


@pytest.fixture()
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What each ``from_pretrained`` of the reader read: ``"gguf"`` or the folder's name."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    seen: list[str] = []
    for cls in (AutoTokenizer, AutoModelForCausalLM):
        original = cls.from_pretrained

        def spy(folder: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            seen.append("gguf" if kwargs.get("gguf_file") else Path(folder).name)
            return _original(folder, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", spy)
    return seen


def greedy_ids(reader: TransformersReader, prompt: str = PROMPTS[1], new: int = 12) -> list[int]:
    """The prompt's tokens and the greedy continuation, as the reader feeds its model."""
    enc = reader.tokenizer(
        reader.format_prompt(prompt),
        return_tensors="pt",
        add_special_tokens=not reader.use_chat_template,
    )
    with torch.inference_mode():
        out = reader.model.generate(
            **enc, max_new_tokens=new, do_sample=False, pad_token_id=reader.tokenizer.pad_token_id
        )
    return out[0].tolist()


def scratch(folder: Path) -> list[Path]:
    """Hidden leftovers, but not the ``.<entry>.lock`` file every save keeps (atomic.py)."""
    return sorted(p for p in folder.glob(".*") if p.suffix != ".lock")


def test_a_gguf_file_is_converted_once_then_read_from_the_cache_with_the_same_tokens(
    tiny_gguf: Path, tmp_path: Path, loads: list[str]
) -> None:
    plain = TransformersReader(tiny_gguf, cache_dir=False)
    assert plain.cache_path is None and loads == ["gguf", "gguf"] and plain.use_chat_template
    first = TransformersReader(tiny_gguf, cache_dir=tmp_path)
    entry = first.cache_path
    assert entry is not None and entry.parent == tmp_path
    assert entry.name.startswith(file_sha256(tiny_gguf)) and "transformers" in entry.name
    manifest = json.loads((entry / MANIFEST_FILE).read_text())
    assert manifest["source"] == {
        "name": tiny_gguf.name,
        "path": str(tiny_gguf),
        "size": tiny_gguf.stat().st_size,
        "sha256": file_sha256(tiny_gguf),
    }
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(manifest["files"])
    assert not [name for name in manifest["files"] if name.endswith((".bin", ".pt", ".pth"))]
    assert scratch(tmp_path) == []

    loads.clear()
    cached = TransformersReader(tiny_gguf, cache_dir=tmp_path)
    assert cached.cache_path == entry and loads == [entry.name, entry.name]  # no GGUF parsing
    expected = greedy_ids(plain)
    assert len(expected) > 12 and greedy_ids(first) == expected
    for prompt in PROMPTS:
        assert greedy_ids(cached, prompt) == greedy_ids(plain, prompt)
    assert cached.generate(PROMPTS) == plain.generate(PROMPTS)
    assert cached.name == plain.name == "transformers:tiny.Q8_0"
    assert cached.model.dtype == plain.model.dtype == torch.float32
    plain_state = plain.model.state_dict()
    assert all(torch.equal(t, plain_state[k]) for k, t in cached.model.state_dict().items())


def test_the_key_is_the_files_content_not_its_name_size_or_mtime(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    other = build_tiny_llama_gguf(tmp_path / "other.gguf", seed=1)
    assert other.stat().st_size == tiny_gguf.stat().st_size
    assert cache_key(other).folder != cache_key(tiny_gguf).folder
    assert cache_key(shutil.copy(tiny_gguf, tmp_path / "renamed.gguf")) == cache_key(tiny_gguf)

    # A file replaced in place with another's bytes, size and mtime kept, is not the first one.
    path = shutil.copy(tiny_gguf, tmp_path / "model.gguf")
    cache = tmp_path / "cache"
    before = TransformersReader(path, cache_dir=cache)
    stat = os.stat(path)
    Path(path).write_bytes(other.read_bytes())
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == stat.st_mtime_ns and os.stat(path).st_size == stat.st_size
    after = TransformersReader(path, cache_dir=cache)
    assert after.cache_path != before.cache_path
    assert greedy_ids(after) == greedy_ids(TransformersReader(other, cache_dir=False))
    assert greedy_ids(after) != greedy_ids(before)


def _truncate(entry: Path) -> None:
    weights = entry / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])


def _flip_a_weight_byte(entry: Path) -> None:  # same size, still loads: only the hash tells
    weights = entry / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1000] ^= 0xFF
    weights.write_bytes(bytes(data))


def _old_layout(entry: Path) -> None:
    manifest = json.loads((entry / MANIFEST_FILE).read_text())
    manifest["version"] = 0
    (entry / MANIFEST_FILE).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_truncate, "model.safetensors has"),
        (_flip_a_weight_byte, "model.safetensors does not match its SHA-256"),
        (lambda entry: (entry / "tokenizer.json").unlink(), "tokenizer.json is missing"),
        (_old_layout, "layout version 0"),
    ],
)
def test_a_damaged_entry_is_detected_converted_again_and_replaced(
    tiny_gguf: Path,
    tmp_path: Path,
    loads: list[str],
    caplog: pytest.LogCaptureFixture,
    damage: Any,
    why: str,
) -> None:
    first = TransformersReader(tiny_gguf, cache_dir=tmp_path)
    entry, expected = first.cache_path, greedy_ids(first)
    assert entry is not None
    damage(entry)
    assert why in (entry_problem(entry, cache_key(tiny_gguf)) or "")
    loads.clear()
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        again = TransformersReader(tiny_gguf, cache_dir=tmp_path)
    assert f"the reader cache {entry} is damaged (" in caplog.text and why in caplog.text
    assert loads == ["gguf", "gguf"] and again.cache_path == entry
    assert entry_problem(entry, cache_key(tiny_gguf)) is None and scratch(tmp_path) == []
    assert greedy_ids(again) == expected
    loads.clear()
    assert greedy_ids(TransformersReader(tiny_gguf, cache_dir=tmp_path)) == expected
    assert "gguf" not in loads


def _no_manifest(entry: Path) -> None:
    entry.mkdir()
    (entry / "notes.txt").write_text("mine")


def _garbled_manifest(entry: Path) -> None:
    (entry / MANIFEST_FILE).write_text('{"format": "qrag-gguf-reader-cache", "files": ')


def _a_foreign_file(entry: Path) -> None:
    (entry / "notes.txt").write_text("mine")


@pytest.mark.parametrize(
    ("plant", "said"),
    [
        (
            _no_manifest,
            (
                f"a folder that is not a converted reader model cache (no {MANIFEST_FILE}); "
                "it holds notes.txt"
            ),
        ),
        (_garbled_manifest, f"(no {MANIFEST_FILE})"),
        (_a_foreign_file, "also holds files it does not write: notes.txt"),
    ],
)
def test_a_folder_that_is_not_ours_at_the_entry_path_is_refused_before_converting_and_kept(
    tiny_gguf: Path, tmp_path: Path, loads: list[str], plant: Any, said: str
) -> None:
    entry = tmp_path / cache_key(tiny_gguf).folder
    if plant is not _no_manifest:
        assert TransformersReader(tiny_gguf, cache_dir=tmp_path).cache_path == entry
    plant(entry)
    before = {p.name: p.read_bytes() for p in entry.iterdir()}
    loads.clear()
    refused = f"{re.escape(f'refusing the reader cache folder {entry}: it is ')}.*{re.escape(said)}"
    with pytest.raises(ReaderError, match=refused) as err:
        TransformersReader(tiny_gguf, cache_dir=tmp_path)
    assert "cache_dir=False" in str(err.value) and loads == []
    assert {p.name: p.read_bytes() for p in entry.iterdir()} == before


def test_an_unwritable_cache_is_logged_and_the_model_still_loads(
    tiny_gguf: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        reader = TransformersReader(tiny_gguf, cache_dir=blocker / "cache")
    assert reader.cache_path is None and "could not write the reader cache" in caplog.text
    assert greedy_ids(reader) == greedy_ids(TransformersReader(tiny_gguf, cache_dir=False))
    assert blocker.read_text() == "not a folder"


class _Weights:
    """A stand-in model: one float parameter, saved as a file."""

    def parameters(self) -> list[torch.Tensor]:
        return [torch.zeros(1)]

    def save_pretrained(self, folder: Path) -> None:
        (Path(folder) / "model.safetensors").write_bytes(b"\0" * 64)


class _FullDisk:
    def save_pretrained(self, folder: Path) -> None:
        (Path(folder) / "tokenizer.json").write_text("{")
        raise OSError(28, "No space left on device")


def test_a_write_that_fails_midway_leaves_neither_an_entry_nor_scratch(
    tiny_gguf: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = cache_key(tiny_gguf)
    entry = tmp_path / key.folder
    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        assert not write_entry(entry, key, tiny_gguf, _FullDisk(), _Weights())
    assert "No space left on device" in caplog.text
    assert list(tmp_path.iterdir()) == []


def test_a_killed_writers_scratch_folder_is_never_read(
    tiny_gguf: Path, tmp_path: Path, loads: list[str]
) -> None:
    key = cache_key(tiny_gguf)
    left = tmp_path / f".{key.folder}.tmp-0123abcd"  # what atomic_dir had written when killed
    left.mkdir()
    (left / "config.json").write_text("{}")
    reader = TransformersReader(tiny_gguf, cache_dir=tmp_path)
    assert loads == ["gguf", "gguf"] and reader.cache_path == tmp_path / key.folder
    assert (left / "config.json").read_text() == "{}"  # maybe another process's: left alone


def test_an_entry_written_meanwhile_by_another_process_is_kept(
    tiny_gguf: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reader = TransformersReader(tiny_gguf, cache_dir=tmp_path)
    entry, key = reader.cache_path, cache_key(tiny_gguf)
    assert entry is not None
    manifest = (entry / MANIFEST_FILE).stat()
    with caplog.at_level(logging.INFO, logger="qrag_integrations"):
        assert write_entry(entry, key, tiny_gguf, reader.tokenizer, reader.model)
    assert "written by another process meanwhile" in caplog.text
    assert (entry / MANIFEST_FILE).stat().st_ino == manifest.st_ino and scratch(tmp_path) == []


def test_an_intact_entry_that_does_not_load_is_replaced(
    tiny_gguf: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reader = TransformersReader(tiny_gguf, cache_dir=tmp_path)
    entry = reader.cache_path
    assert entry is not None
    manifest = (entry / MANIFEST_FILE).stat()
    converted: list[Path] = []

    def refuse(folder: Path) -> tuple[Any, Any]:
        raise RuntimeError("an incompatible checkpoint")

    def convert() -> tuple[Any, Any]:
        converted.append(tiny_gguf)
        return TransformersReader(tiny_gguf, cache_dir=False).tokenizer, reader.model

    with caplog.at_level(logging.WARNING, logger="qrag_integrations"):
        _, model, got = load_gguf_cached(tiny_gguf, tmp_path, convert, refuse)
    assert "it did not load (RuntimeError: an incompatible checkpoint)" in caplog.text
    assert converted == [tiny_gguf] and model is reader.model and got == entry
    assert (entry / MANIFEST_FILE).stat().st_ino != manifest.st_ino
    assert entry_problem(entry, cache_key(tiny_gguf)) is None


def test_the_cache_folder_setting(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert reader_cache_dir() == tmp_path / "home/.cache/qrag-integrations/readers"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert reader_cache_dir() == tmp_path / "xdg/qrag-integrations/readers"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "q"))
    assert reader_cache_dir() == reader_cache_dir(True) == tmp_path / "q/readers"
    assert reader_cache_dir(tmp_path / "mine") == tmp_path / "mine"
    assert reader_cache_dir(False) is None
    with pytest.raises(ReaderError, match="cache_dir must be a folder"):
        reader_cache_dir("")

    entry = tmp_path / "q/readers" / cache_key(tiny_gguf).folder
    assert TransformersReader(tiny_gguf).cache_path == entry
    monkeypatch.setenv(CACHE_ENV, "off")
    assert reader_cache_dir() is None and TransformersReader(tiny_gguf).cache_path is None
    assert TransformersReader(tiny_gguf, cache_dir=False).cache_path is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q"]  # nothing else was written


@pytest.mark.slow
def test_smollm2_from_the_cache_generates_the_same_tokens_as_from_its_gguf_file(
    tmp_path: Path, loads: list[str]
) -> None:
    converted = TransformersReader(max_new_tokens=16, cache_dir=tmp_path)  # the GGUF file's model
    entry = converted.cache_path
    assert loads == ["gguf", "gguf"] and entry is not None and entry.parent == tmp_path
    loads.clear()
    cached = TransformersReader(max_new_tokens=16, cache_dir=tmp_path)
    assert loads == [entry.name, entry.name] and cached.cache_path == entry
    assert cached.name == converted.name == "transformers:SmolLM2-135M-Instruct.Q4_1"
    assert cached.use_chat_template and cached.tokenizer.pad_token == converted.tokenizer.pad_token
    prompts = [
        build_prompt(
            "Where is the apple?", ["Mary got the apple.", "Mary travelled to the kitchen."]
        ),
        "What is the capital of France? Reply with one word.",
    ]
    for prompt in prompts:
        assert greedy_ids(cached, prompt, new=16) == greedy_ids(converted, prompt, new=16)
    answers = cached.generate(prompts)
    assert answers == converted.generate(prompts)
    assert "kitchen" in answers[0].lower() and "paris" in answers[1].lower()
