"""Q-RAG trainer for the state and chunk encoders of :mod:`qrag_integrations`.

Two learners: :mod:`.next_hop` (supervised next-hop cross-entropy; every shipped checkpoint came
from it) and :mod:`.pqn` (the paper's value-based RL, kept as an option), sharing
:mod:`.learner` (optimiser, schedule, resumable state) and the loop of :mod:`.trainer`.

Modules: :mod:`.train` (``qrag-train``, Hydra config in ``conf/``; ``conf/preset/*_gpu.yaml``
are the shipped checkpoints' recipes), :mod:`.export` (a run folder as a checkpoint to ship,
its card from the run's record), :mod:`.evaluate` (``qrag-eval``, baselines), :mod:`.returns`
(Q(lambda) targets), :mod:`.feedback` (rewards), :mod:`.env` (retrieval episodes, vectorised),
:mod:`.plot` (curves), :mod:`.data` (data sets).
"""
