"""Building blocks shared by the topology models: the frozen base model and checked name types."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo

from failover.naming import check_key_segment

#: Validation-context key holding the directory that relative file paths are resolved against.
BASE_DIR_CONTEXT_KEY = "base_dir"

NAME_PATTERN = re.compile(r"[a-zA-Z0-9._-]+")
_ENV_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class FrozenModel(BaseModel):
    """Immutable, and unknown keys are errors: a typo must not silently become a default."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_name(value: str) -> str:
    if not NAME_PATTERN.fullmatch(value):
        raise ValueError(f"must be non-empty and use only [a-zA-Z0-9._-] (got {value!r})")
    # Names become segments of Consul keys, where Consul's reads and its transactions disagree
    # about '.' and '..' (one normalises them, the other stores them).
    return check_key_segment("a name", value)


def _check_env_var(value: str) -> str:
    if not _ENV_VAR.fullmatch(value):
        raise ValueError(
            f"must be the name of an environment variable, like EAST_PASSWORD (got {value!r})"
        )
    return value


#: A name usable in topic names and Consul keys: cluster aliases, topology and application names.
Name = Annotated[str, AfterValidator(_check_name)]

#: The name of an environment variable (which holds a secret; the secret itself is never inline).
EnvVarName = Annotated[str, AfterValidator(_check_env_var)]


def resolve_path(path: Path | None, info: ValidationInfo) -> Path | None:
    """Resolve a relative path against the topology file's directory, like other config tools,
    so that a topology and its certificates can move together."""
    if path is None:
        return None
    path = path.expanduser()
    context = info.context
    if not path.is_absolute() and isinstance(context, dict):
        base = context.get(BASE_DIR_CONTEXT_KEY)
        if isinstance(base, Path):
            return base / path
    return path
