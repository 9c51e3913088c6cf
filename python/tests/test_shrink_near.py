# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of Pool.shrink() (ep_shrink), Pool(near=...) (ep_config.near),
Pool(code_range=...) (ep_config.code_range), Pool(chunk_size=...)
(ep_config.chunk_size) and the flag constants (F_JITDUMP among them).

Run by pytest, or as a script by tests/python-binding.sh (exit 0, 1, or 77
when there is no executable memory here).  EXECPACK_HEADER, when set, is
include/execpack.h, against which the flag values are checked."""

import ctypes
import errno
import os
import platform
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest
from typing import Any, Dict, List, Optional, Tuple, Union

import execpack
import support

# mov eax, 42; ret
FORTY_TWO = bytes([0xB8, 0x2A, 0x00, 0x00, 0x00, 0xC3])
CHUNK = execpack.CHUNK_SIZE
REACH = 1 << 31  # what a rel32 reaches
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(execpack.__file__)))


def libc_abs() -> Tuple[Any, int]:
    """libc's abs() as a ctypes function and its address."""
    libc = ctypes.CDLL(None)
    fn = libc.abs
    fn.restype = ctypes.c_int
    fn.argtypes = (ctypes.c_int,)
    addr = ctypes.cast(fn, ctypes.c_void_p).value
    assert addr is not None
    return fn, addr


def header_flags() -> Optional[Dict[str, int]]:
    path = os.environ.get("EXECPACK_HEADER")
    if not path:
        return None
    with open(path) as f:
        text = f.read()
    return {name: 1 << int(bit) for name, bit
            in re.findall(r"#define EP_F_(\w+)\s+\(1u << (\d+)\)", text)}


def header_config_fields() -> Optional[List[str]]:
    path = os.environ.get("EXECPACK_HEADER")
    if not path:
        return None
    with open(path) as f:
        text = f.read()
    m = re.search(r"struct ep_config\s*\{(.*?)\};", text, re.S)
    assert m is not None
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    return re.findall(r"\b(\w+)\s*;", body)


