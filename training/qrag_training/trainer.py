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
(TensorBoard), ``metrics.jsonl`` (appended to, never rewritten). ``resume=true`` continues from
``out_dir/last``, its step, time budget and metrics. SIGINT / SIGTERM stop the loop at the end of
the update under way (an evaluation under way is dropped), save ``out_dir/last`` and raise
:class:`~qrag_training.interrupts.Interrupted` (:mod:`qrag_training.interrupts`).

Under ``torchrun --nproc_per_node N`` (``WORLD_SIZE > 1``) the same loop runs data-parallel
(:mod:`qrag_training.distributed`): per-rank batches, averaged gradients, rank 0 alone evaluates
and writes. A checkpoint holds rank 0's RNGs; resuming with another number of ranks works (ranks
> 0 re-seed from the step and their rank).
"""

from __future__ import annotations

import logging
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from qrag_integrations.core.digests import collect_undigested, warn_undigested
from qrag_training.baselines import distinct_text_embedder, greedy_retrieve
from qrag_training.console import RunPlan, expected_updates, start_summary
from qrag_training.data.episode import Episode
from qrag_training.distributed import (
    context_from_env,
    init_distributed,
    quiet_other_ranks,
    rank_device,
    rank_seed,
    reduce_record,
)
from qrag_training.env import EpisodeStream, RetrievalEnv, VectorEnv
from qrag_training.interrupts import Interrupted, StopRequests, signal_name
from qrag_training.metrics import summarize
from qrag_training.next_hop import NextHopLearner
from qrag_training.pqn import PQNAgent
from qrag_training.report import write_run_report
from qrag_training.run_folder import (
    LAST_DIR,
    METRICS_FILE,
    TB_DIR,
    append_metrics,
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
    corpus_split,
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
    """Builds everything from a composed config and runs the training loop.

    ``stops``: the stop requests the loop polls (:mod:`qrag_training.interrupts`; ``qrag-train``
    passes the ones it installed before the set-up); by default its own, installed by
    :meth:`train`."""

    def __init__(self, cfg: DictConfig, stops: StopRequests | None = None) -> None:
        self.cfg = cfg
        self.run = run = run_config_from(cfg)
        self.stops = stops or StopRequests()
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
        last = self.out_dir / LAST_DIR
        self.resuming = run.resume and has_train_state(last)
        if run.resume and not self.resuming and ctx.is_main:
            kept = (self.out_dir / METRICS_FILE).is_file()
            logger.warning(
                "resume=true but %s has no training state: starting at update 0%s",
                last,
                f" ({METRICS_FILE} keeps the earlier lines)" if kept else "",
            )
        # the data before the model: a corpus that cannot train is refused before the wait for
        # the model (the loaders draw on no global RNG; the seeding below comes after them)
        self.feedback = feedback_from(cfg)
        needs = feedback_needs(self.feedback)
        self._first_pool: list[Episode] | None = None
        if not (run.refresh_pool and self.resuming):  # a pool generated anew every pass: later
            self._first_pool = load_episodes(cfg, run, "train", **needs)
        train_questions = len(self._first_pool) if self._first_pool is not None else None
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
        self.device = torch.device(device)
        seed_everything(run.seed)  # the same on every rank: the model is built identically
        self.config_yaml = OmegaConf.to_yaml(cfg, resolve=True)

        start_from = str(last) if self.resuming else run.init_from
        if start_from:
            logger.info("%s from %s", "resuming" if self.resuming else "starting", start_from)
        # the training state first (its digests checked: a damaged one is refused before the
        # model loads); a folder saved by an older version, without digests, warns once
        with collect_undigested() as undigested:
            saved_state = load_train_state(last, self.device) if self.resuming else None
            model = build_run_model(
                model_config_from(cfg),
                start_from,
                self.resuming,
                self.device,
                run.keep_init_settings,
            )
        if undigested:  # one warning, for the folder the run starts from
            if self.resuming:
                warn_undigested(last, fix="the run's next save of it adds them")
            else:
                warn_undigested(undigested[0])
        model.config.extra = {"trainer": "qrag_training", "train_config": to_container(cfg)}
        ctx.broadcast_module(model)  # identical weights on every rank before targets are copied
        self.model = model.eval()
        seed = rank_seed(run.seed, ctx.rank)

        def load_pool(pool_pass: int) -> list[Episode]:
            if pool_pass == 0 and self._first_pool is not None:
                pool, self._first_pool = self._first_pool, None
                return pool
            return load_episodes(cfg, run, "train", pool_pass=pool_pass, **needs)

        self.stream = EpisodeStream(
            load_pool,
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
                start = build_run_model(
                    model_config_from(cfg),
                    run.init_from,
                    False,
                    self.device,
                    run.keep_init_settings,
                )
            self.agent = NextHopLearner(model, hop, seed=seed, dist=ctx, start=start)
        else:
            self.agent = PQNAgent(model, pqn_config_from(cfg, run), seed=seed, dist=ctx)
            settings = env_settings_from(run, model.config)
            envs = [
                RetrievalEnv(settings, self.feedback, model.state_text)
                for _ in range(run.envs_parallel)
            ]
            self.venv = VectorEnv(envs, self.stream, self.agent, self.device)
        self.best_metric = -math.inf
        self.last_eval: dict[str, float] = {}
        self.train_seconds = 0.0
        """Seconds of training so far (in every process of a resumed run): the time budget's."""

        if saved_state is not None:
            state, tensors, optimizer_state = saved_state
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
            self.train_seconds = float(state.get("train_seconds", 0.0))
            if ctx.is_main:
                set_rng_state(state["rng"], tensors)
            else:  # the checkpoint holds rank 0's RNGs only
                seed = rank_seed(run.seed, ctx.rank, self.agent.updates)
                seed_everything(seed)
                self.agent.rng = np.random.default_rng(seed)
        elif not ctx.is_main:
            seed_everything(seed)  # dropout differs between ranks, like their data
        self.writer: Any = None
        if ctx.is_main:
            plan = RunPlan(
                run=run,
                learner=algo_kind(cfg),
                device=str(self.device),
                threads=torch.get_num_threads(),
                data=str(cfg.env.name),
                train_questions=train_questions,
                eval_questions=len(self.eval_episodes),
                eval_split=cfg.env.get("eval_hash_split"),
                report_split=cfg.env.get("report_hash_split"),
                split=corpus_split(cfg),
                resumed_at=self.agent.updates if self.resuming else None,
            )
            for line in start_summary(plan):
                logger.info("%s", line)
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(
                str(self.out_dir / TB_DIR),
                purge_step=self.agent.updates + 1 if self.resuming else 0,
            )

    # -- helpers --------------------------------------------------------------------------------
    def _log(self, record: dict[str, Any]) -> None:
        append_metrics(self.out_dir / METRICS_FILE, record)
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
                    "train_seconds": round(self.train_seconds, 3),
                    "rng": rng_json,
                    "world_size": self.dist.world_size,
                },
                "tensors": {**self.agent.target_tensors(), **rng_tensors},
                "optimizer_state": self.agent.optimizer.state_dict(),
            }
        save_run_checkpoint(self.out_dir / name, self.model, self.config_yaml, notes, **kwargs)

    def _eval_and_save(self, record: dict[str, Any]) -> None:
        """Evaluate, add the results to ``record`` and save ``best`` if they are the best; a
        stop signal during the evaluation drops it (``record`` stays without results)."""
        started = time.perf_counter()
        try:
            with self.stops.abortable():
                evaluation = self.evaluate()
        except Interrupted as err:
            if err.again:
                raise
            return
        self.last_eval = evaluation
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

    # -- stopping -------------------------------------------------------------------------------
    def _stop_requested(self) -> bool:
        """Whether a stop signal arrived (on any rank: every rank stops at the same update)."""
        stop = self.stops.requested
        return self.dist.any(stop) if self.dist.enabled else stop

    def _save_last(self) -> None:
        """Rank 0 writes ``out_dir/last`` with the training state while the others wait."""
        self.dist.barrier()
        if self.dist.is_main:
            self.save(LAST_DIR, with_state=True)
        self.dist.barrier()

    def _interrupted(self, saved: bool = True) -> Interrupted:
        """The one line a stopped run ends with."""
        signum = self.stops.signum or signal.SIGTERM  # a rank told by another rank
        u, total = self.agent.updates, self.run.steps
        where = f"at update {u} of {total}: saved {self.out_dir / LAST_DIR}"
        if not saved:
            where = (
                f"during the end-of-run report: {self.out_dir / LAST_DIR} and "
                f"{self.out_dir / 'best'} are saved (update {u} of {total}); resume=true writes the "
                "report"
            )
            return Interrupted(signum, f"interrupted ({signal_name(signum)}) {where}")
        return Interrupted(
            signum,
            f"interrupted ({signal_name(signum)}) {where}; continue with the same command and "
            "resume=true",
        )

    # -- loop -----------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Run until ``steps`` optimiser updates (or ``time_budget_minutes``); returns the last
        record.

        Raises:
            Interrupted: SIGINT / SIGTERM stopped the run; ``out_dir/last`` holds the update it
                stopped at (:mod:`qrag_training.interrupts`).
        """
        with self.stops, self.stops.deferred():
            record = self._loop()
            if self.run.final_report and self.dist.is_main:
                try:
                    with self.stops.abortable():
                        self._final_report()
                except Interrupted as err:
                    if err.again:
                        raise
                    raise self._interrupted(saved=False) from None
        return record

    def _loop(self) -> dict[str, Any]:
        run, agent, ctx = self.run, self.agent, self.dist
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
        if agent.updates == 0 and run.eval_at_start and total > 0:
            if ctx.is_main:
                self._eval_and_save(record)
                if len(record) > 1:  # not dropped by a stop signal
                    self._log(record)
            ctx.barrier()
        if self._stop_requested():  # during that evaluation, or the set-up
            self._save_last()
            raise self._interrupted()
        start_updates, start_seconds = agent.updates, self.train_seconds
        bar = tqdm(
            total=total,
            initial=agent.updates,
            desc="qrag-train",
            unit="upd",
            disable=not ctx.is_main,
            mininterval=1.0 if sys.stderr.isatty() else 30.0,
            dynamic_ncols=True,
            smoothing=0.0,  # the mean pace, as expected_updates reads it
        )
        started = time.perf_counter() - start_seconds  # a resumed run continues its budget
        budget_s = run.time_budget_minutes * 60 if run.time_budget_minutes else math.inf
        try:
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
                u = agent.updates
                self.train_seconds = time.perf_counter() - started
                bar.total = expected_updates(
                    u, start_updates, total, self.train_seconds, start_seconds, budget_s
                )
                bar.update(1)
                out_of_time = self.train_seconds >= budget_s
                if ctx.enabled and math.isfinite(budget_s):
                    out_of_time = ctx.any(out_of_time)  # every rank stops at the same update
                stop = self._stop_requested()
                due_eval = (u % run.eval_interval == 0 or u == total or out_of_time) and not stop
                due_save = u % run.save_interval == 0 or u == total or out_of_time or stop
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
                    "seconds": round(self.train_seconds, 1),
                }
                record.update({k: float(np.mean(v)) for k, v in window.items() if v})
                feedback_stats = getattr(self.feedback, "stats", None)
                if callable(feedback_stats):  # e.g. the LLM reward's reader calls and cache hits
                    record.update({f"feedback/{k}": v for k, v in feedback_stats().items()})
                if ctx.enabled:
                    record.update(reduce_record(self.dist, returns, solved, window))
                if due_eval and ctx.is_main:
                    self._eval_and_save(record)
                if due_eval:  # a signal during the evaluation (which it dropped) stops here
                    stop = self._stop_requested()
                    due_save = due_save or stop
                # Logged before `last` is saved: a run killed in between resumes from the previous
                # `last` and logs this row again (read_metrics keeps the later one); the other
                # order would lose it.
                if ctx.is_main:
                    self._log(record)
                if due_save:
                    self._save_last()
                elif due_eval:
                    ctx.barrier()  # the others wait here while rank 0 evaluates
                bar.set_postfix_str(self._summary(record), refresh=False)
                logger.info("step %d %s", u, self._summary(record))
                if stop:
                    raise self._interrupted()
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
        finally:
            bar.close()
            if self.writer is not None:
                self.writer.close()
        return record
