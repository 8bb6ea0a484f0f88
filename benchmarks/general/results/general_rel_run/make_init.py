"""One-off: the shipped default's weights with a relative-position config, as a trainer init."""

import sys

from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.config import PositionMode
from qrag_integrations.core.loading import load_model

model = load_model("packaged:qrag-general-minilm")
model.config.position_mode = PositionMode.RELATIVE
model.config.lexical_depth = None
model.config.lexical_steps = None
model.config.extra = {
    "note": "gen64 (shipped default) weights, relative positions, session 33 init"
}
save_pretrained(model, sys.argv[1])
print(model.config)
