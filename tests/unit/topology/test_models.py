"""Topology models and loader: the shape that must load, and errors that name file and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drsvc.errors import ConfigError, TopologyError
from drsvc.topology import Topology, load_topology, load_topology_text
from drsvc.topology.loader import _interpolate_string
from drsvc.topology.render import describe_topology
from failover.replication_policy import IdentityPolicy, PrefixPolicy

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "topologies"

DESIGN_SHAPE = r"""
name: active-active
clusters:
  east: {bootstrap_servers: "127.0.0.1:19092"}
  west: {}
flows:
  - {source: east, target: west}
  - source: west
    target: east
    topics: {include: [".*"], exclude: ["^tmp\\..*"]}
    groups: {include: [".*"]}
    policy: prefix
    delivery: at-least-once
applications:
  - name: orders-service
    groups: [orders-consumer]
    topics: [orders]
    preferred: east
    auto_failover: true
"""

TWO = "name: t\nclusters: {east: {}, west: {}}\n"


def load(text: str, env: dict[str, str] | None = None) -> Topology:
    return load_topology_text(textwrap.dedent(text), "t.yaml", env=env or {})


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(TopologyError) as caught:
        load(text, env)
    assert caught.value.source == "t.yaml"
    return caught.value.problems


def test_the_design_shape_loads_with_its_defaults() -> None:
    topology = load(DESIGN_SHAPE)
    assert topology.name == "active-active"
    assert topology.namespace == "active-active"
    assert topology.cluster("east").bootstrap_servers == "127.0.0.1:19092"
    assert topology.cluster("west").bootstrap_servers is None
    assert topology.cluster("west").alias == "west"
    first, second = topology.flows
    assert first.id == "east->west"
    assert first.policy == "prefix"
    assert first.delivery == "at-least-once"
    assert first.start.kind == "earliest"
    assert first.topics.include == (".*",)
    assert first.topics.exclude == ()
    assert second.topics.exclude == (r"^tmp\..*",)
    assert topology.applications[0].auto_failover is True
    assert topology.flows_into("east") == (second,)
    assert topology.flows_from("east") == (first,)


@pytest.mark.parametrize(
    ("name", "flows", "policies"),
    [
        ("active-active", ["east->west", "west->east"], {"prefix"}),
        ("active-passive", ["east->west", "west->east"], {"identity"}),
        ("aggregation", ["east->agg", "west->agg", "south->agg"], {"prefix"}),
    ],
)
def test_example_topologies_load(name: str, flows: list[str], policies: set[str]) -> None:
    topology = load_topology(EXAMPLES / f"{name}.yaml", env={})
    assert topology.name == name
    assert [flow.id for flow in topology.flows] == flows
    assert {flow.policy for flow in topology.flows} == policies
    assert all(c.bootstrap_servers is None for c in topology.clusters.values())


def test_policy_for_knows_every_alias() -> None:
    topology = load_topology(EXAMPLES / "aggregation.yaml", env={})
    policy = topology.policy_for(topology.flow("west", "agg"))
    assert isinstance(policy, PrefixPolicy)
    assert policy.aliases == frozenset({"east", "west", "south", "agg"})
    assert policy.source_chain("west.south.orders") == ("west", "south")
    passive = load_topology(EXAMPLES / "active-passive.yaml", env={})
    assert isinstance(passive.policy_for(passive.flows[0]), IdentityPolicy)


def test_topic_verdict_uses_the_flow_filters() -> None:
    topology = load(DESIGN_SHAPE)
    west_to_east = topology.flow("west", "east")
    assert topology.topic_verdict(west_to_east, "orders").target_topic == "west.orders"
    assert not topology.topic_verdict(west_to_east, "tmp.x").replicate
    assert not topology.topic_verdict(west_to_east, "east.orders").replicate
    assert topology.topic_verdict(topology.flow("east", "west"), "tmp.x").replicate


def test_lookups_of_unknown_names_raise_config_errors() -> None:
    topology = load(DESIGN_SHAPE)
    with pytest.raises(ConfigError, match=r"no cluster 'north' \(known: east, west\)"):
        topology.cluster("north")
    with pytest.raises(ConfigError, match="no flow east->east"):
        topology.flow("east", "east")
    with pytest.raises(ConfigError, match="no application 'billing'"):
        topology.application("billing")
    other = load(TWO + "flows: [{source: west, target: east, separator: _}]\n")
    with pytest.raises(ConfigError, match="not part of topology"):
        topology.policy_for(other.flows[0])


def test_models_are_frozen() -> None:
    topology = load(DESIGN_SHAPE)
    with pytest.raises(ValueError, match="frozen"):
        topology.name = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="frozen"):
        topology.flows[0].policy = "identity"  # type: ignore[misc]


def test_namespace_can_be_set() -> None:
    assert load(TWO + "namespace: prod-eu\n").namespace == "prod-eu"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            TWO + "flows: [{source: east, target: west, polcy: prefix}]\n",
            ["flows[0]: unknown key 'polcy' (did you mean 'policy'?)"],
        ),
        (
            TWO + "flows: [{source: east, target: west, policy: prefx}]\n",
            ["flows[0].policy: must be one of prefix, identity (got 'prefx')"],
        ),
        (
            TWO + "flows: [{source: east, target: west, delivery: once}]\n",
            ["flows[0].delivery: must be one of at-least-once, exactly-once (got 'once')"],
        ),
        (
            TWO + "flows: [{source: east, target: west}, {source: west, target: north}]\n",
            ["flows[1].target: unknown cluster 'north' (known: east, west)"],
        ),
        (
            TWO + "flows: [{source: east, target: east}]\n",
            ["flows[0]: source and target are both 'east'; a flow joins two clusters"],
        ),
        (
            TWO + "flows: [{source: east, target: west}, {source: east, target: west}]\n",
            [
                "flows[1]: duplicate flow east->west (already flows[0]); merge their filters into"
                " one flow"
            ],
        ),
        (
            TWO + "flows: [{target: west}]\n",
            ["flows[0].source: required, but missing"],
        ),
        (
            TWO + "flows: [{source: east, target: west, linger_ms: 5000}]\n",
            ["flows[0].linger_ms: Input should be less than or equal to 1000 (got 5000)"],
        ),
        (
            TWO + "migrations: [{name: m, source: east, target: west, linger_ms: -1}]\n",
            ["migrations[0].linger_ms: Input should be greater than or equal to 0 (got -1)"],
        ),
        (
            "clusters: {east: {}}\n",
            ["name: required, but missing"],
        ),
        (
            "name: t\nclusters: {}\n",
            ["clusters: must not be empty"],
        ),
        (
            "name: t\nclusters: [east, west]\n",
            ["clusters: must be a mapping (got a list ['east', 'west'])"],
        ),
        (
            TWO + "colour: blue\n",
            ["top level: unknown key 'colour'"],
        ),
        (
            "name: t\nclusters: {east: {alias: west}}\n",
            [
                "clusters: unknown key 'alias' in cluster 'east'; the key under clusters is the"
                " alias"
            ],
        ),
        (
            "name: 'my topology'\nclusters: {east: {}}\n",
            ["name: must be non-empty and use only [a-zA-Z0-9._-] (got 'my topology')"],
        ),
        (
            "name: t\nclusters: {east: {bootstrap_servers: 'localhost'}}\n",
            [
                "clusters.east.bootstrap_servers: expected host:port[,host:port...] (got"
                " 'localhost'; bad entry 'localhost')"
            ],
        ),
    ],
)
def test_problems_name_the_field(text: str, expected: list[str]) -> None:
    assert problems(text) == expected


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names_are_refused_wherever_names_become_consul_keys(name: str) -> None:
    # Consul's reads normalise '.' and '..' in a key's path, its transactions do not: such a
    # name would read one key and write another.
    why = f"a name {name!r} cannot be part of a Consul key"
    assert problems(f"name: '{name}'\nclusters: {{east: {{}}}}\n") == [
        f"name: {why} (not '.', '..' or '/')",
        f"namespace: {why} (not '.', '..' or '/')",
    ]
    assert problems(TWO + f"namespace: '{name}'\n") == [f"namespace: {why} (not '.', '..' or '/')"]
    app = f"applications: [{{name: '{name}', groups: [g], topics: [t], preferred: east}}]\n"
    assert problems(TWO + "flows: [{source: east, target: west}]\n" + app) == [
        f"applications[0].name: {why} (not '.', '..' or '/')"
    ]
    (alias_problem,) = problems(f"name: t\nclusters: {{'{name}': {{}}}}\n")
    assert why in alias_problem


def test_invalid_regexes_show_the_pattern_and_the_reason() -> None:
    found = problems(
        TWO + "flows: [{source: east, target: west, topics: {include: [ok, '('],"
        " exclude: '[a-'}}]\n"
    )
    assert found == [
        "flows[0].topics.include[1]: invalid regex '(': missing ), unterminated subpattern at"
        " position 0",
        "flows[0].topics.exclude[0]: invalid regex '[a-': unterminated character set at position 0",
    ]


def test_empty_include_is_refused() -> None:
    assert problems(TWO + "flows: [{source: east, target: west, topics: {include: []}}]\n") == [
        "flows[0].topics.include: must list at least one pattern (use ['.*'] for everything)"
    ]


def test_all_cross_field_problems_are_reported_together() -> None:
    found = problems(
        TWO
        + """
