"""One error tree for the pure core: every exception ``failover`` defines is rooted in
:class:`failover.errors.CoreError` and defined in ``failover/errors.py``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import failover
from failover import errors


def test_every_error_of_the_core_is_in_the_tree_and_still_a_value_error() -> None:
    found: set[type[BaseException]] = set()
    for module_info in pkgutil.iter_modules(failover.__path__, "failover."):
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("failover"):
                found.add(value)
    assert found, "no errors found: the scan is broken"
    for error in found:
        assert error.__module__ == errors.__name__, f"{error.__qualname__} is defined elsewhere"
        assert issubclass(error, errors.CoreError) and issubclass(error, ValueError)
