"""The training loop of ``qrag-train`` (:class:`Trainer`; the command is :mod:`qrag_training.train`).

Two learners share the loop, chosen by ``algo.kind``:

* ``next_hop`` (:class:`~qrag_training.next_hop.NextHopLearner`, ``algo=next_hop`` and every
  ``preset=*`` that names it): a supervised cross-entropy over the chunks not yet picked, with the
  supporting ones as positives. **Every shipped checkpoint came from this learner** (the general
  default, the HotpotQA checkpoint and the BabiLong demo: ``algo.kind = next_hop`` in the
  ``train_config`` of each one's ``qrag_config.json``; their recipes are ``preset=general_gpu``,
  ``preset=hotpotqa_gpu`` and ``preset=babi_gpu``).
* ``pqn`` (:class:`~qrag_training.pqn.PQNAgent`, the default ``algo=pqn``): the paper's value-based
  loop, kept as an option (and to continue a next-hop checkpoint with ``init_from``)::

      rollout = agent.collect(venv, batch_size / envs_parallel)   # soft-greedy, no grad
      agent.learn(rollout)                                         # Q(lambda) targets, twin loss

Either way, until ``steps`` optimiser updates (or ``time_budget_minutes``)::

    stats = learner.step(stream)  or  agent.learn(agent.collect(...))
    every log_interval:  metrics.jsonl + TensorBoard + progress bar
    every eval_interval: held-out fact EM / F1, out_dir/best (if better), out_dir/last

Run folder (``out_dir``): ``last/`` (checkpoint + ``train_state/``), ``best/``, ``tb/``
(TensorBoard), ``metrics.jsonl``. ``resume=true`` continues from ``out_dir/last``.

Under ``torchrun --nproc_per_node N`` (``WORLD_SIZE > 1``) the same loop runs data-parallel
(:mod:`qrag_training.distributed`): per-rank batches, averaged gradients, rank 0 alone evaluates
and writes. A checkpoint holds rank 0's RNGs; resuming with another number of ranks works (ranks
> 0 re-seed from the step and their rank).
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from qrag_integrations.core.atomic import write_text_atomic
from qrag_training.baselines import distinct_text_embedder, greedy_retrieve
from qrag_training.distributed import (
    context_from_env,
    init_distributed,
    quiet_other_ranks,
    rank_device,
    rank_seed,
    reduce_record,
)
from qrag_training.env import EpisodeStream, RetrievalEnv, VectorEnv
from qrag_training.metrics import summarize
from qrag_training.next_hop import NextHopLearner
from qrag_training.pqn import PQNAgent
from qrag_training.report import write_run_report
from qrag_training.run_folder import (
    METRICS_FILE,
    TB_DIR,
    has_train_state,
    load_train_state,
    prepare_run_dir,
    rng_state,
    save_run_checkpoint,
    set_rng_state,
)
from qrag_training.run_model import build_run_model, seed_everything
from qrag_training.settings import (
    algo_kind,
    env_settings_from,
    feedback_from,
    feedback_needs,
    load_episodes,
    model_config_from,
    next_hop_config_from,
    pqn_config_from,
    run_config_from,
    to_container,
)

logger = logging.getLogger("qrag_training.train")


class Trainer:
    """Builds everything from a composed config and runs the training loop."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.run = run = run_config_from(cfg)
        self.dist = ctx = context_from_env()
        device = rank_device(run.device, ctx)
        quiet_other_ranks(ctx)
        init_distributed(ctx, device, run.dist_backend, run.dist_timeout_minutes)
        # rank 0's folder (a `${now:...}` out_dir may resolve to another second on other ranks)
        self.out_dir = Path(ctx.broadcast_object(run.out_dir))
        if ctx.is_main:
            prepare_run_dir(self.out_dir, resume=run.resume, overwrite=run.overwrite)
        ctx.barrier()
        if run.torch_threads:
            torch.set_num_threads(run.torch_threads)
        self.device = torch.device(device)
        seed_everything(run.seed)  # the same on every rank: the model is built identically
        self.config_yaml = OmegaConf.to_yaml(cfg, resolve=True)

        last = self.out_dir / "last"
        self.resuming = run.resume and has_train_state(last)
        if run.resume and not self.resuming and ctx.is_main:
            logger.warning("resume=true but %s has no training state: starting a new run", last)
            self._trim_metrics(-1)  # rows of a run killed before its first save
        start_from = str(last) if self.resuming else run.init_from
        if start_from:
            logger.info("%s from %s", "resuming" if self.resuming else "starting", start_from)
        model = build_run_model(model_config_from(cfg), start_from, self.resuming, self.device)
        model.config.extra = {"trainer": "qrag_training", "train_config": to_container(cfg)}
        ctx.broadcast_module(model)  # identical weights on every rank before targets are copied
        self.model = model.eval()
        seed = rank_seed(run.seed, ctx.rank)

        self.feedback = feedback_from(cfg)
        needs = feedback_needs(self.feedback)
        self.stream = EpisodeStream(
            lambda p: load_episodes(cfg, run, "train", pool_pass=p, **needs),
            seed=run.seed,
            refresh=run.refresh_pool,
            rank=ctx.rank,
            world_size=ctx.world_size,
        )
        self.venv: VectorEnv | None = None
        self.agent: PQNAgent | NextHopLearner
        if algo_kind(cfg) == "next_hop":
            hop = next_hop_config_from(cfg, run)
            start = None  # a resumed run's init teacher is still the weights it started from
            if self.resuming and hop.distills_toward_start:
                start = build_run_model(model_config_from(cfg), run.init_from, False, self.device)
            self.agent = NextHopLearner(model, hop, seed=seed, dist=ctx, start=start)
        else:
            self.agent = PQNAgent(model, pqn_config_from(cfg, run), seed=seed, dist=ctx)
            settings = env_settings_from(run, model.config)
            envs = [
                RetrievalEnv(settings, self.feedback, model.state_text)
                for _ in range(run.envs_parallel)
            ]
            self.venv = VectorEnv(envs, self.stream, self.agent, self.device)
        self.eval_episodes = load_episodes(cfg, run, "eval", **needs) if ctx.is_main else []
        if (
            ctx.is_main
            and run.checkpoint_metric.startswith("fact_")
            and not any(e.support for e in self.eval_episodes)
        ):
            raise ValueError(
                f"checkpoint_metric={run.checkpoint_metric} needs supporting facts in the held-out "
                "episodes and they have none: use checkpoint_metric=reward (the answer reward)"
            )
        self.best_metric = -math.inf
        self.last_eval: dict[str, float] = {}

        if self.resuming:
            state, tensors, optimizer_state = load_train_state(last, self.device)
            self.agent.optimizer.load_state_dict(optimizer_state)
            self.agent.load_scalars(state["agent"])
            self.agent.load_target_tensors(
                {k: v for k, v in tensors.items() if k.startswith("target_")}
            )
            self.stream.load_state_dict(state["stream"])
            self.best_metric = (
                float(state["best_metric"]) if state["best_metric"] is not None else -math.inf
            )
            self.last_eval = state.get("last_eval", {})
            if ctx.is_main:
                set_rng_state(state["rng"], tensors)
                self._trim_metrics(self.agent.updates)
            else:  # the checkpoint holds rank 0's RNGs only
                seed = rank_seed(run.seed, ctx.rank, self.agent.updates)
                seed_everything(seed)
                self.agent.rng = np.random.default_rng(seed)
        elif not ctx.is_main:
            seed_everything(seed)  # dropout differs between ranks, like their data
        self.writer: Any = None
        if ctx.is_main:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(
                str(self.out_dir / TB_DIR),
                purge_step=self.agent.updates + 1 if self.resuming else 0,
            )

    # -- helpers --------------------------------------------------------------------------------
    def _trim_metrics(self, step: int) -> None:
        """Drop metric records written after the checkpoint a resumed run starts from (and a
        line torn by a killed process)."""
        path = self.out_dir / METRICS_FILE
        if not path.exists():
            return
        kept = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("step", 0) <= step:
                kept.append(line)
        write_text_atomic(path, "".join(line + "\n" for line in kept))

    def _log(self, record: dict[str, Any]) -> None:
        with open(self.out_dir / METRICS_FILE, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        step = int(record["step"])
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)) and math.isfinite(value):
                self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def evaluate(self) -> dict[str, float]:
        """Greedy retrieval on the held-out episodes: fact EM / F1, mean steps, reward."""
        results = greedy_retrieve(
            self.model,
            self.eval_episodes,
            steps=self.run.max_steps,
            batch_size=self.run.eval_batch,
            embed=distinct_text_embedder(self.model, self.agent.config.embed_batch_size),
        )
        return summarize(self.eval_episodes, results, self.feedback)

    def save(self, name: str, with_state: bool) -> None:
        """Write ``out_dir/<name>`` (``last`` carries the training state)."""
        self.model.config.extra["step"] = self.agent.updates
        self.model.config.extra["eval"] = self.last_eval
        notes = ""
        if self.last_eval:
            notes = "## Held-out evaluation\n\n" + "\n".join(
                f"- {k}: {v:.4f}" if isinstance(v, float) else f"- {k}: {v}"
                for k, v in self.last_eval.items()
            )
        kwargs: dict[str, Any] = {}
        if with_state:
            rng_json, rng_tensors = rng_state()
            kwargs = {
                "state": {
                    "agent": self.agent.scalars(),
                    "stream": self.stream.state_dict(),
                    "best_metric": self.best_metric if math.isfinite(self.best_metric) else None,
                    "last_eval": self.last_eval,
                    "rng": rng_json,
                    "world_size": self.dist.world_size,
                },
                "tensors": {**self.agent.target_tensors(), **rng_tensors},
                "optimizer_state": self.agent.optimizer.state_dict(),
            }
        save_run_checkpoint(self.out_dir / name, self.model, self.config_yaml, notes, **kwargs)

    def _eval_and_save(self, record: dict[str, Any]) -> None:
        started = time.perf_counter()
        self.last_eval = self.evaluate()
        record.update({f"eval/{k}": v for k, v in self.last_eval.items()})
        record["eval/seconds"] = round(time.perf_counter() - started, 2)
        metric = float(self.last_eval[self.run.checkpoint_metric])
        if metric > self.best_metric:
            self.best_metric = metric
            self.save("best", with_state=False)

    def _final_report(self) -> None:
        """The comparison with the baselines, on ``env.report_hash_split`` when the env names a
        split other than the one that chose the checkpoint (else on those same episodes)."""
        env, run = self.cfg.env, self.run
        split = env.get("report_hash_split")
        same = not split or split == env.get("eval_hash_split")
        episodes = (
            self.eval_episodes
            if same
            else load_episodes(
                self.cfg,
                run,
                "eval",
                needs_support=False,
                hash_split=split,
                limit=run.report_episodes,
            )
        )
        chosen_by = f"best {run.checkpoint_metric} on these questions" if same else None
        write_run_report(
            self.out_dir,
            self.cfg,
            episodes,
            run.max_steps,
            run.eval_batch,
            str(self.device),
            chosen_by=chosen_by,
        )

    def _summary(self, record: dict[str, Any]) -> str:
        def fmt(key: str, value: Any, digits: int = 3) -> str:
            return f"{key} {value:.{digits}f}" if isinstance(value, float) else f"{key} -"

        parts = [
            fmt("reward", record.get("reward")),
            fmt("success", record.get("success")),
            fmt("loss", record.get("loss"), 4),
        ]
        em = record.get("eval/fact_em", self.last_eval.get("fact_em"))
        f1 = record.get("eval/fact_f1", self.last_eval.get("fact_f1"))
        parts += [fmt("eval_em", em), fmt("eval_f1", f1)]
        return ", ".join(parts)

    # -- loop -----------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Run until ``steps`` optimiser updates; returns the last record."""
        run, agent = self.run, self.agent
        total = run.steps
        if self.venv is not None:
            self.venv.reset()
        window: dict[str, list[float]] = {
            "loss": [],
            "q_mean": [],
            "target_mean": [],
            "grad_norm": [],
            "hop_accuracy": [],
            "hop_loss": [],
            "distill_loss": [],
        }
        returns: list[float] = []
        solved: list[bool] = []
        record: dict[str, Any] = {"step": agent.updates}
        ctx = self.dist
        if agent.updates == 0 and run.eval_at_start and total > 0:
            if ctx.is_main:
                self._eval_and_save(record)
                self._log(record)
            ctx.barrier()
        bar = tqdm(
            total=total,
            initial=agent.updates,
            desc="qrag-train",
            unit="upd",
            disable=not ctx.is_main,
            mininterval=1.0 if sys.stderr.isatty() else 30.0,
            dynamic_ncols=True,
        )
        started = time.perf_counter()
        budget_s = run.time_budget_minutes * 60 if run.time_budget_minutes else math.inf
        while agent.updates < total:
            if isinstance(agent, NextHopLearner):
                stats = agent.step(self.stream)
            else:
                assert self.venv is not None
                rollout = agent.collect(self.venv, run.rollout_len)
                stats = agent.learn(rollout)
                returns.extend(rollout.episode_returns)
                solved.extend(rollout.episode_solved)
            for key, values in window.items():
                if key in stats:
                    values.append(stats[key])
            if "grad_norm" not in stats:
                continue  # still accumulating gradients
            bar.update(1)
            u = agent.updates
            out_of_time = time.perf_counter() - started >= budget_s
            if ctx.enabled and math.isfinite(budget_s):
                out_of_time = ctx.any(out_of_time)  # every rank stops at the same update
            due_eval = u % run.eval_interval == 0 or u == total or out_of_time
            due_save = u % run.save_interval == 0 or u == total or out_of_time
            if u % run.log_interval and not due_eval and not due_save:
                continue
            record = {
                "step": u,
                "env_steps": agent.env_steps,
                "reward": float(np.mean(returns)) if returns else None,
                "success": float(np.mean(solved)) if solved else None,
                "episodes": len(returns),
                "lr": agent.lr,
                "alpha": agent.alpha,
                "seconds": round(time.perf_counter() - started, 1),
            }
            record.update({k: float(np.mean(v)) for k, v in window.items() if v})
            feedback_stats = getattr(self.feedback, "stats", None)
            if callable(feedback_stats):  # e.g. the LLM reward's reader calls and cache hits
                record.update({f"feedback/{k}": v for k, v in feedback_stats().items()})
            if ctx.enabled:
                record.update(reduce_record(self.dist, returns, solved, window))
            if due_eval and ctx.is_main:
                self._eval_and_save(record)
            # Logged before `last` is saved: a run killed in between resumes from the previous
            # `last`, drops this row and logs it again; the other order would lose it.
            if ctx.is_main:
                self._log(record)
            if due_save or due_eval:
                ctx.barrier()  # the others wait here while rank 0 evaluates and writes
                if due_save and ctx.is_main:
                    self.save("last", with_state=True)
                ctx.barrier()
            bar.set_postfix_str(self._summary(record), refresh=False)
            logger.info("step %d %s", u, self._summary(record))
            returns, solved = [], []
            window = {k: [] for k in window}
            if out_of_time:
                logger.info(
                    "time budget of %s minutes used at update %d of %d: stopping",
                    run.time_budget_minutes,
                    u,
                    total,
                )
                break
        bar.close()
        if self.writer is not None:
            self.writer.close()
        if run.final_report and ctx.is_main:
            self._final_report()
        return record
