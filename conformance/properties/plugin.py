"""Hypothesis profiles and the ``--conformance-replay-dir`` option for the property machines.

Both must exist before pytest parses the command line (hypothesis loads ``--hypothesis-profile NAME`` in its own
``pytest_configure``), so this module is a plugin: loaded by ``conformance/properties/conftest.py`` when pytest is
pointed at ``conformance/properties``, and — for ``pytest conformance --hypothesis-profile thorough`` — by
``pytest_plugins = ["conformance.properties.plugin"]`` in the conformance plugin (or ``-p
conformance.properties.plugin``).

Profiles: ``kct-ci`` (used by the machines unless ``thorough`` is asked for: few examples, short sequences; both
machines run in seconds against the reference broker) and ``thorough`` (long runs).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

CI, THOROUGH = "kct-ci", "thorough"
REPLAY_OPTION = "--conformance-replay-dir"
_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much],
           "print_blob": False}
settings.register_profile(CI, max_examples=50, stateful_step_count=20, database=None, **_COMMON)
settings.register_profile(THOROUGH, max_examples=400, stateful_step_count=50, **_COMMON)


def add_replay_option(parser: pytest.Parser) -> None:
    """Add the option once (the conftest and the plugin may both offer it)."""
    try:
        parser.addoption(REPLAY_OPTION, default=None, metavar="DIR",
                         help="where property machines write replay scripts of shrunk counterexamples "
                              "(default: the test's pytest tmp dir)")
    except ValueError:      # already added by the other of the two
        pass


def pytest_addoption(parser: pytest.Parser) -> None:
    add_replay_option(parser)
