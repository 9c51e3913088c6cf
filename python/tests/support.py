# SPDX-License-Identifier: LGPL-2.1-or-later
"""What every test file of the binding shares: whether this machine gives
executable memory at all, and the script entry point.

pytest reaches no_executable_memory() through conftest.py's session
fixture; tests/python-binding.sh and tests/check-debian.sh run each test
file as a script (the venv there has no pytest), whose
`sys.exit(support.main())` runs unittest.  Both say SKIP, never FAIL,
where no pool can be made for want of executable memory (a noexec
or SELinux-confined machine)."""

import errno
import sys
import unittest
from typing import Optional

import execpack

# what ep_pool_create() returns where this process may not have executable
# memory, as opposed to a bug
NO_EXEC_ERRNOS = (errno.EACCES, errno.EPERM, errno.ENODEV)


def no_executable_memory() -> Optional[str]:
    """Why no pool can be made here, or None when one can.  Any other
    failure of execpack.Pool() is raised: it is a bug to report."""
    try:
        with execpack.Pool():
            pass
    except OSError as e:
        if e.errno in NO_EXEC_ERRNOS:
            return "no executable memory here: %s" % e
        raise
    return None


def banner() -> str:
    """The library, its default backend and where it was loaded from."""
    with execpack.Pool() as p:
        backend = p.backend
    return "libexecpack %s, backend %s, via %s" % (execpack.version(), backend,
                                                   execpack.library()._name)


def main(show_banner: bool = False) -> int:
    """A test file run as a script: 0 all passed, 1 a failure, 77 (SKIP
    for automake) when there is no executable memory here."""
    why = no_executable_memory()
    if why is not None:
        print("SKIP: %s" % why)
        return 77
    if show_banner:
        print(banner())
    prog = unittest.main(module="__main__", exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit("support.py is imported by the tests, not run")
