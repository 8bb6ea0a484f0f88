"""One-off: the shipped default's weights as a trainer init (no lexical fusion in the config)."""

import sys

from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.loading import load_model

model = load_model("packaged:qrag-general-minilm")
model.config.lexical_depth = None
model.config.lexical_steps = None
model.config.extra = {
    "note": "gen64 (shipped default) weights, session 34 init (question weight 1 run)"
}
save_pretrained(model, sys.argv[1])
print(model.config)
