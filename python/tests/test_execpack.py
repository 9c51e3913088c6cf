# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of the ctypes binding: pools, loading, lifetimes, integer checks.

Run by pytest (python3 -m pytest python/tests), or directly as a script by
tests/python-binding.sh in make check, with the package on PYTHONPATH.
Exit status as a script: 0 all passed, 1 a failure, 77 no executable
memory here.  EXECPACK_LIBRARY names the library under test;
EXECPACK_HEADER, when set, is include/execpack.h, against which the stats
keys and the version are checked.
Cases that once killed the interpreter (a call into freed or unmapped
code) run in a child interpreter, so that a regression fails its test.
"""

import ctypes
import errno
import gc
import os
import re
import resource
import signal
import struct
import subprocess
import sys
import textwrap
import unittest
import weakref

import execpack
import support

# lea eax, [rdi + rsi]; ret
ADD = bytes([0x8D, 0x04, 0x37, 0xC3])
# mov eax, 42; ret
FORTY_TWO = bytes([0xB8, 0x2A, 0x00, 0x00, 0x00, 0xC3])
# mov rax, imm64; ret  (the immediate starts at byte 2)
MOV_RAX = bytes([0x48, 0xB8]) + (7).to_bytes(8, "little") + bytes([0xC3])
# mov rax, rdi; ret
IDENTITY = bytes([0x48, 0x89, 0xF8, 0xC3])

# where the execpack under test was imported from: children import the same
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(execpack.__file__)))
SIZE_LIMIT = 1 << (8 * ctypes.sizeof(ctypes.c_size_t))      # SIZE_MAX + 1
POINTER_LIMIT = 1 << (8 * ctypes.sizeof(ctypes.c_void_p))   # UINTPTR_MAX + 1


def _no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_child(test, body):
    """Run body in a fresh interpreter that has imported execpack, ctypes,
    errno, gc and weakref and knows the code constants: what crashed the
    interpreter once fails this test instead of killing the runner."""
    script = ("import ctypes, errno, gc, sys, weakref\n"
              "sys.path.insert(0, %r)\n"
              "import execpack\n"
              "FORTY_TWO = %r\n"
              "%s\n"
              "print('child done')\n") % (PKG_PARENT, FORTY_TWO, textwrap.dedent(body))
    r = subprocess.run([sys.executable, "-B", "-c", script], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=120, preexec_fn=_no_core)
    if r.returncode < 0:
        how = "was killed by %s" % signal.Signals(-r.returncode).name
    else:
        how = "exited %d" % r.returncode
    test.assertEqual(r.returncode, 0, "the child %s:\n%s" % (how, r.stdout))
    test.assertIn("child done", r.stdout)
    return r.stdout


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
        self.assertTrue(cm.exception.strerror.startswith("ep_free: "))
        self.assertTrue(cm.exception.strerror.endswith(": " + execpack.strerror(errno.EINVAL)))

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
        pack = 2 << 20  # the default pack size (pack_bytes counts committed bytes)
        code = FORTY_TWO + b"\xcc" * (pack + 1 - len(FORTY_TWO))
        f = self.pool.load(code)
        self.assertEqual(f(), 42)
        st = self.pool.stats()
        self.assertEqual(st["large_allocs"], 1)
        self.assertGreaterEqual(st["large_bytes"], len(code))
        self.pool.free(f)
        self.assertEqual(self.pool.stats()["large_allocs"], 0)


class StagingBufferTest(unittest.TestCase):
    """Image.buffer: the staging buffer through the buffer protocol, so that
    code is written without ctypes; never a view of the library's memory
    once the staging buffer is its again."""

    def setUp(self):
        self.pool = execpack.Pool()

    def tearDown(self):
        self.pool.close()

    def call_int(self, img):
        return execpack.JitFunction(self.pool, img, ctypes.c_int, ())()

    def test_write_code_without_ctypes(self):
        img = self.pool.alloc(len(FORTY_TWO))
        buf = img.buffer
        self.assertIsInstance(buf, memoryview)
        self.assertEqual((len(buf), buf.format, buf.itemsize, buf.readonly),
                         (img.size, "B", 1, False))
        self.assertEqual(bytes(buf), b"\xcc" * img.size, "it starts as the trap fill")
        buf[:len(FORTY_TWO)] = FORTY_TWO
        struct.pack_into("<I", img.buffer, 1, 43)   # a second view, the same bytes
        self.assertEqual(bytes(buf[:6]), bytes([0xB8, 43, 0, 0, 0, 0xC3]))
        self.pool.finalize(img)
        self.assertEqual(self.call_int(img), 43)
        self.pool.free(img)

    def test_gone_after_finalize(self):
        img = self.pool.alloc(64)
        buf = img.buffer
        buf[:len(FORTY_TWO)] = FORTY_TWO
        self.pool.finalize(img)
        # the staging buffer is reused for other code: no way to it remains
        with self.assertRaises(ValueError):
            img.buffer
        with self.assertRaises(ValueError):
            buf[0] = 0xC3
        other = self.pool.alloc(64)
        self.assertEqual(bytes(other.buffer), b"\xcc" * 64)
        self.assertEqual(self.call_int(img), 42)
        self.pool.write(img, bytes([7]), offset=1)   # live code: Pool.write()
        self.assertEqual(self.call_int(img), 7)
        self.pool.free(img)
        self.pool.free(other)

    def test_gone_after_free_and_close(self):
        img = self.pool.alloc(64)
        buf = img.buffer
        self.pool.free(img)
        for use in (lambda: img.buffer, lambda: buf.__setitem__(0, 1)):
            with self.assertRaises(ValueError):
                use()
        with execpack.Pool() as p:
            img = p.alloc(64)
            buf = img.buffer
        with self.assertRaises(ValueError):
            buf[0] = 1
        with self.assertRaises(ValueError):
            img.buffer
        with self.assertRaises(ValueError):
            execpack.Image(0x1000, 0x2000, 64).buffer   # made by hand: no staging buffer

    def test_write_and_shrink_before_finalize(self):
        img = self.pool.alloc(4 * execpack.CHUNK_SIZE)
        img.buffer[:len(MOV_RAX)] = MOV_RAX
        # ep_write() before finalize lands in the staging buffer: the buffer
        # shows it, and what was written through the buffer stays
        self.pool.write(img, (99).to_bytes(8, "little"), offset=2)
        self.assertEqual(bytes(img.buffer[:len(MOV_RAX)]),
                         MOV_RAX[:2] + (99).to_bytes(8, "little") + MOV_RAX[10:])
        self.pool.shrink(img, len(MOV_RAX))
        self.assertEqual(len(img.buffer), len(MOV_RAX))
        self.pool.finalize(img)
        self.assertEqual(execpack.JitFunction(self.pool, img, ctypes.c_uint64, ())(), 99)
        self.pool.free(img)


class JitFunctionTest(unittest.TestCase):
    """JitFunction as a context manager, and the type of what a call gives."""

    def setUp(self):
        self.pool = execpack.Pool()

    def tearDown(self):
        self.pool.close()

    def test_context_manager_frees(self):
        live = self.pool.stats()["live_allocs"]
        with self.pool.load(FORTY_TWO) as f:
            self.assertIsInstance(f, execpack.JitFunction)
            self.assertEqual(f(), 42)
            self.assertEqual(self.pool.stats()["live_allocs"], live + 1)
        self.assertEqual(self.pool.stats()["live_allocs"], live)
        with self.assertRaises(ValueError):
            f()
        with self.assertRaises(RuntimeError):
            with self.pool.load(FORTY_TWO) as g:
                raise RuntimeError("boom")
        self.assertEqual(self.pool.stats()["live_allocs"], live)
        with self.assertRaises(ValueError):
            g()
        # freed inside the block, or its pool closed: the end frees nothing
        with self.pool.load(FORTY_TWO) as h:
            self.pool.free(h)
        with execpack.Pool() as p:
            with p.load(FORTY_TWO) as k:
                p.close()
        with self.assertRaises(ValueError):
            k()

    def test_typed_results(self):
        # addsd xmm0, xmm1; ret
        add = self.pool.load(bytes.fromhex("f20f58c1c3"), restype=ctypes.c_double,
                             argtypes=(ctypes.c_double, ctypes.c_double))
        r = add(1.5, 2.25)
        self.assertIs(type(r), float)
        self.assertEqual(r, 3.75)
        # mov eax, 1; ret as a bool, and as an unsigned byte of mov eax, 0x1ff
        self.assertIs(self.pool.load(bytes([0xB8, 1, 0, 0, 0, 0xC3]), restype=ctypes.c_bool)(),
                      True)
        self.assertEqual(self.pool.load(bytes([0xB8, 0xFF, 1, 0, 0, 0xC3]),
                                        restype=ctypes.c_uint8)(), 0xFF)
        self.assertIs(type(self.pool.load(FORTY_TWO)()), int)
        self.assertIsNone(self.pool.load(FORTY_TWO, restype=None)())
        # what a type checker is told, checked by mypy in test_api and by
        # tests/python-binding.sh: typing_results.py
        self.assertIs(execpack.JitFunction[float].__origin__, execpack.JitFunction)


class LifetimeTest(unittest.TestCase):
    """Functions and Images against the lifetime of their pool and code."""

    def test_call_after_close_raises(self):
        out = run_child(self, """
            pool = execpack.Pool()
            f = pool.load(FORTY_TWO)
            assert f() == 42
            pool.close()
            try:
                f()
            except ValueError as e:
                print("close:", e)
            with execpack.Pool() as p:
                g = p.load(FORTY_TWO)
                assert g() == 42
            try:
                g()
            except ValueError as e:
                print("with:", e)
            for call in (lambda: pool.free(f), lambda: p.write(g, b"\\x90")):
                try:
                    call()
                except OSError as e:
                    assert e.errno == errno.EINVAL, e
                    print("method:", e)
            """)
        self.assertIn("close: call of <JitFunction", out)
        self.assertIn("with: call of <JitFunction", out)
        self.assertIn("Pool.close()", out)
        self.assertEqual(out.count("method:"), 2, out)

    def test_call_after_free_raises(self):
        out = run_child(self, """
            pool = execpack.Pool()
            f = pool.load(FORTY_TWO)
            pool.free(f)
            try:
                f()
            except ValueError as e:
                print("by function:", e)
            g = pool.load(FORTY_TWO)
            pool.free(g.address)
            try:
                g()
            except ValueError as e:
                print("by address:", e)
            img = pool.alloc(len(FORTY_TWO))
            ctypes.memmove(img.rw, FORTY_TWO, len(FORTY_TWO))
            pool.finalize(img)
            h = execpack.JitFunction(pool, img, ctypes.c_int, ())
            assert h() == 42
            pool.free(img)
            try:
                h()
            except ValueError as e:
                print("by image:", e)
            k = pool.load(FORTY_TWO)
            pool.free(execpack.Image(k.address, 0, k.size))
            try:
                k()
            except ValueError as e:
                print("by an Image made by hand:", e)
            assert pool.stats()["live_allocs"] == 0
            """)
        for how in ("by function", "by address", "by image", "by an Image made by hand"):
            self.assertIn(how + ": call of <JitFunction", out)
        self.assertIn("was freed", out)

    def test_function_and_image_keep_pool_alive(self):
        pool = execpack.Pool()
        alive = weakref.ref(pool)
        img = pool.alloc(len(FORTY_TWO))
        del pool
        gc.collect()
        self.assertIsNotNone(alive(), "the pool was destroyed under its Image")
        ctypes.memmove(img.rw, FORTY_TWO, len(FORTY_TWO))
        alive().finalize(img)
        self.assertEqual(ctypes.CFUNCTYPE(ctypes.c_int)(img.exec)(), 42)
        f = execpack.Pool().load(FORTY_TWO)
        gc.collect()
        self.assertEqual(f(), 42)
        alive_f = weakref.ref(f.pool)
        del f, img
        gc.collect()
        self.assertIsNone(alive(), "the pool outlives its last Image")
        self.assertIsNone(alive_f(), "the pool outlives its last function")

    def test_stale_function_cannot_touch_reused_memory(self):
        pool = execpack.Pool()
        self.addCleanup(pool.close)
        f = pool.load(FORTY_TWO)
        addr = f.address
        pool.free(f)

        def stale_calls_raise():
            for what, call in (("free", lambda: pool.free(f)),
                               ("write", lambda: pool.write(f, b"\xcc" * 4)),
                               ("finalize", lambda: pool.finalize(f))):
                with self.assertRaises(OSError, msg=what) as cm:
                    call()
                self.assertEqual(cm.exception.errno, errno.EINVAL)
                self.assertIn("was freed", str(cm.exception))

        stale_calls_raise()
        # once the chunk is handed out again, the stale handle must not
        # reach the function that got it (the library alone cannot tell)
        fns = []
        for _ in range(256):
            fns.append(pool.load(MOV_RAX, restype=ctypes.c_uint64))
            if fns[-1].address == addr:
                live = pool.stats()["live_allocs"]
                stale_calls_raise()
                self.assertEqual(pool.stats()["live_allocs"], live)
                self.assertEqual(fns[-1](), 7, "the function at the reused address is intact")
                break
        for g in fns:
            pool.free(g)

    def test_function_of_another_pool(self):
        a = execpack.Pool()
        b = execpack.Pool()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        f = a.load(FORTY_TWO)
        img = a.alloc(16)
        for what, call in (("free", lambda: b.free(f)),
                           ("write", lambda: b.write(f, b"\x90")),
                           ("finalize", lambda: b.finalize(img)),
                           ("free image", lambda: b.free(img))):
            with self.assertRaises(OSError, msg=what) as cm:
                call()
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            self.assertIn("another pool", str(cm.exception))
        self.assertEqual(f(), 42)
        self.assertEqual(a.stats()["live_allocs"], 2)
        a.free(f)
        a.free(img)


class IntegerRangeTest(unittest.TestCase):
    """No integer reaches C truncated: each is checked against its C type."""

    def setUp(self):
        self.pool = execpack.Pool()

    def tearDown(self):
        self.pool.close()

    def test_alloc_size(self):
        with self.assertRaises(OverflowError):
            self.pool.alloc(SIZE_LIMIT + 10)   # was a 64-byte image
        with self.assertRaises(ValueError):
            self.pool.alloc(-1)
        with self.assertRaises(TypeError):
            self.pool.alloc(64.0)
        self.assertEqual(self.pool.stats()["live_allocs"], 0)

    def test_write_offset(self):
        f = self.pool.load(MOV_RAX, restype=ctypes.c_uint64)
        imm = (99).to_bytes(8, "little")
        with self.assertRaises(OverflowError):
            self.pool.write(f, imm, offset=POINTER_LIMIT + 2)   # was offset 2
        with self.assertRaises(OverflowError):
            self.pool.write(f, imm, offset=POINTER_LIMIT - 1)   # wraps the address
        with self.assertRaises(ValueError):
            self.pool.write(f, imm, offset=-8)
        with self.assertRaises(TypeError):
            self.pool.write(f, 8, offset=2)   # not 8 zero bytes
        self.assertEqual(f(), 7, "the code was not touched")
        self.pool.write(f, imm, offset=2)
        self.assertEqual(f(), 99)
        self.pool.free(f)

    def test_free_address(self):
        f = self.pool.load(FORTY_TWO)
        with self.assertRaises(OverflowError):
            self.pool.free(f.address + POINTER_LIMIT)   # freed f.address
        with self.assertRaises(ValueError):
            self.pool.free(f.address - POINTER_LIMIT)
        self.assertEqual(self.pool.stats()["live_allocs"], 1)
        self.assertEqual(f(), 42)
        self.pool.free(f.address)

    def test_finalize_address(self):
        img = self.pool.alloc(len(FORTY_TWO))
        ctypes.memmove(img.rw, FORTY_TWO, len(FORTY_TWO))
        with self.assertRaises(OverflowError):
            self.pool.finalize(img.exec + POINTER_LIMIT)   # finalized img
        self.pool.finalize(img)
        self.assertEqual(ctypes.CFUNCTYPE(ctypes.c_int)(img.exec)(), 42)
        self.pool.free(img)

    def _rejected(self, exc, **kwargs):
        with self.assertRaises(exc, msg=repr(kwargs)):
            execpack.Pool(**kwargs).close()

    def test_pool_flags(self):
        self._rejected(OverflowError, flags=1 << 32)   # was accepted as 0
        self._rejected(ValueError, flags=-1)
        self._rejected(TypeError, flags=1.0)

    def test_pool_limit(self):
        self._rejected(OverflowError, limit=SIZE_LIMIT + execpack.CHUNK_SIZE)   # was 64
        self._rejected(ValueError, limit=-1)

    def test_pool_pack_size(self):
        self._rejected(OverflowError, pack_size=SIZE_LIMIT + (2 << 20))
        self._rejected(ValueError, pack_size=-4096)

    def test_pool_backend(self):
        with self.assertRaises(ValueError) as cm:
            execpack.Pool(backend="nonsense")
        self.assertNotIsInstance(cm.exception, OSError)
        self.assertIn("nonsense", str(cm.exception))
        self._rejected(OverflowError, backend=(1 << 32) + 1)   # was memfd
        self._rejected(ValueError, backend=-1)
        self._rejected(TypeError, backend=1.0)

    def test_pool_path(self):
        # a C string ends at the NUL: another path than the one asked for
        self._rejected(ValueError, backend="memfd", path="/dev/shm\0/elsewhere")

    def test_strerror(self):
        with self.assertRaises(OverflowError):
            execpack.strerror((1 << 32) + errno.EINVAL)
        self.assertEqual(execpack.strerror(errno.EINVAL), execpack.strerror(-errno.EINVAL))

    def test_load_int(self):
        with self.assertRaises(TypeError):
            self.pool.load(5)   # was 5 zero bytes of code
        self.assertEqual(self.pool.stats()["live_allocs"], 0)

    def test_call_arguments(self):
        add = self.pool.load(ADD, argtypes=(ctypes.c_int, ctypes.c_int))
        int_max = (1 << 31) - 1
        self.assertEqual(add(int_max, 0), int_max)
        self.assertEqual(add(-int_max - 1, 0), -int_max - 1)
        with self.assertRaises(OverflowError):
            add((1 << 32) + 2, 3)   # was 5
        with self.assertRaises(OverflowError):
            add(0, -int_max - 2)
        ident = self.pool.load(IDENTITY, restype=ctypes.c_uint64,
                               argtypes=(ctypes.c_void_p,))
        self.assertEqual(ident(POINTER_LIMIT - 1), POINTER_LIMIT - 1)
        with self.assertRaises(OverflowError):
            ident(POINTER_LIMIT + 5)   # was 5
        with self.assertRaises(OverflowError):
            ident(-1)
        self.pool.free(add)
        self.pool.free(ident)


class DefaultPoolTest(unittest.TestCase):
    """Pool.default(): ep_default_pool(), one for the process, never closed."""

    def test_one_pool_that_close_leaves(self):
        pool = execpack.Pool.default()
        self.assertIs(execpack.Pool.default(), pool)
        self.assertTrue(pool.is_default)
        self.assertFalse(execpack.Pool().is_default)
        self.assertTrue(pool.backend)
        with execpack.Pool.default() as p:
            add = p.load(ADD, restype=ctypes.c_int, argtypes=(ctypes.c_int, ctypes.c_int))
        pool.close()  # (a no-op, as ep_pool_destroy() on the default pool)
        self.assertFalse(pool.closed)
        self.assertEqual(add(2, 3), 5, "the code outlives close() and the with block")
        before = pool.stats()["live_allocs"]
        pool.free(add)
        self.assertEqual(pool.stats()["live_allocs"], before - 1)

    def test_the_library_s_default_pool(self):
        lib = execpack.library()
        self.assertEqual(lib.ep_default_pool(), execpack.Pool.default()._handle)


if __name__ == "__main__":
    sys.exit(support.main(show_banner=True))
