# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of what a linking JIT uses: Pool.alloc(size, align)
(ep_alloc_aligned), Pool.alloc_data() (ep_alloc_data), keep_staging() and
release_staging(), finalize_group() and set_symbols().

Run by pytest, or as a script by tests/python-binding.sh (exit 0, 1, or 77
when there is no executable memory here)."""

import ctypes
import errno
import platform
import sys
import unittest

import execpack
import support

X86 = ctypes.sizeof(ctypes.c_void_p) == 8 and platform.machine() in ("x86_64", "AMD64")
# mov eax, 42; ret
FORTY_TWO = bytes([0xB8, 0x2A, 0x00, 0x00, 0x00, 0xC3])


class ModuleTest(unittest.TestCase):
    def setUp(self) -> None:
        self.pool = execpack.Pool("memfd", code_range=64 << 20)

    def tearDown(self) -> None:
        self.pool.close()

    def test_aligned(self) -> None:
        first = self.pool.alloc(64)
        img = self.pool.alloc(100, align=4096)
        self.assertEqual(img.exec % 4096, 0)
        self.assertGreaterEqual(img.size, 100)
        with self.assertRaises(OSError) as cm:
            self.pool.alloc(64, align=3)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.pool.free(img)
        self.pool.free(first)

    def test_data_beside_code(self) -> None:
        code = self.pool.alloc(64)
        ro = self.pool.alloc_data(256, execpack.DATA_RO)
        rw = self.pool.alloc_data(128, execpack.DATA_RW, align=256)
        self.assertEqual(rw.exec % 256, 0)
        ro.buffer[:5] = b"hello"
        rw.buffer[:4] = b"\x01\x02\x03\x04"
        self.pool.finalize_group([code, ro, rw])
        self.assertEqual(ctypes.string_at(ro.exec, 5), b"hello")
        # writable data is written where it lies
        ctypes.memmove(rw.exec, b"\x09", 1)
        self.assertEqual(ctypes.string_at(rw.exec, 4), b"\x09\x02\x03\x04")
        for d in (ro, rw):
            self.assertLess(abs(d.exec - code.exec), 1 << 31)
        with self.assertRaises(OSError) as cm:
            self.pool.alloc_data(64, 3)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        for x in (code, ro, rw):
            self.pool.free(x)

    def test_group_all_or_nothing_input(self) -> None:
        a = self.pool.alloc(64)
        with self.assertRaises(OSError) as cm:
            self.pool.finalize_group([a, a])  # a duplicate
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        # still staged: a plain finalize succeeds once
        self.pool.finalize(a)
        with self.assertRaises(OSError):
            self.pool.finalize_group([a])
        self.pool.free(a)

    def test_kept_staging(self) -> None:
        img = self.pool.alloc(64)
        self.pool.keep_staging(img)
        img.buffer[:len(FORTY_TWO)] = FORTY_TWO
        self.pool.finalize(img)
        # the linker's view still holds what it wrote
        self.assertEqual(bytes(img.buffer[:len(FORTY_TWO)]), FORTY_TWO)
        self.assertEqual(ctypes.string_at(img.rw, len(FORTY_TWO)), FORTY_TWO)
        self.pool.release_staging(img)
        with self.assertRaises(OSError) as cm:
            self.pool.release_staging(img)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        if X86:
            f = ctypes.CFUNCTYPE(ctypes.c_int)(img.exec)
            self.assertEqual(f(), 42)
        self.pool.free(img)

    def test_symbols(self) -> None:
        img = self.pool.alloc(256)
        self.pool.finalize(img)
        self.pool.set_symbols(img, [(0, 64, "first"), (64, 128, b"second")])
        self.assertEqual(execpack.symbolize(img.exec + 70)[0], "second")
        self.assertEqual(execpack.symbolize(img.exec + 3)[0], "first")
        with self.assertRaises(ValueError):
            self.pool.set_symbols(img, [(0, 8, "a\0b")])
        self.pool.free(img)


if __name__ == "__main__":
    sys.exit(support.main())
