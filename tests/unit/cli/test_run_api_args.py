"""``drsvc run``'s options for its API role: the tokens file and the TLS files reach the role as
its own options with absolute paths, and TLS files that cannot serve stop ``drsvc run`` before
any role starts, named by ``drsvc run``'s own options."""

from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.cli.run import api_role_args
from drsvc.devenv.pki import ensure_authority, issue
from drsvc.errors import ConfigError


def test_without_options_the_api_role_gets_none() -> None:
    assert api_role_args(None, None, None) == ()


def test_the_tokens_file_and_the_tls_files_become_the_api_role_s_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = issue(ensure_authority(tmp_path / "ca"), tmp_path / "tls", "api", server=True)
    monkeypatch.chdir(tmp_path)

    args = api_role_args(Path("tokens"), server.cert.relative_to(tmp_path), server.key)

    assert args == (
        "--tokens-file",
        str(tmp_path / "tokens"),
        "--tls-cert",
        str(server.cert),
        "--tls-key",
        str(server.key),
    )


def test_a_certificate_without_its_key_is_refused_by_drsvc_run_s_option_name(
    tmp_path: Path,
) -> None:
    server = issue(ensure_authority(tmp_path / "ca"), tmp_path / "tls", "api", server=True)

    with pytest.raises(ConfigError, match="--api-tls-key is missing"):
        api_role_args(None, server.cert, None)


def test_a_key_that_is_not_a_key_is_refused_before_any_role_starts(tmp_path: Path) -> None:
    server = issue(ensure_authority(tmp_path / "ca"), tmp_path / "tls", "api", server=True)

    with pytest.raises(ConfigError, match=r"holds no PEM private key"):
        api_role_args(None, server.cert, server.cert)
