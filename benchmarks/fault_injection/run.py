"""Fault injection over saved retrievers: does a damaged save load silently?

Two saves of a :class:`~qrag_integrations.QRAGRetriever` over a small corpus, each with its model
in the folder: a full checkpoint (both encoders) and a partial one (top layer only, over a local
base). The model is a random 2-layer BERT (hidden 32) with the packaged MiniLM tokenizer, so a
load takes a fraction of a second; the file formats are the ones every save uses. Each trial
picks a save, a file of it (every file, uniformly) and a fault (a random single-bit flip, a
truncation to a random length, or deletion), loads the save, and restores the file. Outcomes:

- ``refused``: a :class:`~qrag_integrations.QRAGError` (its message naming the damaged file
  counted apart);
- ``same_picks``: it loaded and every question's picks (ids, texts, metadata) equal the
  undamaged save's (a byte the format does not read, e.g. the model card);
- ``silent_change``: it loaded and some picks differ (the failure this guards against);
- ``crash``: any other exception.

    python -m benchmarks.fault_injection.run --trials 1000 --out benchmarks/fault_injection/results/faults.json
    python -m benchmarks.fault_injection.run --trials 1000 --without-digests --out benchmarks/fault_injection/results/faults_without_digests.json
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.harness.results import provenance, set_threads, write_json
from qrag_integrations import QRAGError, QRAGRetriever
from qrag_integrations.core.defaults import resolve_packaged_checkpoint

FAULTS = ("bit_flip", "truncate", "delete")
QUESTIONS = ("Where is Mary?", "Who went to the kitchen?", "What did John pick up?")
PLACES = ("kitchen", "garden", "office", "hallway", "bedroom", "bathroom")
PEOPLE = ("Mary", "John", "Sandra", "Daniel")


def corpus() -> tuple[list[str], list[dict[str, Any]]]:
    """24 bAbI-like sentences in four documents, with metadata."""
    texts, metas = [], []
    for i in range(24):
        person, place = PEOPLE[i % 4], PLACES[(i * 5) % 6]
        texts.append(f"{person} went to the {place} and picked up item {i}.")
        metas.append({"doc": f"story-{i % 4}", "n": i})
    return texts, metas


def make_saves(root: Path) -> list[Path]:
    """The two saved retrievers under ``root`` (full and partial checkpoint in the folder)."""
    from transformers import BertConfig, BertModel

    base = root / "base"
    tokenizer = Path(resolve_packaged_checkpoint("packaged:qrag-babi-demo")) / "tokenizer"
    shutil.copytree(tokenizer, base)
    import torch

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    BertModel(config).save_pretrained(base)
    texts, metas = corpus()
    saves = []
    for name, layers in (("full", None), ("partial", 1)):
        from qrag_integrations import QRAGConfig, QRAGModel

        model = QRAGModel.from_base(QRAGConfig(base_model=str(base), trainable_layers=layers))
        model.save_pretrained(str(root / f"{name}_checkpoint"))
        retriever = QRAGRetriever.from_texts(
            texts, metadatas=metas, checkpoint=str(root / f"{name}_checkpoint"), k=3
        )
        retriever.save(root / name)
        saves.append(root / name)
    return saves


def strip_digests(saves: list[Path]) -> None:
    """Remove the recorded digests from every manifest of ``saves`` (a save of an older
    version), to measure what the other checks alone catch."""
    for save in saves:
        for name in ("retriever.json", "index/index.json", "model/qrag_config.json"):
            data = json.loads((save / name).read_text(encoding="utf-8"))
            data.pop("digests", None)
            (save / name).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def picks(folder: Path) -> list[list[tuple[Any, ...]]]:
    """Load the saved retriever at ``folder`` and search :data:`QUESTIONS`."""
    retriever = QRAGRetriever.load(folder)
    return [
        [(h.chunk.id, h.chunk.text, h.chunk.metadata, h.step) for h in hits]
        for hits in retriever.search(list(QUESTIONS))
    ]


def inject(file: Path, fault: str, rng: random.Random) -> str:
    """Damage ``file`` in place; return what was done."""
    data = file.read_bytes()
    if fault == "delete" or (fault != "delete" and not data):
        file.unlink()
        return "deleted"
    if fault == "bit_flip":
        at, bit = rng.randrange(len(data)), rng.randrange(8)
        file.write_bytes(data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :])
        return f"bit {bit} of byte {at}"
    size = rng.randrange(len(data))
    file.write_bytes(data[:size])
    return f"truncated to {size} of {len(data)} bytes"


def run_trials(saves: list[Path], trials: int, seed: int) -> dict[str, Any]:
    """Inject ``trials`` faults (restoring each file after its load); counts and the cases that
    were not refused by name or left the picks identical."""
    rng = random.Random(seed)
    reference = {save: picks(save) for save in saves}
    files = {save: sorted(p for p in save.rglob("*") if p.is_file()) for save in saves}
    counts: Counter[str] = Counter()
    by_file: dict[str, Counter[str]] = {}
    notable: list[dict[str, Any]] = []
    for _ in range(trials):
        save = rng.choice(saves)
        file = rng.choice(files[save])
        original = file.read_bytes()
        fault = rng.choice(FAULTS)
        what = inject(file, fault, rng)
        outcome, message = "same_picks", ""
        try:
            if picks(save) != reference[save]:
                outcome = "silent_change"
        except QRAGError as exc:
            message = str(exc)
            outcome = "refused" if file.name in message else "refused_not_naming_file"
        except Exception as exc:  # noqa: BLE001 - counted as a crash and reported below
            outcome, message = "crash", f"{type(exc).__name__}: {exc}"
        finally:
            file.write_bytes(original)
        rel = f"{save.name}/{file.relative_to(save).as_posix()}"
        counts[outcome] += 1
        by_file.setdefault(rel, Counter())[outcome] += 1
        if outcome not in ("refused", "same_picks"):
            notable.append({"file": rel, "fault": what, "outcome": outcome, "message": message})
    return {
        "counts": dict(counts),
        "by_file": {k: dict(v) for k, v in sorted(by_file.items())},
        "not_refused_by_name_nor_same": notable,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the results JSON here")
    p.add_argument(
        "--without-digests", action="store_true", help="strip the digests first (older saves)"
    )
    args = p.parse_args(argv)
    set_threads(1)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        saves = make_saves(Path(tmp))
        if args.without_digests:
            strip_digests(saves)
        result = run_trials(saves, args.trials, args.seed)
    result = {
        **provenance(argv, threads=1),
        "trials": args.trials,
        "seed": args.seed,
        "digests": not args.without_digests,
        **result,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(result["counts"], f"{result['seconds']} s")
    if args.out:
        write_json(args.out, result)


if __name__ == "__main__":
    main()
