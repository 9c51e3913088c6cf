# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of patch windows (Pool.patch(), execpack.Window) and
execpack.lookup().

Run by pytest, or as a script by tests/python-binding.sh (exit 0, 1, or 77
when there is no executable memory here)."""

import ctypes
import errno
import gc
import platform
import sys
import unittest

import execpack
import support


def ret_imm(value: int) -> bytes:
    """mov eax, imm32; ret"""
    return bytes([0xB8]) + value.to_bytes(4, "little") + bytes([0xC3])


def x86_only(test: unittest.TestCase) -> None:
    if platform.machine() not in ("x86_64", "AMD64"):
        test.skipTest("x86-64 code: %s" % platform.machine())


class PatchTest(unittest.TestCase):
    def setUp(self) -> None:
        x86_only(self)
        self.pool = execpack.Pool("memfd")

    def tearDown(self) -> None:
        self.pool.close()

    def test_commit_in_with_block(self) -> None:
        f = self.pool.load(ret_imm(1))
        self.assertEqual(f(), 1)
        with self.pool.patch(f, 1, 4) as w:
            self.assertEqual(bytes(w.buffer), (1).to_bytes(4, "little"))
            w.buffer[:] = (2).to_bytes(4, "little")
            self.assertEqual(f(), 1)  # not before the block ends
        self.assertEqual(f(), 2)
        self.assertFalse(w.open)
        self.assertRaises(ValueError, lambda: w.buffer)
        with self.assertRaises(OSError) as cm:
            w.commit()
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_abort_on_exception(self) -> None:
        f = self.pool.load(ret_imm(1))
        with self.assertRaises(RuntimeError):
            with self.pool.patch(f) as w:
                w.buffer[1:5] = (3).to_bytes(4, "little")
                raise RuntimeError("the emitter failed")
        self.assertEqual(f(), 1)
        w = self.pool.patch(f)
        w.buffer[1:5] = (4).to_bytes(4, "little")
        w.abort()
        self.assertEqual(f(), 1)

    def test_errors(self) -> None:
        f = self.pool.load(ret_imm(1))
        w = self.pool.patch(f, 0, 6)
        with self.assertRaises(OSError) as cm:
            self.pool.patch(f, 1, 2)
        self.assertEqual(cm.exception.errno, errno.EBUSY)
        w.abort()
        img = self.pool.alloc(64)
        with self.assertRaises(OSError) as cm:
            self.pool.patch(img, 0, 8)  # not finalized
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(OSError) as cm:
            self.pool.patch(f, 0, 65)  # past the end of its 64 bytes
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(OSError) as cm:
            self.pool.patch(f, 0, 0)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        # freeing closes the window
        w = self.pool.patch(f, 0, 6)
        self.pool.free(f)
        self.assertRaises(OSError, w.commit)
        self.assertIsNone(execpack.lookup(w.exec))

    def test_free_closes_window(self) -> None:
        f = self.pool.load(ret_imm(1))
        w = self.pool.patch(f, 1, 4)
        w.buffer[:] = (2).to_bytes(4, "little")
        self.pool.free(f)
        self.assertFalse(w.open)
        self.assertIn("closed", repr(w))
        self.assertRaises(ValueError, lambda: w.buffer)
        with self.assertRaises(OSError) as cm:
            w.commit()
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        w.abort()  # nothing: the free closed it
        # the address is another program's, with a window of its own: the
        # old Window, ended or collected, never touches it
        g = self.pool.load(ret_imm(3))
        self.assertEqual(g.address, f.address)  # (the chunk freed first is reused)
        w2 = self.pool.patch(g, 1, 4)
        w.abort()
        self.assertRaises(OSError, w.commit)
        del w
        gc.collect()
        info = execpack.lookup(g)
        assert info is not None
        self.assertEqual((info.patch_exec, info.patch_len), (g.address + 1, 4))
        w2.buffer[:] = (4).to_bytes(4, "little")
        w2.commit()
        self.assertEqual(g(), 4)

    def test_free_closes_window_on_bare_address(self) -> None:
        # a window opened by an address inside the code
        f = self.pool.load(ret_imm(1))
        w = self.pool.patch(f.address + 1, 0, 4)
        self.pool.free(f.address)
        self.assertFalse(w.open)
        w.abort()
        # ... and on code that no object of the binding holds any more
        g = self.pool.load(ret_imm(2))
        addr = g.address
        del g
        gc.collect()
        w = self.pool.patch(addr, 1, 4)
        self.assertTrue(w.open)
        self.pool.free(addr)
        self.assertFalse(w.open)
        h = self.pool.load(ret_imm(5))
        self.assertEqual(h.address, addr)
        w2 = self.pool.patch(h, 1, 4)
        w.abort()
        del w
        gc.collect()
        info = execpack.lookup(h)
        assert info is not None
        self.assertEqual(info.patch_exec, addr + 1)
        w2.abort()

    def test_collected_window_aborts(self) -> None:
        f = self.pool.load(ret_imm(1))
        w = self.pool.patch(f, 1, 4)
        w.buffer[:] = (6).to_bytes(4, "little")
        del w
        gc.collect()
        info = execpack.lookup(f)
        assert info is not None
        self.assertEqual(info.patch_len, 0)  # aborted: no window left open
        self.assertEqual(f(), 1)             # and nothing written
        with self.pool.patch(f, 1, 4) as w:  # not EBUSY
            w.buffer[:] = (7).to_bytes(4, "little")
        self.assertEqual(f(), 7)
        # one whose pool was closed first: nothing to abort
        pool = execpack.Pool("memfd")
        g = pool.load(ret_imm(1))
        w = pool.patch(g, 1, 4)
        pool.close()
        self.assertFalse(w.open)
        w.abort()
        del w
        gc.collect()

    def test_lookup(self) -> None:
        f = self.pool.load(ret_imm(5))
        self.pool.set_name(f, "five")
        info = execpack.lookup(f.address + 3)
        assert info is not None
        self.assertEqual(info.exec, f.address)
        self.assertEqual(info.size, 64)
        self.assertEqual(info.name, "five")
        self.assertEqual(info.flags, execpack.INFO_FINALIZED | execpack.INFO_NAMED)
        self.assertEqual(execpack.lookup(f), info)
        img = self.pool.alloc(100)
        info = execpack.lookup(img.rw + 10)
        assert info is not None
        self.assertEqual((info.exec, info.rw, info.flags), (img.exec, img.rw, 0))
        with self.pool.patch(f, 1, 4) as w:
            info = execpack.lookup(f)
            assert info is not None
            self.assertEqual((info.patch_exec, info.patch_len), (f.address + 1, 4))
        self.assertIsNone(execpack.lookup(ctypes.addressof(ctypes.c_int())))
        self.assertRaises(ValueError, execpack.lookup, -1)

    def test_keep_staging(self) -> None:
        with execpack.Pool("memfd", flags=execpack.F_KEEP_STAGING) as pool:
            img = pool.alloc(64)
            img.buffer[:6] = ret_imm(6)
            pool.finalize(img)
            f = execpack.JitFunction(pool, img, ctypes.c_int, ())
            info = execpack.lookup(img.rw)
            assert info is not None
            self.assertEqual((info.exec, info.patch_rw), (img.exec, img.rw))
            with pool.patch(f, 1, 4) as w:
                w.buffer[:] = (7).to_bytes(4, "little")
            self.assertEqual(f(), 7)


if __name__ == "__main__":
    sys.exit(support.main())
