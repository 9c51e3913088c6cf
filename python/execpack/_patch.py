# SPDX-License-Identifier: LGPL-2.1-or-later
"""execpack._patch: patch windows on published code (ep_patch_begin(3))
and ep_lookup_rw(3) (the user's documentation is the package's)."""

import ctypes
import errno
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

from ._core import (_SIZE_MAX, _UINTPTR_MAX, NAME_MAX, _check, _dead_text, _einval, _unsigned,
                    library)

if TYPE_CHECKING:
    from ._core import Image, JitFunction, Pool, _Allocation

__all__ = ["Window", "Info", "lookup", "F_KEEP_STAGING", "INFO_FINALIZED", "INFO_LARGE",
           "INFO_NAMED"]

# ep_config.flags: the staging buffer outlives finalize(); windows open in it
F_KEEP_STAGING = 1 << 6
# ep_info.flags
INFO_FINALIZED = 1 << 0
INFO_LARGE = 1 << 1
INFO_NAMED = 1 << 2


class _Info(ctypes.Structure):
    _fields_ = [
        ("pool", ctypes.c_void_p),
        ("exec", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
        ("rw", ctypes.c_void_p),
        ("patch_exec", ctypes.c_void_p),
        ("patch_rw", ctypes.c_void_p),
        ("patch_len", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("name", ctypes.c_char * (NAME_MAX + 1)),
        ("reserved", ctypes.c_void_p * 4),
    ]


_protos_set = False


def _lib() -> ctypes.CDLL:
    global _protos_set
    lib = library()
    if not _protos_set:
        P = ctypes.c_void_p
        lib.ep_patch_begin.restype = ctypes.c_int
        lib.ep_patch_begin.argtypes = [P, P, ctypes.c_size_t, ctypes.POINTER(P)]
        for name in ("ep_patch_commit", "ep_patch_abort"):
            getattr(lib, name).restype = ctypes.c_int
            getattr(lib, name).argtypes = [P, P]
        for name in ("ep_lookup", "ep_lookup_rw"):
            getattr(lib, name).restype = ctypes.c_int
            getattr(lib, name).argtypes = [P, ctypes.POINTER(_Info)]
        _protos_set = True
    return lib


class Info(NamedTuple):
    """What lookup() says of the allocation holding an address: pool (the
    C handle, an int), exec, size, rw (its staging buffer when the address
    was in it, else 0), the patch window or kept staging (patch_exec,
    patch_rw, patch_len; 0 when none), flags (INFO_*) and name ("" if
    none)."""
    pool: int
    exec: int
    size: int
    rw: int
    patch_exec: int
    patch_rw: int
    patch_len: int
    flags: int
    name: str


def lookup(address: Union[int, Any]) -> Optional[Info]:
    """ep_lookup_rw(): the live allocation of any pool that holds address
    (an int, or a JitFunction: its address), code or buffer (a staging
    buffer, a window's), or None when none does.  (From a signal handler,
    the C call ep_lookup() is the one that is async-signal-safe.)"""
    if hasattr(address, "address"):
        address = address.address
    addr = _unsigned(address, _UINTPTR_MAX, "a pointer", "address")
    out = _Info()
    rc: int = _lib().ep_lookup_rw(addr, ctypes.byref(out))
    if rc == -errno.ENOENT:
        return None
    _check(rc, "ep_lookup_rw")
    return Info(int(out.pool or 0), int(out.exec or 0), int(out.size), int(out.rw or 0),
                int(out.patch_exec or 0), int(out.patch_rw or 0), int(out.patch_len),
                int(out.flags), out.name.decode(errors="replace"))


class Window:
    """A patch window on [exec, exec + length) of finalized code: .buffer
    is a writable memoryview holding the live bytes (a copy of the
    binding's, as Image.buffer is); commit() writes the bytes that changed
    (each instruction word in one store) and closes it, abort() closes it
    without writing.  As a context manager it commits when the block ends
    normally and aborts when it raises.

    pool.free() of the code, or pool.close(), closes the window with it:
    .open is False, commit() raises OSError(EINVAL), abort() does nothing
    (the library's window is gone, and another allocation may have the
    address by then).  A Window collected while open aborts, so that its
    code is not left with a window (OSError(EBUSY) for the next one)."""

    def __init__(self, pool: "Pool", target: Union["JitFunction[Any]", "Image", int],
                 offset: int = 0, length: Optional[int] = None) -> None:
        h = pool._h("ep_patch_begin")
        addr, alloc = pool._target(target, "ep_patch_begin")
        offset = _unsigned(offset, _UINTPTR_MAX, "a pointer", "offset")
        if length is None:
            if alloc is None or not alloc.size:
                raise ValueError("ep_patch_begin: give the length for a bare address")
            if offset >= alloc.size:
                raise _einval("ep_patch_begin: offset %d is past the code's %d bytes"
                              % (offset, alloc.size))
            length = alloc.size - offset
        length = _unsigned(length, _SIZE_MAX, "size_t", "length")
        if addr + offset > _UINTPTR_MAX:
            raise OverflowError("ep_patch_begin: address 0x%x + offset %d does not fit in a "
                                "pointer" % (addr, offset))
        rw = ctypes.c_void_p()
        _check(_lib().ep_patch_begin(h, addr + offset, length, ctypes.byref(rw)),
               "ep_patch_begin")
        self._pool: Optional["Pool"] = pool
        self.exec = addr + offset
        self.length = length
        self._rw = int(rw.value or 0)
        # the binding's copy: Python never holds a view of the library's
        # buffer, which is freed with the window
        self._mirror: Optional[bytearray] = bytearray(ctypes.string_at(self._rw, length))
        try:
            # the record pool.free() and pool.close() mark dead, also for
            # a bare address (inside the code, or of code no object holds)
            self._alloc = alloc if alloc is not None else self._record(pool)
        except BaseException:
            _lib().ep_patch_abort(h, self.exec)
            self._mirror = None
            raise

    def _record(self, pool: "Pool") -> "_Allocation":
        """The binding's record of the allocation holding the window,
        made if no object of the binding holds one."""
        info = lookup(self.exec)
        if info is None or info.pool != pool._handle:
            raise _einval("ep_patch_begin: no allocation of the pool at 0x%x" % self.exec)
        alloc = pool._live.get(info.exec)
        if alloc is None:
            alloc = pool._track(info.exec, 0, info.size)
            alloc.finalized = True
        return alloc

    def _closed_with_code(self) -> bool:
        """Whether the code was freed (or the pool closed): the library
        closed the window then; the binding's copy goes."""
        if self._alloc.dead is None:
            return False
        self._mirror = None
        return True

    @property
    def open(self) -> bool:
        return self._mirror is not None and not self._closed_with_code()

    @property
    def buffer(self) -> memoryview:
        """The window's bytes, to rewrite (ValueError once it is closed)."""
        if self._closed_with_code():
            raise ValueError("the patch window at 0x%x was closed with its code, which was %s"
                             % (self.exec, _dead_text(self._alloc)))
        if self._mirror is None:
            raise ValueError("the patch window at 0x%x is closed" % self.exec)
        return memoryview(self._mirror)

    def _end(self, write: bool) -> None:
        what = "ep_patch_commit" if write else "ep_patch_abort"
        if self._closed_with_code():
            # the free closed it: nothing to abort, and nothing of the
            # address (another allocation's by now, maybe) is touched
            if write:
                raise _einval("%s: the window at 0x%x was closed with its code, which was %s"
                              % (what, self.exec, _dead_text(self._alloc)))
            return
        if self._mirror is None or self._pool is None:
            raise _einval("%s: the window at 0x%x is closed" % (what, self.exec))
        h = self._pool._h(what)
        lib = _lib()
        if write:
            ctypes.memmove(self._rw, bytes(self._mirror), self.length)
            _check(lib.ep_patch_commit(h, self.exec), what)
        else:
            _check(lib.ep_patch_abort(h, self.exec), what)
        self._mirror = None

    def commit(self) -> None:
        """ep_patch_commit(): write what changed and close the window."""
        self._end(True)

    def abort(self) -> None:
        """ep_patch_abort(): close the window, writing nothing."""
        self._end(False)

    def __enter__(self) -> "Window":
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if self._mirror is None:
            return
        self._end(exc_type is None)

    def __del__(self) -> None:
        """Collected while open: abort, so that the code is not left with
        a window (nothing when the code was freed or the pool closed)."""
        try:
            if (getattr(self, "_mirror", None) is not None and
                    getattr(self, "_alloc", None) is not None):
                self._end(False)
        except Exception:
            pass

    def __repr__(self) -> str:
        return "<execpack.Window 0x%x+%d %s>" % (self.exec, self.length,
                                                  "open" if self.open else "closed")
