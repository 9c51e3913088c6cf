# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of Pool.load() through ep_add(), Pool.finalize_size()
(ep_finalize_size) and Pool.trim() (ep_pool_trim), and of the staging
buffer lined up with the code (STAGE_ALIGN).

Run by pytest, or as a script by tests/python-binding.sh (exit 0, 1, or 77
when there is no executable memory here)."""

import ctypes
import errno
import sys
import unittest

import execpack
import support

# mov eax, 42; ret
FORTY_TWO = bytes([0xB8, 0x2A, 0x00, 0x00, 0x00, 0xC3])
CHUNK = execpack.CHUNK_SIZE
X86 = ctypes.sizeof(ctypes.c_void_p) == 8 and __import__("platform").machine() in ("x86_64", "AMD64")


class StageTest(unittest.TestCase):
    def setUp(self) -> None:
        self.pool = execpack.Pool("memfd")

    def tearDown(self) -> None:
        self.pool.close()

    def used(self) -> int:
        return self.pool.stats()["used_bytes"]

    def test_stage_aligned(self) -> None:
        imgs = [self.pool.alloc(n) for n in range(1, 3000, 37)]
        for img in imgs:
            self.assertEqual((img.rw - img.exec) % execpack.STAGE_ALIGN, 0, img)
        for img in imgs:
            self.pool.free(img)

    def test_load_is_one_call(self) -> None:
        base = self.used()
        code = FORTY_TWO + b"\x90" * 100
        f = self.pool.load(code)
        self.assertEqual(f.address % execpack.STAGE_ALIGN, 0)
        self.assertEqual(f.size, len(code))
        self.assertEqual(ctypes.string_at(f.address, len(code)), code)
        self.assertEqual(self.used() - base, 2 * CHUNK)
        if X86:
            self.assertEqual(f(), 42)
            # the rest of the last chunk is the trap fill
            self.assertEqual(ctypes.string_at(f.address + len(code), 2 * CHUNK - len(code)),
                             b"\xcc" * (2 * CHUNK - len(code)))
        # finalized already: named and shrunk like any other code
        with self.assertRaises(OSError) as cm:
            self.pool.finalize(f)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.pool.set_name(f, "loaded")
        self.assertEqual(execpack.symbolize(f.address + 3), ("loaded", 3))
        self.pool.shrink(f, CHUNK)
        self.assertEqual(self.used() - base, CHUNK)
        self.pool.free(f)
        self.assertEqual(self.used(), base)

    def test_finalize_size(self) -> None:
        base = self.used()
        img = self.pool.alloc(16 * CHUNK)
        img.buffer[:len(FORTY_TWO)] = FORTY_TWO
        img.buffer[len(FORTY_TWO):] = b"\x90" * (img.size - len(FORTY_TWO))
        self.pool.finalize_size(img, len(FORTY_TWO))
        self.assertEqual(img.size, len(FORTY_TWO))
        self.assertEqual(self.used() - base, CHUNK)
        self.assertEqual(ctypes.string_at(img.exec, len(FORTY_TWO)), FORTY_TWO)
        # only size bytes were copied: the nops stayed behind
        self.assertNotIn(b"\x90", ctypes.string_at(img.exec + len(FORTY_TWO),
                                                   CHUNK - len(FORTY_TWO)))
        if X86:
            f = execpack.JitFunction(self.pool, img, ctypes.c_int, ())
            self.assertEqual(f(), 42)
        for bad in (0, 2 * CHUNK):
            with self.assertRaises(OSError) as cm:
                self.pool.finalize_size(img, bad)
            self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.pool.free(img)
        with self.assertRaises(ValueError):
            img.buffer  # the staging buffer is gone
        self.assertEqual(self.used(), base)

    def test_trim(self) -> None:
        fns = [self.pool.load(FORTY_TWO + b"\x90" * 1000) for _ in range(3000)]
        before = self.pool.stats()
        self.assertGreater(before["pack_bytes"], 2 << 20)
        for f in fns:
            self.pool.free(f)
        self.assertGreater(self.pool.stats()["pack_bytes"], 0, "an empty pack is kept")
        released = self.pool.trim()
        after = self.pool.stats()
        self.assertGreater(released, 0)
        self.assertEqual(after["packs"], 0)
        self.assertEqual(after["pack_bytes"], 0)
        self.assertEqual(self.pool.trim(), 0, "nothing left to give back")
        f = self.pool.load(FORTY_TWO)
        if X86:
            self.assertEqual(f(), 42)
        self.pool.close()
        with self.assertRaises(OSError) as cm:
            self.pool.trim()
        self.assertEqual(cm.exception.errno, errno.EINVAL)


if __name__ == "__main__":
    sys.exit(support.main())
