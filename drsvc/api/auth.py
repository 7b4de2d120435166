"""Bearer-token authentication of the API: who is calling, and may they do this.

Callers are named tokens, each with a role: a ``viewer`` may read (every ``GET``), an
``operator`` may also change things (every ``POST``: failovers, failbacks, migrations). Tokens
come from a tokens file (one ``name role secret`` per line) and from the single token of
``$DRSVC_API_TOKEN`` or ``--token-file``, which is one operator called ``default``.

Reads need a token too unless the service runs with ``--public-reads``. Without any token
configured, whatever needs one is refused (403) rather than open: an API that moves applications
between clusters must not be callable by anyone who can reach it.

A presented token is compared with every configured secret, in constant time and without
stopping at the first match, so the time an answer takes says nothing about which token (or how
much of one) matched. Secrets are never logged, echoed or kept on the :class:`Caller` that
handlers see.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from drsvc.api.problems import ApiProblem
from drsvc.errors import ConfigError

__all__ = [
    "DEFAULT_TOKEN_NAME",
    "TOKEN_ENV",
    "ApiAuth",
    "ApiToken",
    "Caller",
    "Role",
    "load_token",
    "load_tokens",
]

TOKEN_ENV = "DRSVC_API_TOKEN"
#: the name of the single token of $DRSVC_API_TOKEN or --token-file (an operator)
DEFAULT_TOKEN_NAME = "default"
MIN_SECRET_CHARS = 16

_CHALLENGE = {"WWW-Authenticate": "Bearer"}
_TOKEN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


class Role(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"

    def may(self, *, mutating: bool) -> bool:
        return self is Role.OPERATOR or not mutating


@dataclass(frozen=True)
class Caller:
    """Who made a request, as handlers see it: the token's name and role, never its secret."""

    name: str
    role: Role


@dataclass(frozen=True)
class ApiToken:
    name: str
    role: Role
    secret: str = field(repr=False)

    def __post_init__(self) -> None:
        if not _TOKEN_NAME.match(self.name):
            raise ConfigError(
                f"API token name {self.name!r} is not valid: 1 to 64 letters, digits, '.', '_', "
                "'@' or '-', starting with a letter or digit"
            )
        if len(self.secret) < MIN_SECRET_CHARS:
            raise ConfigError(
                f"the API token {self.name} is too short: use at least {MIN_SECRET_CHARS} "
                "characters"
            )


def _read_private(path: Path, what: str) -> str:
    """The text of a secret file, refused when others may read it."""
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except OSError as err:
        raise ConfigError(f"cannot read the {what} {path}: {err.strerror}") from err
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"the {what} {path} is readable by others: chmod 600 it")
    return text


def load_token(token_file: Path | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The single token: from ``token_file`` if given, else ``$DRSVC_API_TOKEN``, else none."""
    env = os.environ if environ is None else environ
    if token_file is not None:
        text = _read_private(token_file, "API token file").strip()
        if not text:
            raise ConfigError(f"the API token file {token_file} is empty")
        return text
    value = env.get(TOKEN_ENV, "").strip()
    return value or None


def load_tokens(tokens_file: Path) -> tuple[ApiToken, ...]:
    """Named tokens from a file of ``name role secret`` lines (``#`` comments and blank lines
    are skipped); the file must not be readable by group or others."""
    tokens: list[ApiToken] = []
    text = _read_private(tokens_file, "API tokens file")
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parts = stripped.split()
        where = f"{tokens_file}:{number}"
        if len(parts) != 3:
            # never quote the line: it holds a secret
            raise ConfigError(
                f"{where}: expected 'name role secret' (three fields), found {len(parts)}"
            )
        name, role, secret = parts
        if role not in set(Role):
            raise ConfigError(
                f"{where}: token {name} has role {role!r}; roles are "
                f"{', '.join(r.value for r in Role)}"
            )
        try:
            tokens.append(ApiToken(name, Role(role), secret))
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from err
    if not tokens:
        raise ConfigError(f"the API tokens file {tokens_file} holds no token")
    return tuple(tokens)


def _digest(secret: str) -> bytes:
    # Comparing digests of equal length: compare_digest on the raw strings would answer
    # at once when the lengths differ, telling a caller how long the secrets are.
    return hashlib.sha256(secret.encode("utf-8")).digest()


@dataclass(frozen=True)
class ApiAuth:
    """The configured tokens and whether reads need one."""

    tokens: tuple[ApiToken, ...] = ()
    public_reads: bool = False
    _digests: tuple[tuple[bytes, Caller], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tokens]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError(f"API token names must be unique: {', '.join(twice)} given twice")
        digests = [_digest(t.secret) for t in self.tokens]
        if len(set(digests)) != len(digests):
            shared = [
                t.name for t, d in zip(self.tokens, digests, strict=True) if digests.count(d) > 1
            ]
            raise ConfigError(
                f"API tokens {', '.join(shared)} have the same secret: give each its own"
            )
        object.__setattr__(
            self,
            "_digests",
            tuple((d, Caller(t.name, t.role)) for d, t in zip(digests, self.tokens, strict=True)),
        )

    @classmethod
    def of(
        cls,
        single: str | None,
        named: Iterable[ApiToken] = (),
        *,
        public_reads: bool = False,
    ) -> ApiAuth:
        """``single`` ($DRSVC_API_TOKEN or --token-file) as the operator ``default``, plus the
        tokens of a tokens file."""
        tokens = [] if single is None else [ApiToken(DEFAULT_TOKEN_NAME, Role.OPERATOR, single)]
        return cls((*tokens, *named), public_reads)

    def identify(self, presented: str) -> Caller | None:
        """The caller whose secret ``presented`` is, if any. Every configured secret is
        compared, whichever matches, so the time taken is the same for all of them."""
        wanted = _digest(presented)
        found: Caller | None = None
        for digest, caller in self._digests:
            if hmac.compare_digest(wanted, digest):
                found = caller
        return found

    def check(self, presented: str | None, *, mutating: bool) -> Caller | None:
        """The caller, or the right problem unless ``presented`` (the bearer token sent, if
        any) allows the request. A public read answers the caller when the token is good and
        none otherwise, never a problem."""
        caller = None if presented is None else self.identify(presented)
        if not mutating and self.public_reads:
            return caller
        if not self.tokens:
            raise ApiProblem(
                403,
                "forbidden",
                f"{'changes' if mutating else 'reads'} through the API are disabled: no API "
                f"token is configured (set {TOKEN_ENV}, --token-file or --tokens-file where the "
                "API runs)",
            )
        if presented is None:
            raise ApiProblem(
                401,
                "unauthorized",
                "a bearer token is required (Authorization: Bearer ...)",
                _CHALLENGE,
            )
        if caller is None:
            raise ApiProblem(403, "forbidden", "the bearer token is not valid")
        if not caller.role.may(mutating=mutating):
            raise ApiProblem(
                403,
                "forbidden",
                f"role {caller.role.value} cannot make changes (token {caller.name}): "
                f"changes need an {Role.OPERATOR.value} token",
            )
        return caller
