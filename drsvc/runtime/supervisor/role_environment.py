"""Each role's own environment: the names from :mod:`failover.role_environment`, the values
from the supervisor's environment.

The supervisor's environment holds every role's credentials (and whatever the shell that
started it held); a role is handed only what :func:`failover.role_environment.role_variables`
names for it, so a replication worker never sees the API's token nor the executor's Consul
token. A variable the topology names for a role but that is not set is a
:class:`~drsvc.errors.ConfigError` naming the role and the variable (never a value) before any
role starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from drsvc.errors import ConfigError
from drsvc.settings import ENV_PREFIX, Settings
from drsvc.topology.models import Topology
from failover.errors import PolicyError
from failover.role_environment import (
    BASE_VARIABLES,
    CONSUL_TOKEN_OVERRIDES,
    RoleVariables,
    missing_variables,
)
from failover.role_environment import role_variables as core_role_variables

__all__ = [
    "BASE_ONLY",
    "interpolated_variables",
    "role_environment",
    "role_variables",
    "settings_variables",
]

#: what a role described without a topology gets (tests, tools): the base allow-list only
BASE_ONLY = RoleVariables(optional=BASE_VARIABLES)

# ``${NAME}`` and ``${NAME:-default}`` as the topology loader reads them; ``$${`` is a literal
_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)")


def settings_variables() -> frozenset[str]:
    """The ``DRSVC_*`` variables of :class:`~drsvc.settings.Settings` (none is a secret)."""
    return frozenset(ENV_PREFIX + name.upper() for name in Settings.model_fields)


def interpolated_variables(text: str) -> frozenset[str]:
    """The variables a topology file's text refers to as ``${NAME}`` (every role loads the
    whole file, so every role needs them)."""
    return frozenset(m.group(1) for m in _REFERENCE.finditer(text) if m.group(1) is not None)


def _file_variables(topology_file: Path) -> frozenset[str]:
    try:
        return interpolated_variables(topology_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        # the loader read it a moment ago; should it be gone now, the role says so itself
        return frozenset()


def role_variables(
    topology: Topology, topology_file: Path, kind: str, flow: str | None = None
) -> RoleVariables:
    """The variables a role of ``kind`` (for ``flow``) gets under ``topology``."""
    try:
        return core_role_variables(
            topology,
            kind,
            flow=flow,
            settings=settings_variables(),
            interpolated=_file_variables(topology_file),
        )
    except PolicyError as err:
        raise ConfigError(f"topology {topology_file}: {err}") from err


def role_environment(
    environ: Mapping[str, str], variables: RoleVariables, role: str
) -> dict[str, str]:
    """The environment of the role called ``role``: the variables it is given that are set in
    ``environ``. Raises :class:`ConfigError` naming each required variable that is not set.

    The role's own Consul token (its file, else its variable's value) is also put in Consul's
    own variable, ``CONSUL_HTTP_TOKEN_FILE`` or ``CONSUL_HTTP_TOKEN``, unless the environment
    sets one of them: drsvc's processes take their token from there (only the client library
    reads the topology's ``consul.tokens``), so each role reaches Consul with its own token
    rather than all with one.
    """
    present = {name for name, value in environ.items() if value != ""}
    missing = missing_variables(variables, present)
    if missing:
        named = "; ".join(f"{v.name} (named by {v.why})" for v in missing)
        raise ConfigError(
            f"role {role} needs environment variables that are not set: {named}. Set them in "
            "the environment of drsvc run (each role gets only the variables it needs)"
        )
    chosen = {name: value for name, value in environ.items() if variables.wants(name)}
    if not any(name in present for name in CONSUL_TOKEN_OVERRIDES):
        token = variables.consul_token
        if variables.consul_token_file is not None:
            chosen["CONSUL_HTTP_TOKEN_FILE"] = variables.consul_token_file
        elif token is not None:
            chosen["CONSUL_HTTP_TOKEN"] = environ[token.name]
    return chosen