class ShrinkTest(unittest.TestCase):
    backend = "memfd"

    def setUp(self) -> None:
        # no EP_F_RANDOMIZE: allocations start on a chunk, so the bytes
        # given back are known exactly
        self.pool = execpack.Pool(self.backend)

    def tearDown(self) -> None:
        self.pool.close()

    def used(self) -> int:
        return self.pool.stats()["used_bytes"]

    def test_before_finalize(self) -> None:
        base = self.used()
        img = self.pool.alloc(16 * CHUNK)
        self.assertEqual(self.used() - base, 16 * CHUNK)
        ctypes.memmove(img.rw, FORTY_TWO, len(FORTY_TWO))
        self.pool.shrink(img, len(FORTY_TWO))
        self.assertEqual(img.size, len(FORTY_TWO))
        self.assertEqual(self.used() - base, CHUNK, "the chunk holding the code is kept")
        # the staging buffer past the kept chunk no longer belongs to it
        with self.assertRaises(OSError) as cm:
            self.pool.write(img, b"\xc3", offset=CHUNK)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.pool.finalize(img)
        f = execpack.JitFunction(self.pool, img, ctypes.c_int, ())
        self.assertEqual(f(), 42)
        self.pool.free(f)
        self.assertEqual(self.used(), base)

    def test_after_finalize(self) -> None:
        base = self.used()
        code = FORTY_TWO + b"\xcc" * (10 * CHUNK - len(FORTY_TWO))
        f = self.pool.load(code)
        self.assertEqual(f(), 42)
        self.assertEqual(self.used() - base, 10 * CHUNK)
        self.pool.shrink(f, CHUNK + 1)
        self.assertEqual(f.size, CHUNK + 1)
        self.assertEqual(self.used() - base, 2 * CHUNK)
        self.assertEqual(f(), 42, "the kept code still runs")
        # by address, and again down to one chunk
        self.pool.shrink(f.address, len(FORTY_TWO))
        self.assertEqual(self.used() - base, CHUNK)
        self.assertEqual(f(), 42)
        # the chunks given back are handed out again
        g = self.pool.load(FORTY_TWO)
        self.assertEqual(g(), 42)
        self.pool.free(g)
        self.pool.free(f)
        self.assertEqual(self.used(), base)

    def test_within_the_last_chunk(self) -> None:
        f = self.pool.load(FORTY_TWO)
        before = self.used()
        self.pool.shrink(f, 1)  # the chunk stays: nothing to give back
        self.assertEqual(self.used(), before)
        self.assertEqual(f(), 42)
        self.pool.free(f)

    def test_never_grows(self) -> None:
        img = self.pool.alloc(4 * CHUNK)
        for size in (0, 4 * CHUNK + 1, 1 << 20):
            with self.assertRaises(OSError) as cm:
                self.pool.shrink(img, size)
            self.assertEqual(cm.exception.errno, errno.EINVAL, size)
            self.assertIn("ep_shrink", str(cm.exception))
        self.assertEqual(img.size, 4 * CHUNK, "unchanged by a failure")
        self.pool.shrink(img, CHUNK)
        with self.assertRaises(OSError) as cm:
            self.pool.shrink(img, 2 * CHUNK)  # more than is left now
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.pool.free(img)

    def test_bad_targets(self) -> None:
        img = self.pool.alloc(4 * CHUNK)
        with self.assertRaises(OSError) as cm:
            self.pool.shrink(img.exec + 1, CHUNK)  # not the start
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(ValueError):
            self.pool.shrink(img, -1)
        with self.assertRaises(OverflowError):
            self.pool.shrink(img, 1 << (8 * ctypes.sizeof(ctypes.c_size_t)))
        with self.assertRaises(TypeError):
            self.pool.shrink(img, "1")  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            self.pool.shrink("img", 1)  # type: ignore[arg-type]
        addr = img.exec
        self.pool.free(img)
        # a freed Image is refused by the binding, its address by the library
        targets: Tuple[Union[execpack.Image, int], ...] = (img, addr)
        for target in targets:
            with self.assertRaises(OSError) as cm:
                self.pool.shrink(target, CHUNK)
            self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_other_pool_and_closed(self) -> None:
        f = self.pool.load(FORTY_TWO + b"\xcc" * CHUNK)
        with execpack.Pool(self.backend) as other:
            with self.assertRaises(OSError) as cm:
                other.shrink(f, 1)
            self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.pool.close()
        with self.assertRaises(OSError) as cm:
            self.pool.shrink(f, 1)
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_large(self) -> None:
        big = 4 << 20  # larger than a pack: a mapping of its own
        with execpack.Pool(self.backend, limit=big) as pool:
            img = pool.alloc(big)
            ctypes.memmove(img.rw, FORTY_TWO, len(FORTY_TWO))
            pool.finalize(img)
            with self.assertRaises(OSError) as cm:
                pool.alloc(1 << 20)
            self.assertEqual(cm.exception.errno, errno.EPERM, "the limit is reached")
            large = pool.stats()["large_bytes"]
            pool.shrink(img, len(FORTY_TWO))
            # the pages past it are no longer charged, but stay mapped
            other = pool.alloc(1 << 20)
            self.assertEqual(pool.stats()["large_bytes"], large)
            f = execpack.JitFunction(pool, img, ctypes.c_int, ())
            self.assertEqual(f(), 42)
            pool.free(other)
            pool.free(f)


class ShrinkAutoTest(ShrinkTest):
    """The same on what AUTO takes here (hugetlb, kmod: other page sizes)."""
    backend = "auto"


