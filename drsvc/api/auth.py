"""Bearer-token authentication of the API.

Mutating endpoints always need the token; reads need it when the service is started with
``--protect-reads``. Without a configured token, mutations are refused (403) rather than open:
an API that moves applications between clusters must not be callable by anyone who can reach it.
The token is compared in constant time and never logged or echoed.
"""

from __future__ import annotations

import hmac
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from drsvc.api.problems import ApiProblem
from drsvc.errors import ConfigError

__all__ = ["TOKEN_ENV", "ApiAuth", "load_token"]

TOKEN_ENV = "DRSVC_API_TOKEN"

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def load_token(token_file: Path | None, environ: dict[str, str] | None = None) -> str | None:
    """The token: from ``token_file`` if given, else ``$DRSVC_API_TOKEN``, else none."""
    env = os.environ if environ is None else environ
    if token_file is not None:
        try:
            text = token_file.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise ConfigError(
                f"cannot read the API token file {token_file}: {err.strerror}"
            ) from err
        if not text:
            raise ConfigError(f"the API token file {token_file} is empty")
        if token_file.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(
                f"the API token file {token_file} is readable by others: chmod 600 it"
            )
        return text
    value = env.get(TOKEN_ENV, "").strip()
    return value or None


@dataclass(frozen=True)
class ApiAuth:
    token: str | None = field(repr=False)
    protect_reads: bool = False

    def __post_init__(self) -> None:
        if self.protect_reads and self.token is None:
            raise ConfigError(
                f"reads cannot be protected without a token: set {TOKEN_ENV} or pass --token-file"
            )
        if self.token is not None and len(self.token) < 16:
            raise ConfigError("the API token is too short: use at least 16 characters")

    def check(self, presented: str | None, *, mutating: bool) -> None:
        """Raise the right problem unless ``presented`` (the bearer token sent, if any)
        allows the request."""
        if not mutating and not self.protect_reads:
            return
        if self.token is None:
            raise ApiProblem(
                403,
                "forbidden",
                f"changes through the API are disabled: no API token is configured "
                f"(set {TOKEN_ENV} or --token-file where the API runs)",
            )
        if presented is None:
            raise ApiProblem(
                401,
                "unauthorized",
                "a bearer token is required (Authorization: Bearer ...)",
                _CHALLENGE,
            )
        if not hmac.compare_digest(presented.encode("utf-8"), self.token.encode("utf-8")):
            raise ApiProblem(403, "forbidden", "the bearer token is not valid")
