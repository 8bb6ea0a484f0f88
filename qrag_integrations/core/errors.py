"""Exceptions the package raises on bad input, each naming the problem."""


class QRAGError(ValueError):
    """Base class of the package's errors (a ``ValueError``: the input was wrong)."""


class CheckpointError(QRAGError):
    """A checkpoint or base encoder is missing, corrupt or does not match."""


class DamagedFileError(QRAGError):
    """A saved file is missing or does not hold what was written (its recorded xxh3 digest differs):
    damaged on disk or in transfer."""


class DamagedCheckpointError(DamagedFileError, CheckpointError):
    """A checkpoint file is missing or does not hold what was written."""


class IndexMismatchError(QRAGError):
    """A saved index does not fit the model it is loaded with (embedding size, model hash)."""


class UnknownOptionError(QRAGError, TypeError):
    """A keyword option nobody reads (a misspelling, an option of another library): refused, not
    ignored. Also a ``TypeError``, as Python raises for an unexpected keyword argument."""


def optional_import(module: str, purpose: str, extra: str) -> object:
    """Import an optional dependency, or raise a :class:`QRAGError` naming the extra to install.

    Args:
        module: the module to import, e.g. ``"openvino"``.
        purpose: what needs it, e.g. ``"backend='openvino'"``.
        extra: the package extra that installs it.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise QRAGError(
            f"{purpose} needs {module}: pip install 'qrag-integrations[{extra}]'"
        ) from exc
