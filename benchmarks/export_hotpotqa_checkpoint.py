"""Write the shipped HotpotQA checkpoint (fp16 partial weights, model card notes) from the run's best
checkpoint: python benchmarks/export_hotpotqa_checkpoint.py (reads runs/hotpotqa-nexthop/best)."""

import torch
from qrag_integrations.checkpoint import load_model, save_pretrained
m = load_model("runs/hotpotqa-nexthop/best")
notes = """## Training

HotpotQA distractor questions of the training buckets 1-4 (`qrag_training.data.splits`), 200 updates of
the supervised next-hop warm start (`algo=next_hop`, our addition to the paper),
`preset=hotpotqa_cpu`, on 2 CPU cores (about 43 minutes; the README's Training section). Selected on the validation slice (train side,
263 questions): fact EM 0.646 / fact F1 0.808 after 2 steps, 10 paragraphs per question.
Held-out results (bucket 0) and the bAbI-style comparison: benchmarks/README.md, section "HotpotQA". Load it with `checkpoint="packaged:qrag-hotpotqa-minilm"`.
"""
save_pretrained(m, "qrag_integrations/assets/hotpotqa_checkpoint", card_notes=notes, weights_dtype=torch.float16)
