"""Run folders and their checkpoints: model folders plus a resumable training state, written
atomically, no pickle.

A run folder (``out_dir``) holds only what ``qrag-train`` writes: ``metrics.jsonl`` (appended to,
never rewritten: :func:`append_metrics`, :func:`read_metrics`), ``tb/``,
``last/`` and ``best/``, and the plot of the metrics (see :func:`prepare_run_dir`: a folder holding anything else is refused).
``out_dir/last`` and ``out_dir/best`` are ordinary Q-RAG checkpoint folders
(:func:`qrag_integrations.load_model` reads them) with two additions:

* ``train_config.yaml``: the resolved training config (also stored in ``QRAGConfig.extra``;
  written before the checkpoint's files, so ``qrag_config.json`` records its digest);
* ``train_state/`` (``last`` only), everything else needed to continue the run:

  - ``state.json``: counters, schedule, best metric, data-stream position, python / numpy RNGs,
    and the digests of the two files below (:mod:`qrag_integrations.core.digests`);
  - ``tensors.safetensors``: target encoders (trained part) and torch / CUDA RNG states;
  - ``optimizer.pt``: the AdamW state dict, written with ``torch.save`` and read back with
    ``torch.load(weights_only=True)`` (plain tensors and numbers only; no code is unpickled).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from qrag_integrations.core.atomic import (
    SaveKind,
    atomic_dir,
    move_aside,
    recover_interrupted_save,
    write_json_atomic,
)
from qrag_integrations.core.checkpoint import CHECKPOINT_SAVE, write_checkpoint_files
from qrag_integrations.core.digests import DIGESTS_KEY, check_manifest, seal, verify_files
from qrag_integrations.core.errors import DamagedFileError, QRAGError
from qrag_integrations.core.model import QRAGModel

STATE_DIR = "train_state"
STATE_JSON = "state.json"
TENSORS_FILE = "tensors.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
CONFIG_YAML = "train_config.yaml"
STATE_FORMAT_VERSION = 1
METRICS_FILE, LAST_DIR, BEST_DIR, TB_DIR = "metrics.jsonl", "last", "best", "tb"
#: The end-of-run comparison with the baselines (``final_report``).
REPORT_JSON, REPORT_MD = "report.json", "report.md"

#: ``out_dir/last`` and ``out_dir/best``: checkpoints with the trainer's additions.
RUN_CHECKPOINT_SAVE = SaveKind(
    "qrag-train checkpoint",
    CHECKPOINT_SAVE.entries | {CONFIG_YAML, STATE_DIR},
    CHECKPOINT_SAVE.manifest,
    CHECKPOINT_SAVE.format,
)
#: ``out_dir``, recognised by holding nothing but what the trainer (and ``qrag_training.plot``,
#: ``metrics.png``) writes.
RUN_FOLDER = SaveKind(
    "qrag-train run folder",
    frozenset({METRICS_FILE, "metrics.png", LAST_DIR, BEST_DIR, TB_DIR, REPORT_JSON, REPORT_MD}),
)


def rng_state() -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Global RNG states: JSON-able python / numpy parts and torch tensors."""
    version, internal, gauss = random.getstate()
    np_state = np.random.get_state(legacy=False)
    np_json = dict(np_state)
    np_json["state"] = {
        "key": np_state["state"]["key"].tolist(),
        "pos": int(np_state["state"]["pos"]),
    }
    tensors = {"rng_torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng_cuda_{i}"] = s
    return {"python": [version, list(internal), gauss], "numpy": np_json}, tensors


def set_rng_state(data: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
    """Inverse of :func:`rng_state`."""
    version, internal, gauss = data["python"]
    random.setstate((version, tuple(internal), gauss))
    np_state = dict(data["numpy"])
    np_state["state"] = {
        "key": np.asarray(np_state["state"]["key"], dtype=np.uint32),
        "pos": int(np_state["state"]["pos"]),
    }
    np.random.set_state(np_state)
    torch.set_rng_state(tensors["rng_torch"])
    cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng_cuda_")]
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)


def save_run_checkpoint(
    path: Path,
    model: QRAGModel,
    config_yaml: str,
    card_notes: str = "",
    state: dict[str, Any] | None = None,
    tensors: dict[str, torch.Tensor] | None = None,
    optimizer_state: dict[str, Any] | None = None,
) -> None:
    """Write a checkpoint folder (and, if ``state`` is given, the training state) atomically;
    ``path`` must be missing or an earlier checkpoint of a run."""
    with atomic_dir(path, RUN_CHECKPOINT_SAVE) as tmp:
        # first, so that the checkpoint's manifest records its digest with the other files'
        (tmp / CONFIG_YAML).write_text(config_yaml, encoding="utf-8")
        # into this scratch folder, not through save_pretrained: a nested atomic_dir would put
        # its own scratch folder next to ours, in out_dir
        write_checkpoint_files(model, tmp, card_notes=card_notes)
        if state is not None:
            sdir = tmp / STATE_DIR
            sdir.mkdir()
            save_file(
                {k: v.contiguous() for k, v in (tensors or {}).items()}, str(sdir / TENSORS_FILE)
            )
            torch.save(optimizer_state or {}, sdir / OPTIMIZER_FILE)
            # last, recording the digests of the two files (and its own)
            manifest = {"format_version": STATE_FORMAT_VERSION, **state}
            write_json_atomic(
                sdir / STATE_JSON, seal(manifest, sdir, [TENSORS_FILE, OPTIMIZER_FILE])
            )


