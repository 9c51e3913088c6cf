# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of the rest of the binding: names and symbolize, unwind kinds,
backtraces, backend probes and reasons, the trap fill, the package's
version and type information.

Run by pytest, or as a script by tests/python-binding.sh (exit 0, 1, or 77
when there is no executable memory here)."""

import ctypes
import errno
import os
import re
import subprocess
import sys
import tempfile
import unittest

import execpack
import support

# mov eax, 42; ret
FORTY_TWO = bytes([0xB8, 0x2A, 0x00, 0x00, 0x00, 0xC3])
ADD = bytes([0x8D, 0x04, 0x37, 0xC3])


def header_version():
    path = os.environ.get("EXECPACK_HEADER")
    if not path:
        return None
    with open(path) as f:
        text = f.read()
    parts = [re.search(r"#define EP_VERSION_%s (\d+)" % k, text).group(1)
             for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


class PackageTest(unittest.TestCase):
    def test_version(self):
        self.assertRegex(execpack.__version__, r"^\d+\.\d+\.\d+$")
        self.assertRegex(execpack.version(), r"^\d+\.\d+\.\d+$")
        want = header_version()
        if want is not None:
            self.assertEqual(execpack.__version__, want, "the package follows execpack.h")
            self.assertEqual(execpack.version(), want, "the library under test is this one")

    def test_typed(self):
        pkg = os.path.dirname(os.path.abspath(execpack.__file__))
        self.assertTrue(os.path.isfile(os.path.join(pkg, "py.typed")),
                        "PEP 561 marker installed with the package")

    def test_all(self):
        for name in execpack.__all__:
            self.assertTrue(hasattr(execpack, name), name)


class NamesTest(unittest.TestCase):
    def setUp(self):
        self.pool = execpack.Pool()

    def tearDown(self):
        self.pool.close()

    def test_set_name_and_symbolize(self):
        f = self.pool.load(FORTY_TWO)
        self.assertIsNone(execpack.symbolize(f.address), "not named yet")
        self.pool.set_name(f, "jit_forty_two")
        self.assertEqual(execpack.symbolize(f.address), ("jit_forty_two", 0))
        self.assertEqual(execpack.symbolize(f.address + 5), ("jit_forty_two", 5))
        self.assertEqual(execpack.symbolize(f), ("jit_forty_two", 0))
        self.pool.set_name(f, "renamed")
        self.assertEqual(execpack.symbolize(f.address + 1), ("renamed", 1))
        self.assertEqual(f(), 42)
        addr = f.address
        self.pool.free(f)
        self.assertIsNone(execpack.symbolize(addr), "freed code has no name")

    def test_name_by_image_and_address(self):
        img = self.pool.alloc(len(ADD))
        ctypes.memmove(img.rw, ADD, len(ADD))
        self.pool.set_name(img, "by_image")
        self.pool.finalize(img)
        self.assertEqual(execpack.symbolize(img.exec + 2), ("by_image", 2))
        self.pool.set_name(img.exec, "by_address")
        self.assertEqual(execpack.symbolize(img.exec), ("by_address", 0))
        self.pool.free(img)

    def test_name_limits(self):
        f = self.pool.load(FORTY_TWO)
        longest = "n" * execpack.NAME_MAX
        self.pool.set_name(f, longest)
        self.assertEqual(execpack.symbolize(f.address), (longest, 0))
        with self.assertRaises(ValueError):
            self.pool.set_name(f, "n" * (execpack.NAME_MAX + 1))
        with self.assertRaises(ValueError):
            self.pool.set_name(f, "a\0b")
        with self.assertRaises(OSError) as cm:
            self.pool.set_name(f, "")
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(OSError) as cm:
            self.pool.set_name(f.address + 1, "inside")  # not the start
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.pool.free(f)
        with self.assertRaises(OSError) as cm:
            self.pool.set_name(f, "freed")
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_symbolize_bad_addresses(self):
        self.assertIsNone(execpack.symbolize(0))
        self.assertIsNone(execpack.symbolize(id(self)))
        with self.assertRaises(ValueError):
            execpack.symbolize(-1)
        with self.assertRaises(OverflowError):
            execpack.symbolize(1 << (8 * ctypes.sizeof(ctypes.c_void_p)))
        with self.assertRaises(TypeError):
            execpack.symbolize("0x1000")

    def test_set_unwind(self):
        f = self.pool.load(FORTY_TWO)
        self.pool.set_unwind(f, execpack.UNWIND_NAME)
        for kind, args in ((execpack.UNWIND_DWARF_FP, (0, 0)),
                           (execpack.UNWIND_DWARF_SP, (4, 8))):
            try:
                self.pool.set_unwind(f, kind, *args)
            except OSError as e:
                # a library built without libunwind says so, nothing else
                self.assertEqual(e.errno, errno.EOPNOTSUPP)
        with self.assertRaises(OSError) as cm:
            self.pool.set_unwind(f, 99)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(ValueError):
            self.pool.set_unwind(f, -1)
        self.pool.free(f)


class BacktraceTest(unittest.TestCase):
    def test_backtrace_to_a_file(self):
        with tempfile.TemporaryFile() as out:
            n = execpack.backtrace(out)
            self.assertGreater(n, 0)
            out.seek(0)
            text = out.read().decode(errors="replace")
        self.assertEqual(len([line for line in text.splitlines() if line.strip()]), n,
                         "one line per frame: %r" % text)

    def test_backtrace_bad_fd(self):
        with self.assertRaises(ValueError):
            execpack.backtrace(-1)
        with self.assertRaises(TypeError):
            execpack.backtrace("2")


class BackendTest(unittest.TestCase):
    def test_probe_auto_names_what_pool_takes(self):
        rc, why = execpack.probe("auto")
        self.assertEqual(rc, 0, why)
        with execpack.Pool() as pool:
            self.assertEqual(why, pool.backend)

    def test_probe_memfd(self):
        rc, why = execpack.probe("memfd")
        self.assertEqual(rc, 0, why)
        with execpack.Pool("memfd") as pool:
            self.assertEqual(pool.backend, "memfd")

    def test_probe_missing_device(self):
        rc, why = execpack.probe("kmod", path="/nonexistent/execpack")
        self.assertEqual(rc, -errno.ENOENT)
        self.assertIn("kmod", why)

    def test_probe_bad_config(self):
        rc, why = execpack.probe("memfd", pack_size=12345)
        self.assertEqual(rc, -errno.EINVAL, why)
        with self.assertRaises(ValueError):
            execpack.probe("nosuch")
        with self.assertRaises(ValueError):
            execpack.probe("memfd", limit=-1)

    def test_reasons(self):
        with execpack.Pool("memfd") as pool:
            self.assertEqual(pool.reasons, "", "asked for explicitly: nothing passed over")
        with execpack.Pool("auto") as pool:
            for part in filter(None, pool.reasons.split("; ")):
                self.assertRegex(part, r"^(memfd|hugetlb|kmod): .+")
                self.assertFalse(part.startswith(pool.backend + ":"))
        with self.assertRaises(OSError):
            pool.reasons

    def test_guards(self):
        """pool.guards: the GUARD_* bits and a reason for each guard not in
        force; F_NO_PKEY takes the key away and says so."""
        with execpack.Pool("memfd") as pool:
            bits, why = pool.guards
            self.assertEqual(bits & ~(execpack.GUARD_PKEY | execpack.GUARD_BTI), 0)
            self.assertEqual(bool(bits & execpack.GUARD_PKEY), "pkey:" not in why, why)
            self.assertEqual(bool(bits & execpack.GUARD_BTI), "bti:" not in why, why)
        with execpack.Pool("memfd", flags=execpack.F_NO_PKEY) as pool:
            bits, why = pool.guards
            self.assertFalse(bits & execpack.GUARD_PKEY)
            self.assertIn("pkey: turned off by EP_F_NO_PKEY", why)
        with self.assertRaises(OSError):
            pool.guards


class FillTest(unittest.TestCase):
    def test_fill(self):
        buf = bytearray(b"\x90" * 100)
        execpack.fill_x86_int3(memoryview(buf)[10:90])
        self.assertEqual(bytes(buf), b"\x90" * 10 + b"\xcc" * 80 + b"\x90" * 10)
        arr = (ctypes.c_uint8 * 8)()
        execpack.fill_x86_int3(arr)
        self.assertEqual(bytes(arr), b"\xcc" * 8)
        execpack.fill_x86_int3(bytearray())
        with self.assertRaises(TypeError):
            execpack.fill_x86_int3(b"read-only")


class TypesTest(unittest.TestCase):
    def test_mypy_strict(self):
        """mypy --strict finds nothing in the package, when mypy is here."""
        try:
            import mypy.api
        except ImportError:
            self.skipTest("mypy is not installed")
        pkg = os.path.dirname(os.path.abspath(execpack.__file__))
        out, err, rc = mypy.api.run(["--strict", "--no-incremental",
                                     "--cache-dir", os.devnull, pkg])
        self.assertEqual(rc, 0, out + err)

    def test_typed_results(self):
        """mypy --strict infers what JitFunction calls return from the
        restype given to Pool.load() (typing_results.py), when mypy is here."""
        try:
            import mypy.api
        except ImportError:
            self.skipTest("mypy is not installed")
        pkg = os.path.dirname(os.path.abspath(execpack.__file__))
        check = os.path.join(os.path.dirname(os.path.abspath(__file__)), "typing_results.py")
        out, err, rc = mypy.api.run(["--strict", "--no-incremental",
                                     "--cache-dir", os.devnull, pkg, check])
        self.assertEqual(rc, 0, out + err)


if __name__ == "__main__":
    sys.exit(support.main())