class NearTest(unittest.TestCase):
    def assert_near(self, target: int, img: execpack.Image) -> None:
        for addr in (img.exec, img.exec + img.size - 1):
            self.assertLess(abs(addr - target), REACH,
                            "0x%x is out of rel32 reach of 0x%x" % (addr, target))

    def test_allocations_within_reach(self) -> None:
        fn, target = libc_abs()
        for backend in ("memfd", "auto"):
            with execpack.Pool(backend, near=fn) as pool:
                imgs = [pool.alloc(n) for n in (1, 100, 4096, 64 << 10, 3 << 20)]
                for img in imgs:
                    self.assert_near(target, img)
                for img in imgs:
                    pool.free(img)

    def test_address_forms(self) -> None:
        fn, target = libc_abs()
        forms = (target, ctypes.c_void_p(target), fn,
                 ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(target))
        for near in forms:
            with execpack.Pool("memfd", near=near) as pool:
                img = pool.alloc(CHUNK)
                self.assert_near(target, img)
                # near JIT code of another pool
                f = pool.load(FORTY_TWO)
                with execpack.Pool("memfd", near=f) as pool2:
                    self.assert_near(f.address, pool2.alloc(CHUNK))
        for anywhere in (None, 0, ctypes.c_void_p()):
            with execpack.Pool("memfd", near=anywhere) as pool:
                self.assertEqual(pool.load(FORTY_TWO)(), 42)

    def test_config_follows_the_header(self) -> None:
        """struct ep_config as the binding passes it: purge_delay_ms last, and
        sz covering it (else the library would take it as 0)."""
        cfg_type = execpack._core._Config
        names = [f[0] for f in cfg_type._fields_]
        self.assertEqual(names[-1], "purge_delay_ms")
        self.assertEqual(cfg_type.purge_delay_ms.offset + ctypes.sizeof(ctypes.c_long),
                         ctypes.sizeof(cfg_type))
        self.assertEqual(execpack._core._config("memfd", 0, 0, 0, None, 0, 0, 0).purge_delay_ms, 0)
        cfg = execpack._core._config("memfd", 0, 0, 0, None, 0x1000, 1 << 24, 16)
        self.assertEqual(cfg.sz, ctypes.sizeof(cfg_type))
        self.assertEqual(cfg.near, 0x1000)
        self.assertEqual(cfg.code_range, 1 << 24)
        self.assertEqual(cfg.chunk_size, 16)
        fields = header_config_fields()
        if fields is not None:
            self.assertEqual(names, fields)

    def test_bad_near(self) -> None:
        with self.assertRaises(TypeError):
            execpack.Pool(near="0x1000")  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            execpack.Pool(near=1.5)  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            execpack.Pool(near=-1)
        with self.assertRaises(OverflowError):
            execpack.Pool(near=1 << (8 * ctypes.sizeof(ctypes.c_void_p)))

    def test_no_room_raises_eaddrnotavail(self) -> None:
        # the last page of the address space: nothing of a user process
        # can be mapped within 2 GiB of it on a 64-bit kernel
        if ctypes.sizeof(ctypes.c_void_p) < 8:
            self.skipTest("a 32-bit address space is all within reach")
        top = (1 << 64) - 4096
        with self.assertRaises(OSError) as cm:
            with execpack.Pool("memfd", near=top) as pool:
                pool.alloc(CHUNK)
        self.assertEqual(cm.exception.errno, errno.EADDRNOTAVAIL, str(cm.exception))
        self.assertEqual(cm.exception.strerror.split(": ")[-1],
                         execpack.strerror(errno.EADDRNOTAVAIL))

    def test_probe(self) -> None:
        fn, target = libc_abs()
        rc, why = execpack.probe("memfd", near=fn)
        self.assertEqual(rc, 0, why)
        if ctypes.sizeof(ctypes.c_void_p) == 8:
            rc, why = execpack.probe("memfd", near=(1 << 64) - 4096)
            self.assertEqual(rc, -errno.EADDRNOTAVAIL, why)
        rc, why = execpack.probe("kmod", near=target, path="/nonexistent/execpack")
        self.assertIn(rc, (-errno.EOPNOTSUPP, -errno.ENOENT), why)

    def test_call_rel32(self) -> None:
        if platform.machine() not in ("x86_64", "AMD64"):
            self.skipTest("x86-64 code: %s" % platform.machine())
        fn, target = libc_abs()
        with execpack.Pool("memfd", near=fn) as pool:
            # sub rsp, 8; call rel32 abs; add rsp, 8; ret  (the stack stays
            # 16-byte aligned at the call)
            img = pool.alloc(13)
            rel = target - (img.exec + 9)
            code = (bytes([0x48, 0x83, 0xEC, 0x08, 0xE8]) + rel.to_bytes(4, "little", signed=True)
                    + bytes([0x48, 0x83, 0xC4, 0x08, 0xC3]))
            ctypes.memmove(img.rw, code, len(code))
            pool.finalize(img)
            f = execpack.JitFunction(pool, img, ctypes.c_int, (ctypes.c_int,))
            self.assertEqual(f(-7), 7)
            self.assertEqual(f(5), 5)
            pool.free(f)