flows:
  - {source: east, target: north}
  - {source: south, target: west}
applications:
  - {name: a, groups: [g], topics: [orders], preferred: moon}
  - {name: a, groups: [g], topics: [orders], preferred: east}
"""
    )
    assert found == [
        "flows[0].target: unknown cluster 'north' (known: east, west)",
        "flows[1].source: unknown cluster 'south' (known: east, west)",
        "applications[0].preferred: unknown cluster 'moon' (known: east, west)",
        "applications[1].name: application 'a' is already applications[0]",
        "applications[1].groups: group 'g' already belongs to applications[0] (a); a group fails"
        " over with one application only",
    ]


@pytest.mark.parametrize(
    ("application", "expected"),
    [
        (
            "{name: a, groups: [g, g], topics: [x], preferred: east}",
            "applications[0].groups: 'g' is listed twice",
        ),
        (
            "{name: a, groups: [g], topics: [x, x], preferred: east}",
            "applications[0].topics: 'x' is listed twice",
        ),
        (
            "{name: a, groups: [], topics: [x], preferred: east}",
            "applications[0].groups: must not be empty",
        ),
        (
            "{name: a, groups: [g], topics: ['bad topic'], preferred: east}",
            "applications[0].topics[0]: topic name 'bad topic' has characters Kafka does not"
            " allow (' '); use [a-zA-Z0-9._-]",
        ),
        (
            "{name: a, groups: [g], topics: [x], preferred: east, auto_failover: true}",
            "applications[0].auto_failover: no flow leaves 'east', so there is no cluster to fail"
            " over to",
        ),
        (
            "{name: a, groups: [g], topics: [x], preferred: east, auto_failover: maybe}",
            "applications[0].auto_failover: must be true or false (got 'maybe')",
        ),
    ],
)
def test_application_rules(application: str, expected: str) -> None:
    assert problems(TWO + f"applications: [{application}]\n") == [expected]


IDENTITY_WHY = (
    "no offset on one cluster corresponds to a position on the other, so exact failover is"
    " impossible; identity is allowed only for one-way flows (migration, active/passive)"
)


@pytest.mark.parametrize(
    ("flows", "expected"),
    [
        ("[{source: a, target: b, policy: identity}]", None),
        ("[{source: a, target: b, policy: identity}, {source: b, target: c}]", None),
        (
            "[{source: a, target: b, policy: identity}, {source: b, target: a, policy: identity}]",
            "flows[0].policy: identity flow a->b has a way back (b -> a)",
        ),
        (
            "[{source: a, target: b, policy: identity}, {source: b, target: a}]",
            "flows[0].policy: identity flow a->b has a way back (b -> a)",
        ),
        (
            "[{source: a, target: c, policy: identity}, {source: b, target: c}]",
            "flows[0].policy: identity flow a->c shares its target with flows[1] (b->c)",
        ),
        (
            "[{source: a, target: b, policy: identity}, {source: b, target: c},"
            " {source: c, target: a}]",
            "flows[0].policy: identity flow a->b has a way back (b -> c -> a)",
        ),
        (
            "[{source: a, target: b, policy: identity},"
            " {source: b, target: a, policy: identity, standby: true}]",
            None,
        ),
        (
            "[{source: a, target: b, policy: identity, standby: true},"
            " {source: b, target: a, policy: identity, standby: true}]",
            "flows[0].policy: identity flow a->b has a way back (b -> a)",
        ),
        (
            "[{source: a, target: b, policy: identity},"
            " {source: b, target: a, policy: identity, standby: true},"
            " {source: b, target: c}, {source: c, target: a}]",
            "flows[0].policy: identity flow a->b has a way back (b -> a)",
        ),
    ],
)
def test_identity_only_for_one_way_flows(flows: str, expected: str | None) -> None:
    text = f"name: t\nclusters: {{a: {{}}, b: {{}}, c: {{}}}}\nflows: {flows}\n"
    if expected is None:
        assert load(text).flows[0].policy == "identity"
        return
    found = problems(text)
    assert found[0].startswith(expected)
    assert found[0].endswith(IDENTITY_WHY)


@pytest.mark.parametrize(
    "flows",
    [
        "[{source: a, target: b, standby: true}]",
        "[{source: a, target: b, policy: identity, standby: true}]",
        "[{source: a, target: b}, {source: b, target: a, policy: identity, standby: true}]",
    ],
)
def test_standby_only_as_the_way_back_of_an_identity_flow(flows: str) -> None:
    text = f"name: t\nclusters: {{a: {{}}, b: {{}}}}\nflows: {flows}\n"
    assert any(".standby: flow" in p and "can only stand by" in p for p in problems(text))


def test_prefix_flows_must_share_one_separator() -> None:
    found = problems(
        TWO + "flows: [{source: east, target: west}, {source: west, target: east, separator: _}]\n"
    )
    assert found == [
        "flows[1].separator: '_' differs from '.' in flows[0]; all prefix flows must share one"
        " separator, or a flow would not recognise topics another flow copied and could loop"
    ]


def test_a_shared_custom_separator_is_used_by_the_policy() -> None:
    topology = load(
        TWO + "flows: [{source: east, target: west, separator: _},"
        " {source: west, target: east, separator: _}]\n"
    )
    verdict = topology.topic_verdict(topology.flows[0], "orders.v2")
    assert verdict.target_topic == "east_orders.v2"
    assert not topology.topic_verdict(topology.flows[0], "west_orders").replicate


def test_aliases_must_not_contain_the_separator() -> None:
    found = problems(
        "name: t\nclusters: {us.east: {}, west: {}}\nflows: [{source: us.east, target: west}]\n"
    )
    assert found == [
        "flows[0].separator: cluster alias 'us.east' contains the separator '.', so remote topic"
        " names would be ambiguous; rename the cluster or choose another separator"
    ]


@pytest.mark.parametrize(
    ("internal", "expected"),
    [
        ("{offset_syncs: syncs}", "internal_topics: offset_syncs: 'syncs' must contain {source}"),
        ("{heartbeats: __hb}", "internal_topics: heartbeats: '__hb' looks like an internal topic"),
        ("{checkpoints: 'c {source}'}", "internal_topics: checkpoints: 'c {source}' does not"),
    ],
)
def test_internal_topic_names_are_checked(internal: str, expected: str) -> None:
    found = problems(TWO + f"internal_topics: {internal}\n")
    assert len(found) == 1 and found[0].startswith(expected)


def test_custom_internal_topic_names_are_used() -> None:
    topology = load(
        TWO
        + "internal_topics: {heartbeats: hb, offset_syncs: 'ops.syncs.{source}'}\n"
        + "flows: [{source: east, target: west}]\n"
    )
    names = topology.internal_names()
    assert names.offset_syncs_topic("east") == "ops.syncs.east"
    assert names.checkpoints_topic("east") == "east.checkpoints.internal"
    flow = topology.flows[0]
    assert topology.topic_verdict(flow, "hb").target_topic == "east.hb"
    assert not topology.topic_verdict(flow, "ops.syncs.south").replicate


# -- start positions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "kind", "millis"),
    [
        ("earliest", "earliest", None),
        ("latest", "latest", None),
        ("{timestamp: 1700000000000}", "timestamp", 1_700_000_000_000),
        ("{timestamp: '1700000000000'}", "timestamp", 1_700_000_000_000),
        ("{timestamp: '2024-01-01T00:00:00Z'}", "timestamp", 1_704_067_200_000),
        ("{timestamp: '2024-01-01T02:00:00+02:00'}", "timestamp", 1_704_067_200_000),
        # Unquoted, YAML itself turns this into a datetime.
        ("{timestamp: 2024-01-01T00:00:00Z}", "timestamp", 1_704_067_200_000),
    ],
)
def test_start_positions(start: str, kind: str, millis: int | None) -> None:
    flow = load(TWO + f"flows: [{{source: east, target: west, start: {start}}}]\n").flows[0]
    assert flow.start.kind == kind
    assert flow.start.timestamp_ms == millis


def test_start_describes_itself_in_utc() -> None:
    flow = load(TWO + "flows: [{source: east, target: west, start: {timestamp: 0}}]\n").flows[0]
    assert flow.start.describe() == "timestamp 1970-01-01T00:00:00+00:00"


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (
            "middle",
            "must be earliest, latest or {timestamp: <ISO-8601 or epoch ms>} (got 'middle')",
        ),
        ("{timestamp: '2024-01-01T00:00:00'}", "has no UTC offset"),
        ("{timestamp: 2024-01-01}", "has no time; give a time and a UTC offset"),
        ("{timestamp: -5}", "must not be negative"),
        ("{timestamp: true}", "must be ISO-8601 or epoch milliseconds (got True)"),
        ("{timestamp: yesterday}", "must be ISO-8601 or epoch milliseconds (got 'yesterday')"),
        ("{timestamp: 5, offset: 3}", "unknown key 'offset'"),
        ("{}", "expected {timestamp: <ISO-8601 or epoch ms>}"),
    ],
)
def test_bad_start_positions(start: str, expected: str) -> None:
    found = problems(TWO + f"flows: [{{source: east, target: west, start: {start}}}]\n")
    assert len(found) == 1
    assert found[0].startswith("flows[0].start: ")
    assert expected in found[0]


# -- security and client configuration ----------------------------------------------------------

SECURE = """
name: t
clusters:
  east:
    bootstrap_servers: "b1:9093,b2:9093"
    security:
      protocol: SASL_SSL
      tls: {ca_file: certs/ca.pem}
      sasl: {mechanism: SCRAM-SHA-512, username_env: EAST_USER, password_file: secrets/east.pw}
  west:
    security:
      protocol: SSL
      tls: {ca_file: /abs/ca.pem, cert_file: c.pem, key_file: k.pem, key_password_env: KEY_PW}
