"""Errors of the pure core.

``failover`` cannot import ``drsvc`` (dependencies point one way), so it has its own small
hierarchy. Every error here is also a :class:`ValueError`: they all mean "this input breaks a
rule", which lets pydantic validators in the service raise them directly and report them under the
field that was wrong::

    CoreError                 base of every error raised on purpose by ``failover``
    ├── PolicyError           a replication-policy or topic-naming rule is broken
    └── PatternError          an include/exclude regular expression does not compile

The service wraps them into :class:`drsvc.errors.ConfigError` where it turns input into effects.
"""

from __future__ import annotations


class CoreError(ValueError):
    """Base of the errors raised on purpose by the pure core."""


class PolicyError(CoreError):
    """A cluster alias, separator or topic name breaks a naming rule.

    Examples: an alias containing the separator, a remote topic name longer than Kafka allows,
    a topic name with characters outside ``[a-zA-Z0-9._-]``.
    """


class PatternError(CoreError):
    """An include/exclude pattern is not a valid Python regular expression."""

    def __init__(self, pattern: str, reason: str) -> None:
        self.pattern = pattern
        self.reason = reason
        super().__init__(f"invalid regex {pattern!r}: {reason}")
