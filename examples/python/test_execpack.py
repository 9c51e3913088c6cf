"""Tests of the ctypes binding (run by tests/python-binding.sh in make check).

Exit status: 0 all passed, 1 a failure, 77 no executable memory here.
EXECPACK_LIBRARY names the library under test; EXECPACK_HEADER, when set,
is include/execpack.h, against which the stats keys are checked.
"""

import ctypes
import errno
import gc
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execpack  # noqa: E402

# lea eax, [rdi + rsi]; ret
ADD = bytes([0x8D, 0x04, 0x37, 0xC3])
# mov eax, 42; ret
FORTY_TWO = bytes([0xB8, 0x2A, 0x00, 0x00, 0x00, 0xC3])
# mov rax, imm64; ret  (the immediate starts at byte 2)
MOV_RAX = bytes([0x48, 0xB8]) + (7).to_bytes(8, "little") + bytes([0xC3])


def header_stats_fields():
    path = os.environ.get("EXECPACK_HEADER")
    if not path:
        return None
    with open(path) as f:
        text = f.read()
    body = re.search(r"struct ep_stats\s*\{(.*?)\};", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return re.findall(r"\b(\w+)\s*;", body)


class BindingTest(unittest.TestCase):
    def setUp(self):
        self.pool = execpack.Pool(backend="auto")

    def tearDown(self):
        self.pool.close()

    def test_add(self):
        add = self.pool.load(ADD, restype=ctypes.c_int, argtypes=(ctypes.c_int, ctypes.c_int))
        self.assertEqual(add(2, 3), 5)
        self.assertEqual(add(-7, 100), 93)
        self.assertEqual(add.address % 16, 0)
        self.pool.free(add)

    def test_defaults_and_void(self):
        f = self.pool.load(FORTY_TWO)  # restype c_int, no arguments
        self.assertEqual(f(), 42)
        g = self.pool.load(FORTY_TWO, restype=None)
        self.assertIsNone(g())
        self.pool.free(f)
        self.pool.free(g)

    def test_stats(self):
        before = self.pool.stats()
        fields = header_stats_fields()
        if fields is not None:
            self.assertEqual(list(before), fields, "keys follow struct ep_stats")
        self.assertEqual(set(before), {"packs", "pack_bytes", "used_bytes", "live_allocs",
                                       "large_allocs", "large_bytes"})
        fns = [self.pool.load(ADD, argtypes=(ctypes.c_int, ctypes.c_int)) for _ in range(10)]
        st = self.pool.stats()
        self.assertEqual(st["live_allocs"], before["live_allocs"] + 10)
        self.assertEqual(st["used_bytes"], before["used_bytes"] + 10 * execpack.CHUNK_SIZE)
        self.assertEqual(before["packs"], 0, "a new pool maps no pack")
        self.assertEqual(st["packs"], 1, "ten programs of 4 bytes share one pack")
        self.assertGreaterEqual(st["pack_bytes"], st["used_bytes"])
        self.assertEqual(st["large_allocs"], 0)
        addrs = sorted(f.address for f in fns)
        self.assertLess(addrs[-1] - addrs[0], st["pack_bytes"])
        for f in fns:
            self.assertEqual(f(20, 22), 42)
            self.pool.free(f)
        self.assertEqual(self.pool.stats()["live_allocs"], before["live_allocs"])
        self.assertEqual(self.pool.stats()["used_bytes"], before["used_bytes"])

    def test_double_free(self):
        f = self.pool.load(FORTY_TWO)
        self.pool.free(f)
        with self.assertRaises(OSError) as cm:
            self.pool.free(f)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.assertIn(execpack.strerror(-errno.EINVAL), str(cm.exception))
        self.assertEqual(cm.exception.strerror.split(": ", 1)[1],
                         execpack.strerror(errno.EINVAL))

    def test_errors_are_oserror(self):
        with self.assertRaises(OSError) as cm:
            self.pool.alloc(0)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(OSError) as cm:
            self.pool.free(0x1000)  # never allocated
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        f = self.pool.load(FORTY_TWO)
        with self.assertRaises(OSError) as cm:
            self.pool.finalize(f)  # already finalized
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(OSError) as cm:
            self.pool.write(f, b"\x90" * 100)  # runs past the allocation
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.pool.free(f)
        with self.assertRaises(OSError) as cm:
            execpack.Pool(backend=99)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(OSError) as cm:
            execpack.Pool(pack_size=12345)  # not a multiple of the page size
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_limit(self):
        with execpack.Pool(limit=execpack.CHUNK_SIZE) as small:
            f = small.load(FORTY_TWO)
            with self.assertRaises(OSError) as cm:
                small.load(FORTY_TWO)
            self.assertEqual(cm.exception.errno, errno.EPERM)
            small.free(f)

    def test_patch_live_code(self):
        f = self.pool.load(MOV_RAX, restype=ctypes.c_uint64)
        self.assertEqual(f(), 7)
        self.pool.write(f, (123456789).to_bytes(8, "little"), offset=2)
        self.assertEqual(f(), 123456789)
        self.pool.free(f)

    def test_alloc_write_finalize(self):
        img = self.pool.alloc(len(FORTY_TWO))
        self.assertGreaterEqual(img.size, len(FORTY_TWO))
        self.pool.write(img, FORTY_TWO)  # into the staging buffer by exec address
        self.pool.finalize(img)
        fn = ctypes.CFUNCTYPE(ctypes.c_int)(img.exec)
        self.assertEqual(fn(), 42)
        self.pool.free(img)

    def test_backend_and_version(self):
        self.assertIn(self.pool.backend, ("memfd", "hugetlb", "kmod"))
        self.assertRegex(execpack.version(), r"^\d+\.\d+\.\d+$")

    def test_context_manager_destroys(self):
        with execpack.Pool() as p:
            f = p.load(FORTY_TWO)
            self.assertEqual(f(), 42)
            self.assertFalse(p.closed)
        self.assertTrue(p.closed)
        # the pool is gone: every call raises OSError(EINVAL), nothing runs
        for call in (lambda: p.stats(), lambda: p.load(FORTY_TWO), lambda: p.free(f)):
            with self.assertRaises(OSError) as cm:
                call()
            self.assertEqual(cm.exception.errno, errno.EINVAL)
        p.close()  # idempotent

    def test_context_manager_on_exception(self):
        with self.assertRaises(RuntimeError):
            with execpack.Pool() as p:
                p.load(FORTY_TWO)
                raise RuntimeError("boom")
        self.assertTrue(p.closed)

    def test_many_pools_released(self):
        for _ in range(50):
            with execpack.Pool() as p:
                self.assertEqual(p.load(ADD, argtypes=(ctypes.c_int,) * 2)(1, 2), 3)
        gc.collect()

    def test_large(self):
        st0 = self.pool.stats()
        pack = st0["pack_bytes"] // st0["packs"] if st0["packs"] else 2 << 20
        code = FORTY_TWO + b"\xcc" * (pack + 1 - len(FORTY_TWO))
        f = self.pool.load(code)
        self.assertEqual(f(), 42)
        st = self.pool.stats()
        self.assertEqual(st["large_allocs"], 1)
        self.assertGreaterEqual(st["large_bytes"], len(code))
        self.pool.free(f)
        self.assertEqual(self.pool.stats()["large_allocs"], 0)


def main():
    try:
        with execpack.Pool() as p:
            backend = p.backend
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EPERM, errno.ENODEV):
            print("SKIP: no executable memory here: %s" % e)
            return 77
        raise
    print("libexecpack %s, backend %s, via %s" % (execpack.version(), backend,
                                                 execpack.library()._name))
    prog = unittest.main(exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