"""


def test_plaintext_client_config() -> None:
    cluster = load(DESIGN_SHAPE).cluster("east")
    assert cluster.client_config(env={}) == {
        "bootstrap.servers": "127.0.0.1:19092",
        "security.protocol": "PLAINTEXT",
    }
    assert cluster.client_config("127.0.0.1:29092", env={})["bootstrap.servers"] == (
        "127.0.0.1:29092"
    )


def test_missing_bootstrap_names_the_cluster() -> None:
    with pytest.raises(ConfigError, match="cluster 'west': no bootstrap_servers"):
        load(DESIGN_SHAPE).cluster("west").client_config(env={})


def test_secrets_are_read_when_the_client_is_built(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.pem").write_text("CA")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "east.pw").write_text("s3cret\n")
    file = tmp_path / "secure.yaml"
    file.write_text(SECURE)
    # Loading needs neither the variables nor the files.
    topology = load_topology(file, env={})
    east = topology.cluster("east")
    assert east.security.tls is not None
    assert east.security.tls.ca_file == tmp_path / "certs" / "ca.pem"
    with pytest.raises(ConfigError, match="cluster 'east': environment variable EAST_USER"):
        east.client_config(env={})
    assert east.client_config(env={"EAST_USER": "drsvc"}) == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(tmp_path / "certs" / "ca.pem"),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "drsvc",
        "sasl.password": "s3cret",
    }
    (tmp_path / "secrets" / "east.pw").write_text("rotated")
    assert east.client_config(env={"EAST_USER": "drsvc"})["sasl.password"] == "rotated"


def test_missing_secret_files_and_variables_are_named(tmp_path: Path) -> None:
    file = tmp_path / "secure.yaml"
    file.write_text(SECURE)
    topology = load_topology(file, env={})
    with pytest.raises(ConfigError, match=r"cluster 'east': security.tls.ca_file: no such file"):
        topology.cluster("east").client_config(env={"EAST_USER": "u"})
    west = topology.cluster("west")
    assert west.security.tls is not None
    assert west.security.tls.ca_file == Path("/abs/ca.pem")
    (tmp_path / "c.pem").write_text("C")
    (tmp_path / "k.pem").write_text("K")
    with pytest.raises(
        ConfigError, match=r"cluster 'west': security\.tls\.ca_file: no such file: /abs/ca\.pem"
    ):
        west.client_config("w:9093", env={})


def test_empty_secret_variable_is_an_error(tmp_path: Path) -> None:
    topology = load(
        """
        name: t
        clusters:
          east:
            bootstrap_servers: "b:9092"
            security:
              protocol: SASL_PLAINTEXT
              sasl: {mechanism: PLAIN, username: u, password_env: EAST_PW}
        """
    )
    east = topology.cluster("east")
    with pytest.raises(
        ConfigError,
        match=r"environment variable EAST_PW \(named by security\.sasl\.password_env\) is empty",
    ):
        east.client_config(env={"EAST_PW": ""})
    with pytest.raises(
        ConfigError, match=r"environment variable EAST_PW \(named by .*\) is not set"
    ):
        east.client_config(env={})
    assert east.client_config(env={"EAST_PW": "pw"})["sasl.password"] == "pw"


@pytest.mark.parametrize(
    ("security", "expected"),
    [
        (
            "{protocol: SASL_SSL}",
            "clusters.east.security: protocol SASL_SSL needs a sasl block",
        ),
        (
            "{protocol: PLAINTEXT, tls: {ca_file: ca.pem}}",
            "clusters.east.security: a tls block is set but protocol is PLAINTEXT",
        ),
        (
            "{protocol: SSL, sasl: {mechanism: PLAIN, username: u, password_env: P}}",
            "clusters.east.security: a sasl block is set but protocol is SSL",
        ),
        (
            "{protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u, password: pw}}",
            "clusters.east.security.sasl: unknown key 'password' (did you mean 'password_env'?)",
        ),
        (
            "{protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u, username_env: U,"
            " password_env: P}}",
            "clusters.east.security.sasl: give exactly one of username or username_env",
        ),
        (
            "{protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u}}",
            "clusters.east.security.sasl: give exactly one of password_env or password_file",
        ),
        (
            "{protocol: SASL_SSL, sasl: {mechanism: GSSAPI, username: u, password_env: P}}",
            "clusters.east.security.sasl.mechanism: must be one of PLAIN, SCRAM-SHA-256,"
            " SCRAM-SHA-512 (got 'GSSAPI')",
        ),
        (
            "{protocol: SSL, tls: {cert_file: c.pem}}",
            "clusters.east.security.tls: cert_file and key_file go together",
        ),
        (
            "{protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u, password_env: 'my-pw'}}",
            "clusters.east.security.sasl.password_env: must be the name of an environment variable",
        ),
        (
            "{protocol: TLS}",
            "clusters.east.security.protocol: must be one of PLAINTEXT, SSL, SASL_PLAINTEXT,"
            " SASL_SSL (got 'TLS')",
        ),
    ],
)
def test_security_rules(security: str, expected: str) -> None:
    found = problems(f"name: t\nclusters:\n  east: {{security: {security}}}\n")
    assert len(found) == 1
    assert found[0].startswith(expected)


# -- files, YAML and interpolation --------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError) as caught:
        load_topology(tmp_path / "nope.yaml")
    assert str(caught.value) == f"invalid topology {tmp_path / 'nope.yaml'}:\n  - file not found"


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="is a directory"):
        load_topology(tmp_path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "file is empty; expected a mapping with name, clusters"),
        ("# only a comment\n", "file is empty; expected a mapping with name, clusters"),
        ("- east\n- west\n", "top level must be a mapping with name, clusters, flows (got a list)"),
        ("just words\n", "top level must be a mapping with name, clusters, flows (got str)"),
        (
            "name: t\nclusters: {east: {}\n  west: 1\n",
            "line 3, column 3: YAML syntax error: expected ',' or '}', but got '<scalar>'",
        ),
        (
            "name: t\nclusters:\n  east: {}\n  east: {}\n",
            "line 4, column 3: YAML syntax error: duplicate key 'east' (first at line 3)",
        ),
    ],
)
def test_bad_yaml(text: str, expected: str) -> None:
    assert problems(text) == [expected]


def test_environment_interpolation() -> None:
    text = """
    name: t
    clusters:
      east: {bootstrap_servers: "${EAST_BOOTSTRAP}"}
      west: {bootstrap_servers: "${WEST_BOOTSTRAP:-127.0.0.1:9092}"}
      south: {bootstrap_servers: "${SOUTH_HOST:-localhost}:${SOUTH_PORT}"}
    """
    env = {"EAST_BOOTSTRAP": "e:1", "SOUTH_HOST": "", "SOUTH_PORT": "3"}
    topology = load(text, env)
    assert topology.cluster("east").bootstrap_servers == "e:1"
    assert topology.cluster("west").bootstrap_servers == "127.0.0.1:9092"
    assert topology.cluster("south").bootstrap_servers == "localhost:3"


def test_unset_variables_are_all_reported_with_their_field() -> None:
    text = """
    name: t
    clusters:
      east: {bootstrap_servers: "${EAST_BOOTSTRAP}"}
      west: {bootstrap_servers: "a${"}
    flows:
      - {source: east, target: west, topics: {exclude: ["${NOPE}", "${1BAD}"]}}
    """
    assert problems(text) == [
        "clusters.east.bootstrap_servers: environment variable EAST_BOOTSTRAP is not set and"
        " ${EAST_BOOTSTRAP} gives no default (write ${EAST_BOOTSTRAP:-default} to give one)",
        "clusters.west.bootstrap_servers: '${' without a closing '}' in 'a${'",
        "flows[0].topics.exclude[0]: environment variable NOPE is not set and ${NOPE} gives no"
        " default (write ${NOPE:-default} to give one)",
        "flows[0].topics.exclude[1]: bad reference '${1BAD}'; write ${NAME} or ${NAME:-default}",
    ]


def test_dollar_dollar_brace_is_a_literal() -> None:
    topology = load(TWO + "flows: [{source: east, target: west, topics: {exclude: ['x$${y}']}}]\n")
    assert topology.flows[0].topics.exclude == ("x${y}",)


@given(st.text(alphabet=st.characters(blacklist_characters="$"), max_size=30))
def test_text_without_dollar_is_untouched(text: str) -> None:
    problems_found: list[str] = []
    assert _interpolate_string(text, "f", {}, problems_found) == text
    assert problems_found == []


@given(
    name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True),
    value=st.text(max_size=20),
    before=st.text(alphabet="abc:/ ", max_size=5),
    after=st.text(alphabet="abc:/ ", max_size=5),
)
def test_references_are_replaced_by_their_value(
    name: str, value: str, before: str, after: str
) -> None:
    problems_found: list[str] = []
    result = _interpolate_string(f"{before}${{{name}}}{after}", "f", {name: value}, problems_found)
    assert result == f"{before}{value}{after}"
    assert problems_found == []


# -- group offset sync and the unknown-translation policy -----------------------------------------


def test_group_offset_sync_is_opt_in_and_unknown_translations_are_refused_by_default() -> None:
    app = load(DESIGN_SHAPE).applications[0]
    assert app.sync_group_offsets is False
    assert app.on_unknown_translation == "refuse"


def test_example_topologies_show_the_group_sync_fields() -> None:
    active = load_topology(EXAMPLES / "active-active.yaml", env={}).application("orders-service")
    assert (active.sync_group_offsets, active.on_unknown_translation) == (True, "refuse")
    billing = load_topology(EXAMPLES / "active-passive.yaml", env={}).application("billing")
    assert (billing.sync_group_offsets, billing.on_unknown_translation) == (True, "earliest")


def test_group_sync_fields_are_described() -> None:
    topology = load(
        TWO
        + "flows: [{source: east, target: west}]\n"
        + "applications: [{name: a, groups: [g], topics: [x], preferred: east,"
        + " sync_group_offsets: true, on_unknown_translation: earliest}]\n"
    )
    (described,) = describe_topology(topology)["applications"]
    assert described["sync_group_offsets"] is True
    assert described["on_unknown_translation"] == "earliest"


@pytest.mark.parametrize(
    ("application", "expected"),
    [
        (
            "{name: a, groups: [g], topics: [x], preferred: east, on_unknown_translation: latest}",
            "applications[0].on_unknown_translation: application 'a': must be earliest (start at"
            " the earliest offset retained on the target) or refuse (leave the group alone, refuse"
            " the failover); the consumers' auto.offset.reset is never used (got 'latest')",
        ),
        (
            "{name: a, groups: [g], topics: [x], preferred: east, sync_group_offsets: maybe}",
            "applications[0].sync_group_offsets: application 'a': must be true or false"
            " (got 'maybe')",
        ),
        (
            "{name: a, groups: [g], topics: [x], preferred: west, sync_group_offsets: true}",
            "applications[0].sync_group_offsets: application 'a': no flow leaves 'west', so no"
            " cluster receives its groups' offsets",
        ),
        (
            "{name: a, groups: [g, tmp-g], topics: [x], preferred: east, sync_group_offsets: yes}",
            "applications[0].sync_group_offsets: application 'a': group 'tmp-g' is excluded by the"
            " groups filter of every flow leaving 'east' (east->west), so its offsets would never"
            " be synced",
        ),
    ],
)
def test_group_sync_rules(application: str, expected: str) -> None:
    flows = "flows: [{source: east, target: west, groups: {exclude: ['tmp-.*']}}]\n"
    assert problems(TWO + flows + f"applications: [{application}]\n") == [expected]


def test_group_sync_values_from_the_environment_are_accepted() -> None:
    topology = load(
        TWO
        + "flows: [{source: east, target: west}]\n"
        + "applications: [{name: a, groups: [g], topics: [x], preferred: east,"
        + " sync_group_offsets: '${SYNC}', on_unknown_translation: '${IF_UNKNOWN}'}]\n",
        env={"SYNC": "true", "IF_UNKNOWN": "earliest"},
    )
    app = topology.applications[0]
    assert (app.sync_group_offsets, app.on_unknown_translation) == (True, "earliest")
