"""Weight average ("soup") of the shipped default and CPU round 17's candidate (session 55).

CPU round 17 continued the default for 207 updates; held out it tied the default with qa1 up and
qa3 down. Averaging a fine-tuned model with its start (WiSE-FT) often keeps the gains of both;
this writes the average at ``--alpha`` (the candidate's share) as an fp16 checkpoint with the
default's config (its search settings), for ``benchmarks.general.run``.

    PYTHONPATH=training:. python benchmarks/general/results/explore_soup/soup.py --alpha 0.5 --out DIR
"""

from __future__ import annotations

import argparse

import torch

from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.loading import load_model

CANDIDATE = "benchmarks/general/results/round17_cpu/r17cpu_fp16"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.5, help="the candidate's share, 0-1")
    parser.add_argument("--out", required=True, help="new checkpoint folder")
    args = parser.parse_args()
    if not 0.0 <= args.alpha <= 1.0:
        raise SystemExit(f"--alpha must lie in [0, 1], got {args.alpha}")
    default = load_model("packaged:qrag-general-minilm")
    candidate = load_model(CANDIDATE)
    theirs = candidate.state_dict()
    mixed = {
        name: (1.0 - args.alpha) * value + args.alpha * theirs[name]
        if value.is_floating_point()
        else value
        for name, value in default.state_dict().items()
    }
    default.load_state_dict(mixed)
    notes = f"## Soup\n\n{1 - args.alpha:g} x the default + {args.alpha:g} x `{CANDIDATE}` (exploration).\n"
    save_pretrained(default, args.out, card_notes=notes, weights_dtype=torch.float16)


if __name__ == "__main__":
    main()
