"""``qa1_misses`` of the default searched with its positions stretched: ``relative_step`` STEP
instead of the trained 20 (``python qa1_stretch.py STEP``, from the repository root with
``PYTHONPATH=training:.``)."""

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "qa1_misses", Path(__file__).with_name("qa1_misses.py")
)
qa1_misses = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(qa1_misses)
_load = qa1_misses.load_with_settings


def stretched(spec):
    model, settings = _load(spec)
    model.config.relative_step = int(sys.argv[1])
    return model, settings


qa1_misses.load_with_settings = stretched
print(sys.argv[1], qa1_misses.misses("packaged:qrag-general-minilm"))