def has_train_state(path: Path) -> bool:
    """Whether ``path`` holds a resumable training state."""
    return (path / STATE_DIR / STATE_JSON).is_file()


def train_state_fix(path: Path) -> str:
    """What to do about a damaged training state in the checkpoint folder ``path``."""
    return (
        f"restore {path} from a copy, or start the run afresh (resume=false with a new out_dir "
        f"or overwrite=true, which moves this run aside; init_from={path} keeps its weights)"
    )


def load_train_state(
    path: Path, device: str | torch.device = "cpu"
) -> tuple[dict[str, Any], dict[str, torch.Tensor], dict[str, Any]]:
    """Read ``(state, tensors, optimizer_state)`` from a checkpoint folder's ``train_state``,
    after checking the digests its ``state.json`` records (one without them, from an older
    version, is read with a warning: see :func:`~qrag_integrations.core.digests.verify_files`).

    Raises:
        DamagedFileError: a file of it is missing, unreadable or differs from what was saved,
            named with what to do.
        ValueError: a training state of another format version.
    """
    sdir, fix = path / STATE_DIR, train_state_fix(path)
    try:
        state = json.loads((sdir / STATE_JSON).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DamagedFileError(f"corrupt {sdir / STATE_JSON}: {exc}; {fix}") from exc
    if not isinstance(state, dict):
        raise DamagedFileError(f"corrupt {sdir / STATE_JSON}: not a JSON object; {fix}")
    check_manifest(state, sdir / STATE_JSON, fix)
    if state.get("format_version") != STATE_FORMAT_VERSION:
        raise ValueError(
            f"{sdir}: unsupported training-state version {state.get('format_version')!r}"
        )
    verify_files(sdir, state, STATE_JSON, fix)
    state.pop(DIGESTS_KEY, None)
    tensors = load_file(str(sdir / TENSORS_FILE))
    optimizer_state = torch.load(sdir / OPTIMIZER_FILE, map_location=device, weights_only=True)
    return state, tensors, optimizer_state


def append_metrics(path: Path, record: dict[str, Any]) -> None:
    """Append one record to a ``metrics.jsonl`` (after a newline, where a killed process left a
    torn last line, so the torn part stays a line of its own that :func:`read_metrics` skips)."""
    with open(path, "a+b") as fh:
        fh.seek(0, 2)
        torn = False
        if fh.tell():
            fh.seek(-1, 2)
            torn = fh.read(1) != b"\n"
        fh.write((("\n" if torn else "") + json.dumps(record) + "\n").encode("utf-8"))


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """A run's metric records: the lines of its ``metrics.jsonl`` (torn ones skipped), where a
    record for a step at or before an earlier one's (the first of a resumed run after a killed
    process had logged past its last save, or of a run started over) replaces the records of
    that step and after it. Every line stays in the file."""
    records: list[dict[str, Any]] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            continue
        while records and records[-1]["step"] >= record["step"]:
            records.pop()
        records.append(record)
    return records


def prepare_run_dir(out_dir: Path, resume: bool, overwrite: bool) -> None:
    """Make ``out_dir`` ready for a run, never touching files the trainer did not write.

    A missing or empty folder is fine, and so is an earlier run when ``resume`` is set.
    Anything else (a folder of other files, a file, an earlier run without ``resume``) is
    refused, or with ``overwrite`` moved aside to a sibling ``<name>.old-<time>``. Checkpoint
    saves interrupted by a killed process are then repaired (see
    :func:`qrag_integrations.core.atomic.recover_interrupted_save`).

    Raises:
        QRAGError: ``out_dir`` holds something else and ``overwrite`` is false.
    """
    problem = RUN_FOLDER.obstacle(out_dir)
    if problem is None:
        problem = next(
            (
                f"a run folder whose {name}/ is {inner}"
                for name in (LAST_DIR, BEST_DIR)
                if (inner := RUN_CHECKPOINT_SAVE.obstacle(out_dir / name))
            ),
            None,
        )
    if problem is None and not resume and out_dir.is_dir() and any(out_dir.iterdir()):
        problem = "an earlier qrag-train run (pass resume=true to continue it)"
    if problem is not None:
        if not overwrite:
            raise QRAGError(
                f"out_dir {out_dir} is {problem}; choose a new out_dir, or pass overwrite=true to "
                "move it aside to a new sibling folder (nothing is deleted)"
            )
        move_aside(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in (LAST_DIR, BEST_DIR):
        recover_interrupted_save(out_dir / name, RUN_CHECKPOINT_SAVE)
