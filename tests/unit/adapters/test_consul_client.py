"""ConsulClient against a fake HTTP transport (no network): the token, scheme and TLS settings
that reach the wire, a rotated token file picked up after a refusal, and errors that say what
was denied without showing the token."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
from requests.adapters import BaseAdapter

from drsvc.adapters.consul_access import ConsulAccess, resolve_consul_access
from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.adapters.coordination import Put
from drsvc.errors import ConfigError, CoordinatorUnavailableError, RefusedError, TooLargeError

SECRET = "6d0c0f5e-secret"
DENIED = "Permission denied: token with AccessorID 'a-1' lacks permission 'key:write' on \"k\""


@dataclass
class Sent:
    method: str
    url: str
    token: str | None
    verify: bool | str
    cert: Any


@dataclass
class FakeConsulHttp(BaseAdapter):
    """Answers every request with the next (status, body) of ``answers`` (the last one repeats)
    and records what was sent, with the TLS settings requests hands its transport."""

    answers: list[tuple[int, str]] = field(default_factory=lambda: [(200, "true")])
    sent: list[Sent] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def send(  # type: ignore[override]
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: bool | str = True,
        cert: Any = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        self.sent.append(
            Sent(
                str(request.method),
                str(request.url),
                request.headers.get("X-Consul-Token"),
                verify,
                cert,
            )
        )
        status, body = self.answers[0] if len(self.answers) == 1 else self.answers.pop(0)
        response = requests.Response()
        response.status_code = status
        response._content = body.encode()
        response.headers["X-Consul-Index"] = "7"
        response.request = request
        response.url = str(request.url)
        return response

    def close(self) -> None:
        pass


def wired(client: ConsulClient, *answers: tuple[int, str]) -> FakeConsulHttp:
    fake = FakeConsulHttp(list(answers) or [(200, "true")])
    session = client._consul.http.session
    for prefix in ("http://", "https://"):
        session.mount(prefix, fake)
    return fake


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (
        "DRSVC_CONSUL_HTTP_ADDR",
        "CONSUL_HTTP_ADDR",
        "CONSUL_HTTP_TOKEN",
        "CONSUL_HTTP_TOKEN_FILE",
        "CONSUL_HTTP_SSL",
        "CONSUL_HTTP_SSL_VERIFY",
        "CONSUL_CACERT",
        "CONSUL_CLIENT_CERT",
        "CONSUL_CLIENT_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_an_explicit_token_beats_consul_http_token(clean_env: pytest.MonkeyPatch) -> None:
    # py-consul itself would send the variable's token whatever it was given
    clean_env.setenv("CONSUL_HTTP_TOKEN", "from-the-environment")
    client = ConsulClient("127.0.0.1:8500", access=resolve_consul_access({}, token="explicit"))
    assert client._consul.token == "explicit"
    fake = wired(client)
    client.kv_put("k", "v")
    assert [s.token for s in fake.sent] == ["explicit"]
    # an explicit access without a token sends none, whatever the environment holds
    bare = ConsulClient("127.0.0.1:8500", access=ConsulAccess())
    bare_fake = wired(bare)
    bare.kv_put("k", "v")
    assert bare_fake.sent[0].token is None


def test_without_an_access_the_environment_decides_token_file_first(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token_file = tmp_path / "consul.token"
    token_file.write_text(f"{SECRET}\n")
    clean_env.setenv("CONSUL_HTTP_TOKEN", "the-variable")
    clean_env.setenv("CONSUL_HTTP_TOKEN_FILE", str(token_file))
    client = ConsulClient("127.0.0.1:8500")  # as the call sites that pass an address only
    fake = wired(client)
    client.kv_put("k", "v")
    assert fake.sent[0].token == SECRET
    assert fake.sent[0].url.startswith("http://127.0.0.1:8500/v1/kv/k")


def test_no_token_anywhere_sends_none(clean_env: pytest.MonkeyPatch) -> None:
    client = ConsulClient("127.0.0.1:8500")
    fake = wired(client)
    client.kv_put("k", "v")
    assert fake.sent[0].token is None


def test_tls_verifies_with_the_ca_file_and_presents_the_client_certificate(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("CONSUL_HTTP_ADDR", "https://consul.example:8501")
    clean_env.setenv("CONSUL_CACERT", "/pki/ca.pem")
    clean_env.setenv("CONSUL_CLIENT_CERT", "/pki/drsvc.crt")
    clean_env.setenv("CONSUL_CLIENT_KEY", "/pki/drsvc.key")
    client = ConsulClient()  # the address from CONSUL_HTTP_ADDR
    assert client.http_addr == "consul.example:8501"
    fake = wired(client, (200, '"10.0.0.1:8300"'))
    assert client.leader() == "10.0.0.1:8300"
    sent = fake.sent[0]
    assert sent.url == "https://consul.example:8501/v1/status/leader"
    assert sent.verify == "/pki/ca.pem"
    assert sent.cert == ("/pki/drsvc.crt", "/pki/drsvc.key")


def test_an_https_address_is_spoken_in_https_and_drsvcs_variable_chooses_the_agent(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("DRSVC_CONSUL_HTTP_ADDR", "drsvc.example:8500")
    clean_env.setenv("CONSUL_HTTP_ADDR", "consul.example:8500")
    assert ConsulClient().http_addr == "drsvc.example:8500"
    # without a CA file, requests' own default stands (which these variables may name)
    clean_env.delenv("REQUESTS_CA_BUNDLE", raising=False)
    clean_env.delenv("CURL_CA_BUNDLE", raising=False)
    client = ConsulClient("https://10.0.0.5:8501", access=ConsulAccess())
    fake = wired(client)
    client.kv_put("k", "v")
    assert fake.sent[0].url.startswith("https://10.0.0.5:8501/")
    assert fake.sent[0].verify is True
    coordinator = ConsulCoordinator("https://10.0.0.5:8501", access=ConsulAccess())
    assert coordinator._url == "https://10.0.0.5:8501"  # what its locks' clients are given


def test_a_chosen_agent_is_not_spoken_to_in_the_scheme_of_another(
    clean_env: pytest.MonkeyPatch,
) -> None:
    # an operator's shell set up for a remote TLS agent, and a local plain agent chosen
    clean_env.setenv("CONSUL_HTTP_ADDR", "https://consul.example:8501")
    client = ConsulClient("127.0.0.1:8500")
    fake = wired(client)
    client.kv_put("k", "v")
    assert fake.sent[0].url.startswith("http://127.0.0.1:8500/")


def test_no_address_anywhere_is_named(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="DRSVC_CONSUL_HTTP_ADDR or CONSUL_HTTP_ADDR"):
        ConsulClient()
    with pytest.raises(ConfigError, match="invalid Consul HTTP address"):
        ConsulClient("no-port", access=ConsulAccess())


def test_a_rotated_token_file_is_read_again_once_after_a_refusal(tmp_path: Path) -> None:
    token_file = tmp_path / "t"
    token_file.write_text("old-token")
    client = ConsulClient("127.0.0.1:8500", access=resolve_consul_access({}, token_file=token_file))
    fake = wired(client, (403, DENIED), (200, "true"))
    token_file.write_text("new-token\n")
    client.kv_put("k", "v")
    assert [s.token for s in fake.sent] == ["old-token", "new-token"]
    # and the new one is kept for what follows
    client.kv_put("k", "v")
    assert fake.sent[-1].token == "new-token"


def test_a_refusal_with_an_unchanged_token_is_not_retried_and_says_what_was_denied(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "t"
    token_file.write_text(SECRET)
    client = ConsulClient("127.0.0.1:8500", access=resolve_consul_access({}, token_file=token_file))
    fake = wired(client, (403, DENIED))
    with pytest.raises(ConfigError) as denied:
        client.kv_put("drsvc/shop/apps/orders/active", "v")
    assert len(fake.sent) == 1
    message = str(denied.value)
    assert "denied put drsvc/shop/apps/orders/active" in message
    assert "key:write" in message  # Consul's own reason
    assert f"token file {token_file}" in message
    assert SECRET not in message


def test_a_refusal_after_rotation_fails_after_one_retry(tmp_path: Path) -> None:
    token_file = tmp_path / "t"
    token_file.write_text("one")
    client = ConsulClient("127.0.0.1:8500", access=resolve_consul_access({}, token_file=token_file))
    fake = wired(client, (403, DENIED), (403, DENIED), (200, "true"))
    token_file.write_text("two")
    with pytest.raises(ConfigError, match="denied put k"):
        client.kv_put("k", "v")
    assert [s.token for s in fake.sent] == ["one", "two"]


def test_a_token_value_is_never_read_again_and_no_token_is_advice(
    clean_env: pytest.MonkeyPatch,
) -> None:
    client = ConsulClient("127.0.0.1:8500", access=resolve_consul_access({}, token=SECRET))
    fake = wired(client, (403, DENIED))
    with pytest.raises(ConfigError) as denied:
        client.kv_put("k", "v")
    assert len(fake.sent) == 1
    assert "the token argument" in str(denied.value) and SECRET not in str(denied.value)
    anonymous = ConsulClient("127.0.0.1:8500", access=ConsulAccess())
    wired(anonymous, (403, DENIED))
    with pytest.raises(ConfigError, match="no ACL token was given"):
        anonymous.kv_put("k", "v")


def test_other_answers_keep_their_mapping() -> None:
    client = ConsulClient("127.0.0.1:8500", access=ConsulAccess())
    wired(client, (401, "ACL support disabled"))
    with pytest.raises(ConfigError, match="rejected put k"):
        client.kv_put("k", "v")
    wired(client, (500, "No cluster leader"))
    with pytest.raises(CoordinatorUnavailableError):
        client.kv_put("k", "v")
    wired(client, (404, ""))
    assert client.kv_get("k") is None
    wired(client, (200, json.dumps([{"Key": "k", "Value": "dg==", "ModifyIndex": 3}])))
    assert client.kv_get("k") == "v"


def test_the_token_is_in_no_repr_of_the_client(tmp_path: Path) -> None:
    client = ConsulClient("127.0.0.1:8500", access=resolve_consul_access({}, token=SECRET))
    assert SECRET not in repr(client.access)
    assert SECRET not in repr(vars(client)["access"])
    assert SECRET not in repr(client._consul)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (413, 'Value for key "drsvc/t/failovers/f-1" is too large (600000 > 524288 bytes)'),
        (413, "Request body(700000 bytes) too large, max size: 524288 bytes. See ..."),
        (413, "Transaction contains too many operations (129 > 128)"),
        (400, "Value exceeds 524288 byte limit"),
    ],
)
def test_a_write_refused_for_its_size_is_a_refusal_not_a_setting(status: int, body: str) -> None:
    coordinator = ConsulCoordinator("127.0.0.1:8500", access=ConsulAccess())
    wired(coordinator._api, (status, body))
    with pytest.raises(TooLargeError, match="for its size, so nothing of it was written") as err:
        coordinator.write([Put("drsvc/t/failovers/f-1", "x")])
    assert isinstance(err.value, RefusedError) and body in str(err.value)
    client = ConsulClient("127.0.0.1:8500", access=ConsulAccess())
    wired(client, (status, body))
    with pytest.raises(TooLargeError):
        client.kv_put("k", "v")
