"""Write the shipped HotpotQA checkpoint (fp16 partial weights + model card) from a chosen run.

    python training/tools/export_hotpotqa_checkpoint.py SRC --notes NOTES.md

SRC is a checkpoint folder (a run's ``best/``, or a rebased GPU checkpoint from
``training/tools/remote_bundle.py rebase``); NOTES.md is Markdown appended to the generated model card
(how it was trained, how it was chosen, its validation and held-out numbers). The shipped folder
``qrag_integrations/assets/hotpotqa_checkpoint`` is replaced only if it holds an earlier
checkpoint (``save_pretrained`` refuses anything else).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.loading import load_model

DEST = Path(__file__).resolve().parents[2] / "qrag_integrations" / "assets" / "hotpotqa_checkpoint"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("src", type=Path, help="checkpoint folder to ship")
    parser.add_argument("--notes", type=Path, required=True, help="Markdown for the model card")
    parser.add_argument("--dest", type=Path, default=DEST)
    args = parser.parse_args()
    model = load_model(str(args.src))
    save_pretrained(
        model,
        args.dest,
        card_notes=args.notes.read_text(encoding="utf-8"),
        weights_dtype=torch.float16,
    )
    size = sum(f.stat().st_size for f in args.dest.rglob("*") if f.is_file())
    print(f"wrote {args.dest} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
