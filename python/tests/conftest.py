# SPDX-License-Identifier: LGPL-2.1-or-later
"""pytest's setup for the binding's tests (python3 -m pytest python/tests,
pybuild's test step, tests/check-debian.sh): one check per session that
executable memory can be had here, which skips every test, as the scripts'
exit 77 does (support.main()), where it cannot."""

import execpack
import pytest

import support


@pytest.fixture(scope="session", autouse=True)
def executable_memory() -> None:
    why = support.no_executable_memory()
    if why is not None:
        pytest.skip(why)


def pytest_report_header() -> str:
    """What test_execpack.py prints first as a script: the library and
    backend under test."""
    if support.no_executable_memory() is not None:
        return "libexecpack %s: no executable memory here" % execpack.version()
    return support.banner()
