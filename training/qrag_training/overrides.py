"""A bad ``key=value`` override on the ``qrag-train`` command line, explained: a setting the
config does not have, or a config-group option that does not exist, gets the closest ones that do
("did you mean", :func:`qrag_integrations.core.validation.suggestion`: difflib)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from qrag_integrations.core.validation import suggestion


def config_keys(node: Any, prefix: str = "") -> list[str]:
    """Every dotted key of a config (nested mappings; Hydra's own ``hydra`` node left out)."""
    keys = []
    items = node.items_ex(resolve=False) if isinstance(node, DictConfig) else node.items()
    for key, value in items:
        if not prefix and key == "hydra":
            continue
        path = f"{prefix}{key}"
        keys.append(path)
        if isinstance(value, (DictConfig, dict)):
            keys += config_keys(value, path + ".")
    return keys


def _did_you_mean(close: str | None) -> str:
    return f" (did you mean {close}?)" if close else ""


def closest_key(key: str, keys: Sequence[str]) -> str | None:
    """The setting ``key`` most likely meant: one with the same last name under another parent
    (``chunk_size`` for ``env.chunk_size``), else the closest name under the same parent
    (``env.chunksize`` -> ``env.chunk_size``), else, under a parent the config lacks, the closest
    last name anywhere."""
    parent, _, leaf = key.rpartition(".")
    by_leaf: dict[str, list[str]] = {}
    for k in sorted(keys, key=lambda k: (k.count("."), k)):  # the shallowest first
        by_leaf.setdefault(k.rpartition(".")[2], []).append(k)
    if leaf in by_leaf:
        return by_leaf[leaf][0]
    siblings = [k.rpartition(".")[2] for k in keys if k.rpartition(".")[0] == parent]
    close = suggestion(leaf, siblings)
    if close:
        return f"{parent}.{close}" if parent else close
    if parent in keys:  # a known group without such a setting: another name there is no guess
        return None
    close = suggestion(leaf, by_leaf)
    return by_leaf[close][0] if close else None


def explain_overrides(
    overrides: Sequence[str], conf_dir: str | Path, config_name: str
) -> str | None:
    """What is wrong with ``overrides``, in one sentence per bad one, or ``None`` when nothing
    is found here (the caller keeps Hydra's own message). Call inside Hydra's
    ``initialize_config_dir``."""
    from hydra import compose
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException:
        return None
    conf = Path(conf_dir)
    groups = {p.name for p in conf.iterdir() if p.is_dir()}
    problems, selections = [], []
    for o in parsed:
        if o.is_add() or o.is_force_add() or o.is_delete() or "/" in o.key_or_group:
            continue
        if o.key_or_group in groups:
            options = sorted(p.stem for p in (conf / o.key_or_group).glob("*.yaml"))
            value = o.value()
            if isinstance(value, str) and value not in options and value != "null":
                close = suggestion(value, options)
                problems.append(
                    f"no {o.key_or_group}/{value} in the config"
                    f"{_did_you_mean(f'{o.key_or_group}={close}' if close else None)}; the "
                    f"{o.key_or_group} options are {', '.join(options)}"
                )
            else:
                selections.append(o.input_line)
    if problems:
        return "; ".join(problems)
    try:
        keys = sorted(config_keys(compose(config_name=config_name, overrides=selections)))
    except HydraException:
        return None
    unknown = [
        o.key_or_group
        for o in parsed
        if not (o.is_add() or o.is_force_add() or o.is_delete() or o.key_or_group in groups)
        and not o.key_or_group.startswith("hydra")
        and o.key_or_group not in keys
    ]
    if not unknown:
        return None
    return (
        "; ".join(f"unknown setting {k}{_did_you_mean(closest_key(k, keys))}" for k in unknown)
        + " (the command with --cfg job prints every setting)"
    )
