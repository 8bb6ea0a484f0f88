"""``qrag-train``: train a Q-RAG retriever (Hydra config in ``conf/``; the loop is
:class:`~qrag_training.trainer.Trainer`'s).

``qrag-train preset=hotpotqa_cpu out_dir=runs/x`` composes ``conf/train.yaml`` with the
overrides, checks them (a misspelled key or bad value ends in one line, exit status 2) and runs
the loop; ``torchrun --nproc_per_node N -m qrag_training.train ...`` runs it data-parallel.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from qrag_integrations.cli_errors import one_line_errors
from qrag_training.distributed import context_from_env, shutdown
from qrag_training.evaluate import CLI_INPUT_ERRORS
from qrag_training.trainer import Trainer


def run(cfg: DictConfig, prog: str | None = None) -> dict[str, Any]:
    """Train from a composed config (what ``qrag-train`` does after Hydra parsed the CLI).

    With ``prog``, bad settings found while the run is set up (a missing ``init_from``, an
    inconsistent value) end in one line and exit status 2; errors during training keep their
    traceback."""
    import transformers

    transformers.utils.logging.disable_progress_bar()  # no per-save "Writing shards" bars
    # the end-of-run BM25 baseline builds one index per question: one "Building index" line each
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    try:
        with one_line_errors(prog) if prog else contextlib.nullcontext():
            trainer = Trainer(cfg)
        return trainer.train()
    finally:
        shutdown(context_from_env())


#: The Hydra config tree (an absolute path, so the console script and ``python -m`` both find it).
CONF_DIR = str(Path(__file__).resolve().parent / "conf")


PROG = "qrag-train"


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
def _hydra_main(cfg: DictConfig) -> None:
    run(cfg, prog=PROG)


def check_overrides(overrides: Sequence[str]) -> None:
    """Compose the config with ``overrides`` first, so a misspelled key or a bad value ends in one
    line (exit status 2) instead of Hydra's multi-line report. Hydra's own flags (``--cfg``,
    ``-m``, ``--help``, ...) skip the check and go to Hydra as they are."""
    if any(arg.startswith("-") for arg in overrides):
        return
    from hydra import compose, initialize_config_dir

    with (
        one_line_errors(PROG, CLI_INPUT_ERRORS),
        initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"),
    ):
        compose(config_name="train", overrides=list(overrides))


def main() -> None:
    """Entry point of ``qrag-train``: Hydra's command line (``key=value`` overrides)."""
    check_overrides(sys.argv[1:])
    _hydra_main()


if __name__ == "__main__":
    main()
