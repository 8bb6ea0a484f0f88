"""The overrides of a seconds-long ``qrag-train`` run on the tiny BERT (``tiny_bert_dir``) and
bAbI qa1, shared by the tests that train one (add ``model.base_model`` and ``out_dir``)."""

TINY_RUN = [
    "model=tiny",
    "batch_size=8",
    "envs_parallel=4",
    "eval_interval=2",
    "eval_episodes=4",
    "log_interval=1",
    "torch_threads=1",
    "env.task=qa1",
    "env.target_tokens=250",
    "env.pool_size=16",
    "env.max_steps=2",
    "algo.warmup=2",
    "model.trainable_layers=1",
]
