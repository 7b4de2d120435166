from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.errors import ConfigError
from drsvc.settings import Settings


def test_environment_variables_configure_settings() -> None:
    settings = Settings.from_env({"DRSVC_STATE_DIR": "/s", "DRSVC_START_TIMEOUT_S": "12"})
    assert settings.state_dir == Path("/s")
    assert settings.start_timeout_s == 12


def test_flags_override_the_environment() -> None:
    settings = Settings.from_env({"DRSVC_STATE_DIR": "/s"}, state_dir=Path("/flag"))
    assert settings.state_dir == Path("/flag")


def test_defaults_apply_when_nothing_is_set() -> None:
    settings = Settings.from_env({})
    assert settings.state_dir == Path(".drsvc")
    assert settings.cache_dir.name == "drsvc"


def test_a_bad_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="DRSVC_START_TIMEOUT_S"):
        Settings.from_env({"DRSVC_START_TIMEOUT_S": "soon"})
