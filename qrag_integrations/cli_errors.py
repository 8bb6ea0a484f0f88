"""One-line errors for the command-line tools: bad input ends with ``PROG: error: ...`` on stderr
and exit status 2 (argparse's convention), never a traceback."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import NoReturn

from qrag_integrations.core.errors import QRAGError

#: What counts as bad input at a command line: our errors (ValueError subclasses), other
#: ValueErrors raised while checking settings, and missing or unreadable files.
INPUT_ERRORS: tuple[type[BaseException], ...] = (QRAGError, ValueError, OSError)
#: Exit status of a command that refused its input.
BAD_INPUT = 2


#: Lines of multi-line messages (OmegaConf's, Hydra's) that say nothing to a user.
_NOISE_PREFIXES = (
    "object_type=",
    "reference_type=",
    "Set the environment variable HYDRA_FULL_ERROR",
)


def one_line(message: str) -> str:
    """A message's informative lines joined into one."""
    lines = [line.strip() for line in str(message).splitlines()]
    kept = [line for line in lines if line and not line.startswith(_NOISE_PREFIXES)]
    return (
        " ".join(line if line.endswith((".", ":")) else line + ";" for line in kept).rstrip(";")
        or "bad input"
    )


def fail(prog: str, message: str) -> NoReturn:
    """Print ``PROG: error: MESSAGE`` (on one line) on stderr and exit with status 2."""
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr)
    raise SystemExit(BAD_INPUT)


@contextlib.contextmanager
def one_line_errors(
    prog: str, errors: tuple[type[BaseException], ...] = INPUT_ERRORS
) -> Iterator[None]:
    """Turn ``errors`` raised inside the block into :func:`fail` (one line, exit status 2)."""
    try:
        yield
    except errors as exc:
        fail(prog, str(exc) or type(exc).__name__)
