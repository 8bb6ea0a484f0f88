"""``qrag-train``: train a Q-RAG retriever (Hydra config in ``conf/``; the loop is
:class:`~qrag_training.trainer.Trainer`'s).

``qrag-train preset=hotpotqa_cpu out_dir=runs/x`` composes ``conf/train.yaml`` with the
overrides, checks them (a misspelled key or bad value ends in one line, exit status 2, with the
closest valid names) and runs the loop; ``torchrun --nproc_per_node N -m qrag_training.train ...``
runs it data-parallel. Ctrl-C or SIGTERM saves ``out_dir/last`` and ends in one line, exit status
128 + the signal (:mod:`qrag_training.interrupts`).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from qrag_integrations.cli_errors import fail, one_line_errors
from qrag_training.distributed import context_from_env, shutdown
from qrag_training.evaluate import CLI_INPUT_ERRORS
from qrag_training.interrupts import Interrupted, StopRequests
from qrag_training.overrides import explain_overrides
from qrag_training.trainer import Trainer

#: Loggers of other libraries whose INFO lines say nothing to a user of the command (faiss: which
#: CPU build it loaded, eight lines; bm25s: one "Building index" per question of the report).
QUIET_LOGGERS = ("faiss", "bm25s")


def run(cfg: DictConfig, prog: str | None = None) -> dict[str, Any]:
    """Train from a composed config (what ``qrag-train`` does after Hydra parsed the CLI).

    With ``prog``, bad settings found while the run is set up (a missing ``init_from``, an
    inconsistent value, a corpus that cannot train) end in one line and exit status 2; errors
    during training keep their traceback. A stop signal (Ctrl-C, SIGTERM) ends in one line and
    exit status 128 + its number (without ``prog``: :class:`Interrupted` is raised)."""
    import transformers

    transformers.utils.logging.disable_progress_bar()  # no per-save "Writing shards" bars
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    stops = StopRequests()
    try:
        with stops:  # from here a signal stops the run in one line, the set-up included
            try:
                with one_line_errors(prog) if prog else contextlib.nullcontext():
                    trainer = Trainer(cfg, stops=stops)
            except Interrupted as stop:
                raise Interrupted(stop.signum, f"{stop} while the run was set up: nothing saved")
            return trainer.train()
    except Interrupted as stop:
        if prog is None:
            raise
        if context_from_env().is_main:
            print(f"{prog}: {stop}", file=sys.stderr, flush=True)
        raise SystemExit(stop.exit_status) from None
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
    from hydra.errors import HydraException

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        try:
            compose(config_name="train", overrides=list(overrides))
        except (HydraException, *CLI_INPUT_ERRORS) as err:  # also a syntax error
            fail(PROG, explain_overrides(overrides, CONF_DIR, "train") or str(err))


def main() -> None:
    """Entry point of ``qrag-train``: Hydra's command line (``key=value`` overrides)."""
    try:
        check_overrides(sys.argv[1:])
        _hydra_main()
    except KeyboardInterrupt:  # before the run installed its own handling: nothing to save
        print(
            f"{PROG}: interrupted (SIGINT) before the run started: nothing saved", file=sys.stderr
        )
        raise SystemExit(128 + signal.SIGINT) from None


if __name__ == "__main__":
    main()
