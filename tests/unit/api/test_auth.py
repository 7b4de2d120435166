"""Named tokens with roles: the tokens file, the single default token, who may do what, and a
comparison that looks at every secret whichever one matches."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from drsvc.api import auth as auth_module
from drsvc.api.auth import ApiAuth, ApiToken, Caller, Role, load_tokens
from drsvc.api.problems import ApiProblem
from drsvc.errors import ConfigError

VIEWER_SECRET = "viewer-secret-0123456789"
OPERATOR_SECRET = "operator-secret-0123456789"
DEFAULT_SECRET = "default-secret-0123456789"


def _tokens_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_a_tokens_file_names_each_token_and_its_role(tmp_path: Path) -> None:
    path = _tokens_file(
        tmp_path,
        f"# who may call the API\n\nalice viewer {VIEWER_SECRET}\n"
        f"  bob operator {OPERATOR_SECRET}\n",
    )
    assert load_tokens(path) == (
        ApiToken("alice", Role.VIEWER, VIEWER_SECRET),
        ApiToken("bob", Role.OPERATOR, OPERATOR_SECRET),
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (f"alice admin {VIEWER_SECRET}\n", "role 'admin'; roles are viewer, operator"),
        (f"alice viewer {VIEWER_SECRET} extra\n", "tokens:1: expected 'name role secret'"),
        ("alice viewer\n", "three fields), found 2"),
        ("alice viewer short\n", "too short"),
        (f"../x viewer {VIEWER_SECRET}\n", "name '../x' is not valid"),
        ("# nobody\n", "holds no token"),
    ],
)
def test_a_bad_tokens_file_is_refused_naming_the_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)) as raised:
        load_tokens(_tokens_file(tmp_path, text))
    assert VIEWER_SECRET not in str(raised.value)  # the message never quotes a secret


def test_a_tokens_file_others_may_read_is_refused(tmp_path: Path) -> None:
    path = _tokens_file(tmp_path, f"alice viewer {VIEWER_SECRET}\n", mode=0o640)
    with pytest.raises(ConfigError, match="readable by others: chmod 600"):
        load_tokens(path)
    with pytest.raises(ConfigError, match="cannot read the API tokens file"):
        load_tokens(tmp_path / "missing")


def test_names_and_secrets_are_unique() -> None:
    with pytest.raises(ConfigError, match="alice given twice"):
        ApiAuth(
            (
                ApiToken("alice", Role.VIEWER, VIEWER_SECRET),
                ApiToken("alice", Role.OPERATOR, OPERATOR_SECRET),
            )
        )
    with pytest.raises(ConfigError, match="alice, bob have the same secret"):
        ApiAuth(
            (
                ApiToken("alice", Role.VIEWER, VIEWER_SECRET),
                ApiToken("bob", Role.OPERATOR, VIEWER_SECRET),
            )
        )
    with pytest.raises(ConfigError, match="default given twice"):
        ApiAuth.of(DEFAULT_SECRET, [ApiToken("default", Role.VIEWER, VIEWER_SECRET)])


def _auth() -> ApiAuth:
    return ApiAuth.of(
        DEFAULT_SECRET,
        [
            ApiToken("alice", Role.VIEWER, VIEWER_SECRET),
            ApiToken("bob", Role.OPERATOR, OPERATOR_SECRET),
        ],
    )


def test_the_single_token_is_the_operator_default() -> None:
    auth = _auth()
    assert auth.check(DEFAULT_SECRET, mutating=True) == Caller("default", Role.OPERATOR)
    assert auth.check(VIEWER_SECRET, mutating=False) == Caller("alice", Role.VIEWER)
    assert auth.check(OPERATOR_SECRET, mutating=True) == Caller("bob", Role.OPERATOR)


def test_a_viewer_may_read_and_not_change() -> None:
    with pytest.raises(ApiProblem) as refused:
        _auth().check(VIEWER_SECRET, mutating=True)
    assert refused.value.status == 403
    assert "role viewer cannot make changes (token alice)" in refused.value.message


def test_the_caller_handlers_see_holds_no_secret() -> None:
    assert [f.name for f in dataclasses.fields(Caller)] == ["name", "role"]
    assert VIEWER_SECRET not in repr(_auth())


def test_every_secret_is_compared_whichever_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[bytes] = []
    real = auth_module.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return real(a, b)

    monkeypatch.setattr(auth_module.hmac, "compare_digest", counting)
    auth = _auth()
    for presented in (DEFAULT_SECRET, OPERATOR_SECRET, "no-such-secret-0123456789"):
        compared.clear()
        auth.identify(presented)
        assert len(compared) == 3, presented  # the first token matching stops nothing
    # what is compared are digests of one length: a secret's length shows in no timing
    assert {len(digest) for digest in compared} == {32}
