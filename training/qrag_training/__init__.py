"""Q-RAG trainer: value-based RL (PQN) for the state and chunk encoders of :mod:`qrag_integrations`.

Modules: :mod:`.returns` (Q(lambda) targets), :mod:`.feedback` (rewards), :mod:`.env`
(retrieval episodes, vectorised), :mod:`.pqn` (agent), :mod:`.train` (``qrag-train``, Hydra
config in ``conf/``), :mod:`.evaluate` (``qrag-eval``, baselines), :mod:`.plot` (curves),
:mod:`.data` (data sets).
"""