class FlagsTest(unittest.TestCase):
    def test_flags_follow_the_header(self) -> None:
        self.assertEqual(execpack.F_JITDUMP, 1 << 3)
        flags = header_flags()
        if flags is None:
            self.skipTest("EXECPACK_HEADER is not set")
        self.assertIn("JITDUMP", flags)
        for name, value in flags.items():
            self.assertEqual(getattr(execpack, "F_" + name), value, name)
            self.assertIn("F_" + name, execpack.__all__)

    def test_jitdump_file(self) -> None:
        """A pool with F_JITDUMP writes jit-<pid>.dump with a named
        allocation's name and code (in a child: the file is per process)."""
        with tempfile.TemporaryDirectory() as tmp:
            script = textwrap.dedent("""\
                import os, sys
                sys.path.insert(0, %r)
                import execpack
                with execpack.Pool("memfd", flags=execpack.F_JITDUMP) as pool:
                    f = pool.load(%r)
                    pool.set_name(f, "jitdump_forty_two")
                    assert f() == 42
                print(os.getpid())
                """) % (PKG_PARENT, FORTY_TWO)
            env = dict(os.environ, EXECPACK_JITDUMP_DIR=tmp)
            r = subprocess.run([sys.executable, "-B", "-c", script], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout)
            path = os.path.join(tmp, "jit-%s.dump" % r.stdout.split()[-1])
            self.assertTrue(os.path.isfile(path), os.listdir(tmp))
            with open(path, "rb") as f:
                data = f.read()
        self.assertIn(b"jitdump_forty_two\0", data)
        self.assertIn(FORTY_TWO, data)


class CodeRangeTest(unittest.TestCase):
    """Pool(code_range=...) (ep_config.code_range)."""
    PACK = 64 << 10

    def test_all_inside(self) -> None:
        rng = 8 << 20
        with execpack.Pool("memfd", pack_size=self.PACK, code_range=rng) as pool:
            imgs = [pool.alloc(n) for n in (1, 100, 4096, 3 * self.PACK, 60 << 10) * 10]
            lo = min(img.exec for img in imgs)
            hi = max(img.exec + img.size for img in imgs)
            self.assertLessEqual(hi - lo, rng)
            self.assertGreaterEqual(pool.stats()["packs"], 5)
            for img in imgs:
                pool.free(img)

    def test_full_range_raises_enomem(self) -> None:
        with execpack.Pool("memfd", pack_size=self.PACK, code_range=2 * self.PACK) as pool:
            imgs = [pool.alloc(self.PACK // 2) for _ in range(4)]
            with self.assertRaises(OSError) as cm:
                pool.alloc(self.PACK // 2)
            self.assertEqual(cm.exception.errno, errno.ENOMEM)
            pool.free(imgs[0])
            pool.alloc(self.PACK // 2)  # the space freed is used again

    def test_smaller_than_a_pack(self) -> None:
        with self.assertRaises(OSError) as cm:
            execpack.Pool("memfd", pack_size=self.PACK, code_range=self.PACK - 4096)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        rc, why = execpack.probe("memfd", pack_size=self.PACK, code_range=4096)
        self.assertEqual(rc, -errno.EINVAL)
        self.assertIn("code range", why)
        with self.assertRaises(ValueError):
            execpack.Pool(code_range=-1)

    def test_with_near(self) -> None:
        fn, target = libc_abs()
        with execpack.Pool("memfd", pack_size=self.PACK, near=fn,
                           code_range=16 << 20) as pool:
            for n in (1, 2 * self.PACK, 100):
                img = pool.alloc(n)
                self.assertLess(abs(img.exec - target), REACH)
                self.assertLess(abs(img.exec + img.size - 1 - target), REACH)


class ChunkSizeTest(unittest.TestCase):
    """Pool(chunk_size=...) (ep_config.chunk_size)."""

    def test_thunks(self) -> None:
        for grain in (16, 32, 64):
            with execpack.Pool("memfd", chunk_size=grain) as pool:
                imgs = [pool.alloc(15) for _ in range(100)]
                for img in imgs:
                    self.assertEqual(img.exec % grain, 0)
                    self.assertEqual(img.size, grain)
                self.assertEqual(pool.stats()["used_bytes"], 100 * grain)
                pool.free(imgs[1])
                self.assertEqual(pool.alloc(1).exec, imgs[1].exec)  # first fit

    def test_default_is_chunk_size(self) -> None:
        with execpack.Pool("memfd") as pool:
            self.assertEqual(pool.alloc(1).size, CHUNK)

    def test_bad_sizes(self) -> None:
        for bad in (1, 8, 48, 128):
            with self.assertRaises(OSError) as cm:
                execpack.Pool("memfd", chunk_size=bad)
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            self.assertEqual(execpack.probe("memfd", chunk_size=bad)[0], -errno.EINVAL)
        with self.assertRaises(ValueError):
            execpack.Pool(chunk_size=-16)

    def test_shrink_small_chunks(self) -> None:
        with execpack.Pool("memfd", chunk_size=16) as pool:
            img = pool.alloc(100)
            pool.shrink(img, 20)
            self.assertEqual(pool.stats()["used_bytes"], 32)


if __name__ == "__main__":
    sys.exit(support.main())
