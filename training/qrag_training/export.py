"""Export a training run as a checkpoint to ship, with a model card written from the run's own record.

    python -m qrag_training.export RUN_DIR OUT_DIR [--from best|last] [--set FIELD=JSON ...]
        [--base-model SPEC] [--dtype fp16|bf16|fp32] [--notes NOTES.md]

``RUN_DIR`` is what ``qrag-train`` wrote (``best/``, ``last/``, ``metrics.jsonl``, perhaps
``report.md``) or a checkpoint this command exported before (its record travels in
``qrag_config.json``, so a checkpoint exported on one machine can be exported again on another).
``RUN_DIR`` may also name a shipped checkpoint (``packaged:qrag-general-minilm``).
``OUT_DIR`` receives an ordinary checkpoint folder: the trained weights (a partial checkpoint's in
fp16 unless ``--dtype`` says otherwise) and a ``README.md`` built from nothing but the record:

* the learner (``algo.kind``: ``next_hop`` trained every shipped checkpoint; ``pqn`` is the
  paper's loop), where the weights started (the base encoder or ``init_from``), the update
  exported out of the planned ``steps``, and the metric that chose it;
* the data: each training and validation source with its weight and settings, and the splits
  (HotpotQA train / val slices, hash splits, generator seeds);
* every held-out evaluation of the run (``eval/*`` of ``metrics.jsonl``), the exported update
  marked; the run's end-of-run comparison with the baselines (``report.md``) when it has one;
* search settings changed at export (``--set``), and ``--notes`` appended as they are.

Machine paths never reach the card or ``qrag_config.json``: an absolute path, and any path given
as a data file, ``init_from`` or ``out_dir``, is replaced by its last component.

``--base-model`` loads the trained layers of a partial checkpoint over another copy of its base
encoder (a lent GPU trains over an fp16-rounded base whose weights hash differs from the
installed one; the trained layers are re-attached here, and every number measured afterwards is
measured on the result). ``--set`` changes fields of the saved ``QRAGConfig`` (search settings
such as ``lexical_depth=10`` or ``position_mode="document_relative"``), checked by
``QRAGConfig``.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import torch
from safetensors.torch import load_file

from qrag_integrations.core.checkpoint import (
    CARD_FILE,
    CONFIG_FILE,
    PARTIAL_WEIGHTS_FILE,
    read_manifest,
    save_pretrained,
)
from qrag_integrations.core.config import QRAGConfig
from qrag_integrations.core.defaults import resolve_packaged_checkpoint
from qrag_integrations.core.loading import load_model
from qrag_integrations.core.model import QRAGModel
from qrag_training.run_folder import BEST_DIR, LAST_DIR, METRICS_FILE, REPORT_MD, read_metrics

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": None}
#: Config keys whose values are file or folder paths even when relative.
PATH_KEYS = frozenset({"path", "init_from", "out_dir", "rebased_from_base"})
#: What each learner is, for the card.
LEARNERS = {
    "next_hop": (
        "the supervised next-hop learner (`qrag_training.next_hop`): cross-entropy of Q over the "
        "chunks not yet picked, the supporting ones positive"
    ),
    "pqn": (
        "PQN (`qrag_training.pqn`, the paper's value-based loop): soft-greedy rollouts, "
        "Q(lambda) targets, twin-head regression"
    ),
}
#: Keys of a data source that say nothing about its content (sizes and seeds are in the splits line).
QUIET_KEYS = frozenset({"name", "n", "seed", "limit", "path"})
#: ``metrics.jsonl`` columns of a held-out evaluation.
EVAL_PREFIX = "eval/"
#: The card section of the run's end-of-run comparison with the baselines (``report.md``).
REPORT_HEADING = "## Against the baselines (end of the run)"


def _is_machine_path(key: str, value: str) -> bool:
    if value.startswith("~") or PurePosixPath(value).is_absolute():
        return True
    if PureWindowsPath(value).drive:
        return True
    return key in PATH_KEYS and ("/" in value or "\\" in value)


def strip_machine_paths(node: Any, key: str = "") -> Any:
    """``node`` (a JSON-able tree) with every machine path replaced by its last component."""
    if isinstance(node, dict):
        return {k: strip_machine_paths(v, str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [strip_machine_paths(v, key) for v in node]
    if isinstance(node, str) and _is_machine_path(key, node):
        return PurePosixPath(node.replace("\\", "/").rstrip("/")).name or node
    return node


def validation_history(metrics_file: Path) -> list[dict[str, Any]]:
    """The held-out evaluations of a run: ``step`` and the ``eval/*`` values of each record
    that has them (a record torn by a killed process is skipped)."""
    out: list[dict[str, Any]] = []
    if not metrics_file.is_file():
        return out
    for record in read_metrics(metrics_file):  # rows logged again after a resume: the later
        values = {
            k[len(EVAL_PREFIX) :]: v
            for k, v in record.items()
            if k.startswith(EVAL_PREFIX) and k != EVAL_PREFIX + "seconds"
        }
        if values:
            out.append({"step": record.get("step"), **values})
    return out


def card_section(card: str, heading: str) -> str:
    """The body of ``card``'s section under ``heading`` (empty when it has none)."""
    start = card.find(heading + "\n")
    if start < 0:
        return ""
    body = card[start + len(heading) :]
    end = body.find("\n## ")
    return (body if end < 0 else body[:end]).strip()


def read_record(src: Path, chosen: str = BEST_DIR) -> tuple[Path, dict[str, Any], str]:
    """The checkpoint folder to export, the run's record (``QRAGConfig.extra`` with the run's
    name and, from a run folder, its ``validation`` history) and its end-of-run report."""
    src = Path(resolve_packaged_checkpoint(str(src)))  # a packaged checkpoint's name: its folder
    if (src / CONFIG_FILE).is_file():  # an exported checkpoint: its record is in its config
        extra = dict(read_manifest(src)["config"].get("extra") or {})
        extra.setdefault("run", src.name)
        card = src / CARD_FILE
        report = (
            card_section(card.read_text(encoding="utf-8"), REPORT_HEADING) if card.is_file() else ""
        )
        return src, extra, report
    checkpoint = src / chosen
    if not (checkpoint / CONFIG_FILE).is_file():
        raise SystemExit(
            f"{src} is neither a qrag-train run folder with {chosen}/ nor a checkpoint"
        )
    extra = dict(read_manifest(checkpoint)["config"].get("extra") or {})
    extra["run"] = src.resolve().name
    history = validation_history(src / METRICS_FILE)
    if history:
        extra["validation"] = history
    report = src / REPORT_MD
    return checkpoint, extra, report.read_text(encoding="utf-8").strip() if report.is_file() else ""


def load_over_base(checkpoint: Path, base_model: str) -> QRAGModel:
    """The partial checkpoint's trained layers loaded over ``base_model`` (no weights-hash check:
    that base is meant to differ, e.g. by fp16 rounding)."""
    manifest = read_manifest(checkpoint)
    if manifest.get("weights") != "partial":
        raise SystemExit(f"{checkpoint} is not a partial checkpoint: --base-model needs one")
    config = QRAGConfig.from_dict({**manifest["config"], "base_model": base_model})
    config.extra = {**config.extra, "rebased_from_base": manifest["config"]["base_model"]}
    model = QRAGModel.from_base(config)
    trained = load_file(str(checkpoint / PARTIAL_WEIGHTS_FILE))
    if set(trained) != set(model.trained_state_dict()):
        raise SystemExit(
            f"{checkpoint}: trained tensors do not match the top {config.trainable_layers} layers"
        )
    model.load_state_dict({k: v.to(torch.float32) for k, v in trained.items()}, strict=False)
    return model.eval()


def apply_settings(model: QRAGModel, settings: Sequence[str]) -> dict[str, tuple[Any, Any]]:
    """Set ``FIELD=JSON`` fields of the model's config (checked by ``QRAGConfig``); returns
    each changed field's ``(before, after)``."""
    fields: dict[str, Any] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: expected FIELD=JSON")
        try:
            fields[key] = json.loads(value)
        except json.JSONDecodeError as err:
            raise SystemExit(f"--set {item!r}: the value is not JSON ({err})") from err
    if "extra" in fields or "base_model" in fields:
        raise SystemExit("--set cannot change extra or base_model (see --base-model)")
    try:
        checked = QRAGConfig.from_dict({**model.config.to_dict(), **fields})
    except (TypeError, ValueError) as err:
        raise SystemExit(f"--set: {err}") from err
    before = model.config.to_dict()
    for key in fields:
        setattr(model.config, key, getattr(checked, key))
    after = model.config.to_dict()
    return {k: (before[k], after[k]) for k in fields if before[k] != after[k]}


# -- the card ---------------------------------------------------------------------------------------
def _value(v: Any) -> str:
    if isinstance(v, list):
        return "/".join(_value(x) for x in v)
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _source(part: dict[str, Any], name: str | None = None) -> str:
    """``name`` (or the part's) and its settings, e.g. ``babilong (weight 2, task qa1/qa2)``."""
    shown = [f"{k} {_value(v)}" for k, v in part.items() if k not in QUIET_KEYS and v is not None]
    label = f"`{part.get('name', name)}`"
    return label + (f" ({', '.join(shown)})" if shown else "")


def _sources(env: dict[str, Any], side: str) -> list[str]:
    section = env.get(side) or {}
    if "parts" in section:
        return [_source(p) for p in section["parts"]]
    return [_source(section, env.get("name"))]


def _splits(cfg: dict[str, Any]) -> str:
    env = cfg.get("env", {})
    train, held = env.get("train") or {}, env.get("eval") or {}
    parts = [
        f"training: seed {train['seed']}"
        + (" (a new pool per pass: seed x 1000 + pass)" if env.get("refresh_pool") else "")
        if "seed" in train
        else None,
        f"validation: seed {held['seed']}" if "seed" in held else None,
        f"training hash split `{env['train_hash_split']}`" if env.get("train_hash_split") else None,
        f"validation hash split `{env['eval_hash_split']}`" if env.get("eval_hash_split") else None,
        f"report hash split `{env['report_hash_split']}`" if env.get("report_hash_split") else None,
    ]
    kinds = {p.get("split") for p in held.get("parts", [held]) if p.get("split")}
    kinds |= {p.get("split") for p in train.get("parts", [train]) if p.get("split")}
    if kinds:
        parts.append(
            "HotpotQA by hash of the question id: training on its `train` split, validation on "
            "its `val` slice, never on the held-out bucket"
            if {"train", "val"} <= kinds
            else "named splits: " + ", ".join(f"`{k}`" for k in sorted(kinds))
        )
    return "; ".join(p for p in parts if p)


def _metric_table(history: list[dict[str, Any]], step: Any) -> list[str]:
    keys = [k for k in history[0] if k not in ("step", "n")]
    for row in history[1:]:
        keys += [k for k in row if k not in keys and k not in ("step", "n")]
    lines = [
        "| update | " + " | ".join(keys) + " |",
        "|---:|" + "---:|" * len(keys),
    ]
    for row in history:
        cells = [
            f"{row[k]:.3f}" if isinstance(row.get(k), float) and math.isfinite(row[k]) else "-"
            for k in keys
        ]
        mark = f"**{row['step']}** (exported)" if row["step"] == step else str(row["step"])
        lines.append(f"| {mark} | " + " | ".join(cells) + " |")
    return lines


def card_notes(
    record: dict[str, Any],
    report: str = "",
    changed: dict[str, tuple[Any, Any]] | None = None,
    notes: str = "",
) -> str:
    """The card's sections below its settings table and provenance, from a run's ``record`` and
    ``report`` (:func:`read_record`, machine paths already stripped)."""
    cfg = record.get("train_config") or {}
    algo, env, model = cfg.get("algo", {}), cfg.get("env", {}), cfg.get("model", {})
    kind = algo.get("kind", "pqn")
    step, evaluation = record.get("step"), record.get("eval") or {}
    metric = cfg.get("checkpoint_metric", "fact_em")
    start = cfg.get("init_from")
    lines = [
        "## Training",
        "",
        f"- Run `{record.get('run', '?')}`: update {step} of {cfg.get('steps', '?')} planned"
        + (
            f" (time budget {_value(cfg['time_budget_minutes'])} minutes)"
            if cfg.get("time_budget_minutes")
            else ""
        )
        + f", chosen by the highest validation `{metric}`"
        + (f" ({evaluation[metric]:.3f})" if isinstance(evaluation.get(metric), float) else "")
        + ".",
        f"- Learner `{kind}`: {LEARNERS.get(kind, kind)}.",
        *(
            ["- Update 0 is the starting weights: no later evaluation of the run beat them."]
            if step == 0
            else []
        ),
        (
            f"- Started from `{start}` (a checkpoint of an earlier run, continued)."
            if start
            else f"- Started from the untrained base encoder `{model.get('name', '?')}`."
        ),
        "- Trained: "
        + (
            f"the top {model['trainable_layers']} layer"
            + ("s" if model["trainable_layers"] != 1 else "")
            + " of each encoder"
            if model.get("trainable_layers")
            else "whole encoders"
        )
        + f"; peak learning rate {_value(algo.get('lr', '?'))}"
        + (
            f", {algo['questions_per_step']} questions a step"
            if "questions_per_step" in algo
            else f", {cfg.get('batch_size', '?')} transitions a rollout"
        )
        + f"; positions `{env.get('position_mode', '?')}` in training.",
        "",
        "## Data",
        "",
        f"Training (`{env.get('name', '?')}`): " + "; ".join(_sources(env, "train")) + ".",
        "",
        f"Validation ({cfg.get('eval_episodes', '?')} episodes, chose the checkpoint): "
        + "; ".join(_sources(env, "eval"))
        + ".",
    ]
    splits = _splits(cfg)
    if splits:
        lines += ["", f"Splits: {splits}."]
    history = record.get("validation")
    if history:
        lines += ["", "## Validation during the run", "", *_metric_table(history, step)]
    elif evaluation:
        lines += ["", "## Validation at the exported update", ""]
        lines += [
            f"- {k}: {v:.3f}" if isinstance(v, float) else f"- {k}: {v}"
            for k, v in evaluation.items()
        ]
    if report:
        lines += ["", REPORT_HEADING, "", report]
    if changed:
        lines += ["", "## Settings changed at export", ""]
        lines += [f"- `{k}`: {_value(a)} -> {_value(b)}" for k, (a, b) in changed.items()]
    if notes.strip():
        lines += ["", notes.strip()]
    return "\n".join(lines) + "\n"


def export(
    src: Path,
    out: Path,
    chosen: str = BEST_DIR,
    settings: Sequence[str] = (),
    base_model: str | None = None,
    dtype: str = "fp16",
    notes: str = "",
) -> Path:
    """Write ``out`` from run folder (or exported checkpoint) ``src``; see the module docstring."""
    checkpoint, record, report = read_record(src, chosen)
    model = load_over_base(checkpoint, base_model) if base_model else load_model(str(checkpoint))
    changed = apply_settings(model, settings)
    record = strip_machine_paths({**record, **model.config.extra})
    model.config.extra = record
    save_pretrained(
        model,
        out,
        card_notes=card_notes(record, report, changed, notes),
        weights_dtype=DTYPES[dtype],
    )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m qrag_training.export",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "src", type=Path, help="a qrag-train run folder, or a checkpoint exported before"
    )
    p.add_argument("out", type=Path, help="the checkpoint folder to write (missing or empty)")
    p.add_argument(
        "--from",
        dest="chosen",
        choices=[BEST_DIR, LAST_DIR],
        default=BEST_DIR,
        help="which checkpoint of a run folder (default: best)",
    )
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="FIELD=JSON",
        help="a QRAGConfig field of the saved model, e.g. lexical_depth=10 (repeatable)",
    )
    p.add_argument(
        "--base-model",
        default=None,
        help="load the trained layers over this base encoder (a partial checkpoint trained over "
        "another copy of it, e.g. packaged:all-MiniLM-L6-v2)",
    )
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp16", help="stored weights")
    p.add_argument("--notes", type=Path, default=None, help="Markdown appended to the card")
    args = p.parse_args(argv)
    out = export(
        args.src,
        args.out,
        args.chosen,
        args.settings,
        args.base_model,
        args.dtype,
        args.notes.read_text(encoding="utf-8") if args.notes else "",
    )
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {out} ({size / 2**20:.1f} MiB; card {out / CARD_FILE})")
    base = read_manifest(out)["config"]["base_model"]
    if _is_machine_path("base_model", base):
        print(f"note: it loads over {base}, a folder of this machine (--base-model names another)")


if __name__ == "__main__":
    main()
