"""Weight-space ensembles of the default (WiSE-FT, Wortsman et al., CVPR 2022): its trained layers
mixed with the base MiniLM's, ``alpha * trained + (1 - alpha) * base``, nothing else changed. An
exploration that did not ship (docs/decisions.md, 2026-12-05); the mixes are searched by
``benchmarks.general.run --model wNN=FOLDER``.

    python -m benchmarks.general.wise_mix --out runs/wise 0.3 0.5 0.7
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from qrag_integrations import load_model
from qrag_integrations.core.model import QRAGModel

DEFAULT = "packaged:qrag-general-minilm"


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("alphas", type=float, nargs="+", help="weight of the trained layers, 0-1")
    p.add_argument("--out", type=Path, required=True, help="one folder a0.5, ... per alpha")
    args = p.parse_args(argv)
    trained = load_model(DEFAULT).trained_state_dict()
    base = QRAGModel.from_base(load_model(DEFAULT).config).state_dict()
    for alpha in args.alphas:
        if not 0.0 <= alpha <= 1.0:
            p.error(f"alpha {alpha} is outside 0-1")
        model = load_model(DEFAULT)
        mixed = {k: alpha * v + (1 - alpha) * base[k] for k, v in trained.items()}
        model.load_state_dict(mixed, strict=False)
        model.save_pretrained(str(args.out / f"a{alpha:g}"), overwrite=True)
        print(f"alpha {alpha:g}: {args.out / f'a{alpha:g}'}", flush=True)


if __name__ == "__main__":
    main()
