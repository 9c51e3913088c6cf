# SPDX-License-Identifier: LGPL-2.1-or-later
"""execpack._core: the library, its pools and the code loaded into them
(the user's documentation is the package's, in __init__.py)."""


import ctypes
import ctypes.util
import errno
import operator
import os
import threading
import weakref
from typing import (TYPE_CHECKING, Any, Callable, Dict, Generic, Iterable, List, Optional,
                    SupportsIndex, Tuple, Type, TypeVar, Union, overload)

if TYPE_CHECKING:
    from ._patch import Window

__all__ = ["Pool", "JitFunction", "Image", "version", "strerror", "library",
           "BACKENDS", "F_RANDOMIZE", "F_SEAL", "F_PERFMAP", "F_JITDUMP", "F_NO_PKEY", "F_BTI",
           "GUARD_PKEY", "GUARD_BTI", "CHUNK_SIZE", "STAGE_ALIGN", "NAME_MAX", "UNWIND_NAME", "UNWIND_DWARF_FP",
           "UNWIND_DWARF_SP", "DATA_RO", "DATA_RW"]

# enum ep_backend
BACKENDS = {"auto": 0, "memfd": 1, "hugetlb": 2, "kmod": 3}

# ep_config.flags
F_RANDOMIZE = 1 << 0
F_SEAL = 1 << 1
F_PERFMAP = 1 << 2
F_JITDUMP = 1 << 3
F_NO_PKEY = 1 << 4
F_BTI = 1 << 5

# ep_pool_guards() bits
GUARD_PKEY = 1 << 0
GUARD_BTI = 1 << 1

CHUNK_SIZE = 64

# EP_STAGE_ALIGN: Image.rw and Image.exec are equal modulo this
STAGE_ALIGN = 64

# EP_NAME_MAX: the longest name ep_set_name() takes, in bytes
NAME_MAX = 255

# ep_alloc_data() kinds
DATA_RO = 1
DATA_RW = 2

# ep_set_unwind() kinds
UNWIND_NAME = 0
UNWIND_DWARF_FP = 1
UNWIND_DWARF_SP = 2

# The ranges of the C types the binding passes integers as.  ctypes itself
# would keep only the low bits of a value out of range.
_SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1
_UINT_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_uint))) - 1
_INT_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_int) - 1)) - 1
_UINTPTR_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1


def _unsigned(value: Any, maximum: int, ctype: str, what: str) -> int:
    """value as an int in [0, maximum], else TypeError/ValueError/OverflowError."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, not %s"
                        % (what, type(value).__name__)) from None
    if v < 0:
        raise ValueError("%s must not be negative: %d" % (what, v))
    if v > maximum:
        raise OverflowError("%s does not fit in %s: %d" % (what, ctype, v))
    return v

FILL_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)

# the base class of every ctypes function pointer (CFUNCTYPE, libc.abs)
_CFuncPtr: Type[Any] = FILL_FN.__mro__[1]

# what Pool(near=...) takes: an address, or what has one (_near_address());
# a function pointer is a ctypes._CData
NearAddress = Optional[Union[SupportsIndex, "ctypes._CData", "JitFunction[Any]"]]


class _Config(ctypes.Structure):
    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("backend", ctypes.c_int),
        ("pack_size", ctypes.c_size_t),
        ("limit", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("fill", FILL_FN),
        ("fill_ctx", ctypes.c_void_p),
        ("path", ctypes.c_char_p),
        ("near", ctypes.c_void_p),
        # the fields last added: sz = sizeof(_Config) tells the library
        # they are here
        ("code_range", ctypes.c_size_t),
        ("chunk_size", ctypes.c_size_t),
        # 0: the default (EXECPACK_PURGE_DELAY_MS or 10 ms)
        ("purge_delay_ms", ctypes.c_long),
    ]


class _Image(ctypes.Structure):
    _fields_ = [
        ("exec", ctypes.c_void_p),
        ("rw", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
    ]


class _Symbol(ctypes.Structure):
    _fields_ = [
        ("offset", ctypes.c_size_t),
        ("size", ctypes.c_size_t),
        ("name", ctypes.c_char_p),
    ]


class _Stats(ctypes.Structure):
    # the field names of struct ep_stats, in order: Pool.stats() keys
    _fields_ = [
        ("packs", ctypes.c_size_t),
        ("pack_bytes", ctypes.c_size_t),
        ("used_bytes", ctypes.c_size_t),
        ("live_allocs", ctypes.c_size_t),
        ("large_allocs", ctypes.c_size_t),
        ("large_bytes", ctypes.c_size_t),
    ]


def _load_library() -> ctypes.CDLL:
    name = os.environ.get("EXECPACK_LIBRARY") or ctypes.util.find_library("execpack")
    lib = ctypes.CDLL(name or "libexecpack.so.0")
    P = ctypes.c_void_p
    protos: Dict[str, Tuple[Any, Any]] = {
        "ep_pool_create": (ctypes.c_int, [ctypes.POINTER(_Config), ctypes.POINTER(P)]),
        "ep_pool_destroy": (None, [P]),
        "ep_default_pool": (P, []),
        "ep_alloc": (ctypes.c_int, [P, ctypes.c_size_t, ctypes.POINTER(_Image)]),
        "ep_alloc_aligned": (ctypes.c_int, [P, ctypes.c_size_t, ctypes.c_size_t,
                                            ctypes.POINTER(_Image)]),
        "ep_alloc_data": (ctypes.c_int, [P, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint,
                                         ctypes.POINTER(_Image)]),
        "ep_finalize_group": (ctypes.c_int, [P, ctypes.POINTER(P), ctypes.c_size_t]),
        "ep_keep_staging": (ctypes.c_int, [P, P]),
        "ep_release_staging": (ctypes.c_int, [P, P]),
        "ep_set_symbols": (ctypes.c_int, [P, P, ctypes.POINTER(_Symbol), ctypes.c_size_t]),
        "ep_write": (ctypes.c_int, [P, P, P, ctypes.c_size_t]),
        "ep_finalize": (ctypes.c_int, [P, P]),
        "ep_free": (ctypes.c_int, [P, P]),
        "ep_shrink": (ctypes.c_int, [P, P, ctypes.c_size_t]),
        "ep_add": (ctypes.c_int, [P, P, ctypes.c_size_t, ctypes.POINTER(P)]),
        "ep_finalize_size": (ctypes.c_int, [P, P, ctypes.c_size_t]),
        "ep_pool_trim": (ctypes.c_int, [P, ctypes.POINTER(ctypes.c_size_t)]),
        "ep_pool_stats": (ctypes.c_int, [P, ctypes.POINTER(_Stats)]),
        "ep_pool_backend": (ctypes.c_char_p, [P]),
        "ep_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "ep_version": (ctypes.c_char_p, []),
        "ep_pool_reasons": (ctypes.c_char_p, [P]),
        "ep_pool_guards": (ctypes.c_uint, [P, ctypes.c_char_p, ctypes.c_size_t]),
        "ep_backend_probe": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(_Config),
                                            ctypes.c_char_p, ctypes.c_size_t]),
        "ep_set_name": (ctypes.c_int, [P, P, ctypes.c_char_p]),
        "ep_set_unwind": (ctypes.c_int, [P, P, ctypes.c_int, ctypes.c_size_t,
                                         ctypes.c_size_t]),
        "ep_symbolize": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_size_t,
                                        ctypes.POINTER(ctypes.c_size_t)]),
        "ep_backtrace": (ctypes.c_int, [ctypes.c_int]),
        "ep_fill_x86_int3": (None, [P, ctypes.c_size_t, P]),
    }
    for fname, (restype, argtypes) in protos.items():
        f = getattr(lib, fname)
        f.restype = restype
        f.argtypes = argtypes
    return lib


_lib: Optional[ctypes.CDLL] = None


def library() -> ctypes.CDLL:
    """The loaded ctypes.CDLL (loaded on first use)."""
    global _lib
    if _lib is None:
        _lib = _load_library()
    return _lib


def strerror(err: int) -> str:
    """ep_strerror(): the library's message for an error code (either sign)."""
    e = operator.index(err)
    if abs(e) > _INT_MAX:
        raise OverflowError("error code does not fit in int: %d" % e)
    msg: bytes = library().ep_strerror(-abs(e))
    return msg.decode()


def version() -> str:
    """ep_version(): the version of the library actually loaded."""
    v: bytes = library().ep_version()
    return v.decode()


def _check(rc: int, what: str) -> int:
    if rc < 0:
        raise OSError(-rc, "%s: %s" % (what, strerror(rc)))
    return rc


def _einval(what: str) -> OSError:
    return OSError(errno.EINVAL, "%s: %s" % (what, strerror(-errno.EINVAL)))


class _Allocation:
    """One live allocation as the binding knows it: the Image and the
    JitFunction made from it share this record, and it holds the pool.

    Image.buffer is a bytearray of the binding's (mirror) that stands for
    the staging buffer until finalize: the library reuses a staging buffer
    for other code once its allocation is finalized or freed, so Python
    must never hold a view of the library's own memory.  The mirror is
    copied into the staging buffer before each library call that reads it
    (finalize, write, shrink) and dropped when the staging buffer goes."""

    __slots__ = ("pool", "exec", "dead", "rw", "size", "finalized", "mirror", "views",
                 "kept", "__weakref__")

    def __init__(self, pool: "Pool", exec_addr: int, rw: int = 0, size: int = 0) -> None:
        self.pool = pool
        self.exec = exec_addr
        self.dead: Optional[str] = None  # "freed" or "closed" once unusable
        self.rw = rw                     # the staging buffer (alloc() only)
        self.size = size                 # bytes handed out, after shrinks
        self.finalized = False
        self.kept = False                # keep_staging(): rw outlives finalize
        self.mirror: Optional[bytearray] = None
        # the views of mirror Image.buffer handed out, released when it goes
        self.views: "List[weakref.ref[memoryview]]" = []

    def flush(self) -> None:
        """The mirror's bytes into the staging buffer."""
        if self.mirror is not None and self.rw:
            n = min(len(self.mirror), self.size)
            buf = (ctypes.c_char * n).from_buffer(self.mirror)
            ctypes.memmove(self.rw, buf, n)
            del buf

    def view(self) -> memoryview:
        """A new view of the mirror's .size bytes, made from the staging
        buffer's bytes on the first one."""
        if self.mirror is None:
            self.mirror = bytearray(ctypes.string_at(self.rw, self.size))
        v = memoryview(self.mirror)[:self.size]
        self.views = [r for r in self.views if r() is not None]
        self.views.append(weakref.ref(v))
        return v

    def drop_mirror(self) -> None:
        """Forget the mirror: the staging buffer is gone or is the code's
        no more.  The views handed out are released (using one raises
        ValueError); one the caller exported further, or sliced, stays a
        view of a bytearray no code reads."""
        for r in self.views:
            v = r()
            if v is not None:
                try:
                    v.release()
                except BufferError:
                    pass
        self.views = []
        self.mirror = None


def _dead_text(alloc: _Allocation) -> str:
    return "freed" if alloc.dead == "freed" else "unmapped by Pool.close()"


class Image:
    """A reservation from Pool.alloc(): exec address, staging buffer, size."""

    _alloc: Optional[_Allocation] = None  # set by Pool.alloc(); None by hand

    def __init__(self, exec_addr: int, rw_addr: int, size: int) -> None:
        self.exec = exec_addr
        self.rw = rw_addr
        self.size = size

    @property
    def buffer(self) -> memoryview:
        """The staging buffer as a writable memoryview of .size bytes
        (format "B"), for writing code without ctypes:
        img.buffer[:len(code)] = code, struct.pack_into(..., img.buffer, ...).

        It starts as the staging buffer holds it (the trap fill) and
        reaches it at finalize() (or at write() and shrink() before then).
        Once the Image is finalized, freed or its pool closed it raises
        ValueError, and so does a view taken before (its slices are
        bytes no code reads): patch live code with Pool.write().  After
        Pool.keep_staging() it stays readable past finalize, as the bytes
        written, until Pool.release_staging()."""
        alloc = self._alloc
        if alloc is None or not alloc.rw:
            raise ValueError("%r has no staging buffer: only Pool.alloc() makes one" % self)
        if alloc.dead is not None:
            raise ValueError("buffer of %r: it was %s" % (self, _dead_text(alloc)))
        if alloc.finalized and not alloc.kept:
            raise ValueError("buffer of %r: it is finalized, its staging buffer is gone "
                             "(patch it with Pool.write())" % self)
        return alloc.view()

    def __repr__(self) -> str:
        return "Image(exec=0x%x, size=%d)" % (self.exec, self.size)


# ctypes integer and pointer codes whose conversion of a Python int drops
# the high bits: argument range checks for JitFunction calls
_SIGNED_CODES = "bhilq"
_INTEGER_CODES = "bBhHiIlLqQP"


def _arg_range(argtype: Any) -> Optional[Tuple[int, int]]:
    code = getattr(argtype, "_type_", None)
    if not (isinstance(argtype, type) and issubclass(argtype, ctypes._SimpleCData)
            and isinstance(code, str) and code in _INTEGER_CODES):
        return None
    bits = 8 * ctypes.sizeof(argtype)
    if code in _SIGNED_CODES:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


# the Python type a JitFunction's call returns (its restype's value type)
_R = TypeVar("_R")
_T = TypeVar("_T")


class JitFunction(Generic[_R]):
    """Machine code loaded by Pool.load(), callable like a ctypes function.

    Calling it after pool.free() of it or after pool.close() raises
    ValueError; it keeps its pool alive while it is referenced.  As a
    context manager it frees its code when the block ends.  It is generic
    in what a call returns: Pool.load() gives a JitFunction[float] for
    restype=ctypes.c_double, JitFunction[int] by default (c_int),
    JitFunction[None] for restype=None, so type checkers know the result."""

    def __init__(self, pool: "Pool", image: Image, restype: Any,
                 argtypes: Iterable[Any]) -> None:
        self.pool = pool
        self.address = image.exec
        self.size = image.size
        alloc = image._alloc if isinstance(image, Image) else None
        if alloc is None:
            alloc = pool._track(image.exec)
        self._alloc = alloc
        types = tuple(argtypes)
        proto = ctypes.CFUNCTYPE(restype, *types)
        self._fn: Callable[..., Any] = proto(image.exec)
        self._ranges = tuple((i, r[0], r[1], str(types[i].__name__))
                             for i, r in enumerate(map(_arg_range, types))
                             if r is not None)

    def __call__(self, *args: Any) -> _R:
        if self._alloc.dead is not None:
            raise ValueError("call of %r: the code was %s"
                             % (self, _dead_text(self._alloc)))
        for i, lo, hi, name in self._ranges:
            if i < len(args):
                a = args[i]
                if isinstance(a, int) and not lo <= a <= hi:
                    raise OverflowError("argument %d does not fit in %s: %d"
                                        % (i + 1, name, a))
        result: _R = self._fn(*args)
        return result

    def __enter__(self) -> "JitFunction[_R]":
        return self

    def __exit__(self, *exc: object) -> None:
        """Free the code, unless it is freed or its pool closed already."""
        if self._alloc.dead is None and not self.pool.closed:
            self.pool.free(self)

    def __repr__(self) -> str:
        return "<JitFunction at 0x%x, %d bytes>" % (self.address, self.size)


_default_pool: "Optional[Pool]" = None
_default_lock = threading.Lock()


class Pool:
    """A libexecpack pool.  Use it as a context manager, or call close()."""

    def __init__(self, backend: Union[str, int] = "auto", pack_size: int = 0,
                 limit: int = 0, flags: int = 0,
                 path: Optional[Union[str, bytes, "os.PathLike[str]"]] = None,
                 near: "NearAddress" = None, code_range: int = 0,
                 chunk_size: int = 0) -> None:
        """Create a pool (ep_pool_create()).

        near places every pack of the pool within 2 GiB (less the pack
        size) of an address of the program's code, so that JIT code reaches
        it with a call or jmp rel32: an int address, a ctypes function
        pointer (libc.abs, a CFUNCTYPE callback), a c_void_p, or a
        JitFunction; None (or 0) places packs anywhere.  When nothing that
        near can be mapped, Pool() or alloc() raises
        OSError(EADDRNOTAVAIL); the kmod backend raises OSError(EOPNOTSUPP).

        code_range, a size in bytes (0: none), reserves one range of address
        space that holds every pack and large allocation of the pool, so
        that any two of them are less than code_range apart (a call rel32
        reaches from one to any other for up to 2 GiB).  A full range makes
        alloc() raise OSError(ENOMEM); less than one pack raises
        OSError(EINVAL).

        chunk_size is the grain of packs: 0 (64 bytes, CHUNK_SIZE), or 16
        or 32 for tiny code such as 15-byte thunks, which then take 16
        bytes each; any other value raises OSError(EINVAL)."""
        self._handle: Optional[int] = None
        self._shared = False  # Pool.default(): never destroyed
        # exec address -> _Allocation of what this pool handed out and
        # is still referenced: free() and close() mark them dead
        self._live: "weakref.WeakValueDictionary[int, _Allocation]" = \
            weakref.WeakValueDictionary()
        cfg = _config(backend, pack_size, limit, flags, path, near, code_range, chunk_size)
        lib = library()
        handle = ctypes.c_void_p()
        _check(lib.ep_pool_create(ctypes.byref(cfg), ctypes.byref(handle)), "ep_pool_create")
        self._handle = handle.value

    @classmethod
    def default(cls) -> "Pool":
        """The process-wide pool (ep_default_pool()), shared with every
        library of the process that uses it: the same Pool object on
        every call.  It is never destroyed: close() (and leaving a with
        block) does nothing to it, as ep_pool_destroy() does nothing to the
        default pool; its code lives until freed or the process ends.
        OSError(ENOMEM) when no pool can be made now (a later call tries
        again)."""
        global _default_pool
        with _default_lock:
            if _default_pool is None:
                handle = library().ep_default_pool()
                if not handle:
                    raise OSError(errno.ENOMEM, "ep_default_pool: no pool can be made now")
                pool = cls.__new__(cls)
                pool._handle = handle
                pool._shared = True
                pool._live = weakref.WeakValueDictionary()
                _default_pool = pool
            return _default_pool

    @property
    def is_default(self) -> bool:
        """Whether this is Pool.default(), the process-wide pool."""
        return self._shared

    # -- lifetime ---------------------------------------------------------
    def close(self) -> None:
        """ep_pool_destroy(): unmaps all code of the pool.  Idempotent.

        Functions and Images of the pool are dead afterwards: a call raises
        ValueError, a method given one raises OSError(EINVAL).  On
        Pool.default() it does nothing (the default pool is never
        destroyed)."""
        if self._shared:
            return
        if self._handle is not None:
            for alloc in list(self._live.values()):
                alloc.dead = "closed"
                alloc.drop_mirror()
            self._live.clear()
            library().ep_pool_destroy(self._handle)
            self._handle = None

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _h(self, what: str) -> int:
        if self._handle is None:
            raise _einval("%s: the pool is closed" % what)
        return self._handle

    def _track(self, exec_addr: int, rw: int = 0, size: int = 0) -> _Allocation:
        alloc = _Allocation(self, exec_addr, rw, size)
        self._live[exec_addr] = alloc
        return alloc

    def _mirrored(self, addr: int) -> Optional[_Allocation]:
        """The allocation with an Image.buffer mirror whose bytes hold addr."""
        for alloc in list(self._live.values()):
            if alloc.mirror is not None and alloc.exec <= addr < alloc.exec + alloc.size:
                return alloc
        return None

    def _target(self, target: Union["JitFunction[Any]", Image, int],
                what: str) -> Tuple[int, Optional[_Allocation]]:
        """(exec address, its _Allocation or None) of a free/write/finalize
        target; raises for a dead one, one of another pool, a bad address."""
        if isinstance(target, (JitFunction, Image)):
            alloc = target._alloc
            if alloc is not None:
                if alloc.pool is not self:
                    raise _einval("%s: %r belongs to another pool" % (what, target))
                if alloc.dead is not None:
                    raise _einval("%s: %r was %s" % (what, target, _dead_text(alloc)))
            addr = target.address if isinstance(target, JitFunction) else target.exec
            addr = _unsigned(addr, _UINTPTR_MAX, "a pointer", "address")
            return addr, alloc if alloc is not None else self._live.get(addr)
        if isinstance(target, int):
            addr = _unsigned(target, _UINTPTR_MAX, "a pointer", "address")
            return addr, self._live.get(addr)
        raise TypeError("expected a JitFunction, an Image or an address, not %s"
                        % type(target).__name__)

    # -- the C calls --------------------------------------------------------
    def alloc(self, size: int, align: int = 0) -> Image:
        """ep_alloc(): an Image whose .rw is filled before finalize(.exec).
        align (a power of two): ep_alloc_aligned(), .exec a multiple of it."""
        size = _unsigned(size, _SIZE_MAX, "size_t", "size")
        align = _unsigned(align, _SIZE_MAX, "size_t", "align")
        img = _Image()
        if align:
            _check(library().ep_alloc_aligned(self._h("ep_alloc_aligned"), size, align,
                                              ctypes.byref(img)), "ep_alloc_aligned")
        else:
            _check(library().ep_alloc(self._h("ep_alloc"), size, ctypes.byref(img)), "ep_alloc")
        return self._image(img)

    def alloc_data(self, size: int, kind: int = DATA_RO, align: int = 0) -> Image:
        """ep_alloc_data(): data beside the pool's code (DATA_RO: read-only
        after finalize, DATA_RW: writable at .exec after it; never
        executable), staged in .rw as code is."""
        size = _unsigned(size, _SIZE_MAX, "size_t", "size")
        align = _unsigned(align, _SIZE_MAX, "size_t", "align")
        kind = _unsigned(kind, _UINT_MAX, "unsigned int", "kind")
        img = _Image()
        _check(library().ep_alloc_data(self._h("ep_alloc_data"), size, align, kind,
                                       ctypes.byref(img)), "ep_alloc_data")
        return self._image(img)

    def _image(self, img: _Image) -> Image:
        image = Image(int(img.exec or 0), int(img.rw or 0), int(img.size))
        image._alloc = self._track(image.exec, image.rw, image.size)
        return image

    def finalize_group(self, targets: Iterable[Union["JitFunction[Any]", Image, int]]) -> None:
        """ep_finalize_group(): finalize all of targets as one; on an error
        (raised) none of them is, each staged as it was."""
        h = self._h("ep_finalize_group")
        pairs = [self._target(t, "ep_finalize_group") for t in targets]
        for _, alloc in pairs:
            if alloc is not None:
                alloc.flush()
        arr = (ctypes.c_void_p * max(len(pairs), 1))(*[a for a, _ in pairs])
        _check(library().ep_finalize_group(h, arr, len(pairs)), "ep_finalize_group")
        for _, alloc in pairs:
            if alloc is not None:
                alloc.finalized = True
                if not alloc.kept:
                    alloc.drop_mirror()

    def keep_staging(self, target: Union["JitFunction[Any]", Image, int]) -> None:
        """ep_keep_staging(): the staging buffer (and Image.buffer) stays
        readable past finalize until release_staging() or free()."""
        h = self._h("ep_keep_staging")
        addr, alloc = self._target(target, "ep_keep_staging")
        _check(library().ep_keep_staging(h, addr), "ep_keep_staging")
        if alloc is not None:
            alloc.kept = True

    def release_staging(self, target: Union["JitFunction[Any]", Image, int]) -> None:
        """ep_release_staging(): give back the buffer keep_staging() kept."""
        h = self._h("ep_release_staging")
        addr, alloc = self._target(target, "ep_release_staging")
        _check(library().ep_release_staging(h, addr), "ep_release_staging")
        if alloc is not None:
            alloc.kept = False
            if alloc.finalized:
                alloc.drop_mirror()

    def set_symbols(self, target: Union["JitFunction[Any]", Image, int],
                    symbols: Iterable[Tuple[int, int, Union[str, bytes]]]) -> None:
        """ep_set_symbols(): name parts of an allocation, (offset, size,
        name) each, for symbolize(), lookup(), perf and debuggers."""
        h = self._h("ep_set_symbols")
        addr, _ = self._target(target, "ep_set_symbols")
        syms = list(symbols)
        arr = (_Symbol * max(len(syms), 1))()
        for i, (off, size, name) in enumerate(syms):
            raw = name.encode() if isinstance(name, str) else bytes(name)
            if b"\0" in raw:
                raise ValueError("name contains a null byte: %r" % raw)
            arr[i].offset = _unsigned(off, _SIZE_MAX, "size_t", "offset")
            arr[i].size = _unsigned(size, _SIZE_MAX, "size_t", "size")
            arr[i].name = raw
        _check(library().ep_set_symbols(h, addr, arr, len(syms)), "ep_set_symbols")

    def write(self, target: Union["JitFunction[Any]", Image, int], data: bytes,
              offset: int = 0) -> None:
        """ep_write(): copy data to the executable address of target + offset."""
        h = self._h("ep_write")
        addr, _ = self._target(target, "ep_write")
        offset = _unsigned(offset, _UINTPTR_MAX, "a pointer", "offset")
        if addr + offset > _UINTPTR_MAX:
            raise OverflowError("ep_write: address 0x%x + offset %d does not fit in a pointer"
                                % (addr, offset))
        if isinstance(data, int):
            # bytes(n) would be n zero bytes, not the value
            raise TypeError("data must be bytes-like, not int")
        code = bytes(data)
        buf = ctypes.create_string_buffer(code, len(code))
        mirrored = self._mirrored(addr + offset)
        if mirrored is not None:
            mirrored.flush()
        _check(library().ep_write(h, addr + offset, buf, len(code)), "ep_write")
        if mirrored is not None and mirrored.mirror is not None:
            # the staging buffer has the bytes now; so must Image.buffer
            start = addr + offset - mirrored.exec
            mirrored.mirror[start:start + len(code)] = code

    def finalize(self, target: Union["JitFunction[Any]", Image, int]) -> None:
        """ep_finalize(): copy the staging buffer into place."""
        h = self._h("ep_finalize")
        addr, alloc = self._target(target, "ep_finalize")
        if alloc is not None:
            alloc.flush()
        _check(library().ep_finalize(h, addr), "ep_finalize")
        if alloc is not None:
            # the staging buffer is the library's again (reused for other
            # code): Image.buffer must not reach it, unless it is kept
            alloc.finalized = True
            if not alloc.kept:
                alloc.drop_mirror()

    def free(self, target: Union["JitFunction[Any]", Image, int]) -> None:
        """ep_free(): release a JitFunction, Image or exec address.

        What was loaded there is dead afterwards: calling it raises
        ValueError, freeing it again raises OSError(EINVAL)."""
        h = self._h("ep_free")
        addr, alloc = self._target(target, "ep_free")
        _check(library().ep_free(h, addr), "ep_free")
        if alloc is not None:
            alloc.dead = "freed"
            alloc.drop_mirror()
        if self._live.get(addr) is alloc:
            self._live.pop(addr, None)

    def shrink(self, target: Union["JitFunction[Any]", Image, int], size: int) -> None:
        """ep_shrink(): keep the first size bytes of an allocation (a
        JitFunction, an Image or its exec address) and give back the whole
        chunks past them, before or after finalize(); the code does not move.

        The Image or JitFunction given gets .size lowered to size.  Size 0,
        more than the allocation has left, or a freed allocation raise
        OSError(EINVAL): it never grows.  Use free() to give back all."""
        h = self._h("ep_shrink")
        addr, alloc = self._target(target, "ep_shrink")
        size = _unsigned(size, _SIZE_MAX, "size_t", "size")
        if alloc is not None:
            alloc.flush()
        _check(library().ep_shrink(h, addr, size), "ep_shrink")
        if isinstance(target, (JitFunction, Image)) and size < target.size:
            target.size = size
        if alloc is not None and size < alloc.size:
            alloc.size = size

    def finalize_size(self, target: Union["JitFunction[Any]", Image, int], size: int) -> None:
        """ep_finalize_size(): shrink to size bytes and finalize in one call;
        only those bytes of the staging buffer are copied, the whole chunks
        past them given back.  The Image gets .size lowered to size."""
        h = self._h("ep_finalize_size")
        addr, alloc = self._target(target, "ep_finalize_size")
        size = _unsigned(size, _SIZE_MAX, "size_t", "size")
        if alloc is not None:
            alloc.flush()
        _check(library().ep_finalize_size(h, addr, size), "ep_finalize_size")
        if isinstance(target, (JitFunction, Image)) and size < target.size:
            target.size = size
        if alloc is not None:
            alloc.finalized = True
            alloc.drop_mirror()
            if size < alloc.size:
                alloc.size = size

    def trim(self) -> int:
        """ep_pool_trim(): give back now the empty packs, the committed
        tails of the others and the staging buffers the pool keeps for
        reuse; the bytes given back."""
        released = ctypes.c_size_t(0)
        _check(library().ep_pool_trim(self._h("ep_pool_trim"), ctypes.byref(released)),
               "ep_pool_trim")
        return int(released.value)

    @overload
    def load(self, machine_code: bytes, restype: None,
             argtypes: Iterable[Any] = ()) -> JitFunction[None]: ...

    @overload
    def load(self, machine_code: bytes, restype: "Type[ctypes._SimpleCData[_T]]",
             argtypes: Iterable[Any] = ()) -> JitFunction[_T]: ...

    @overload
    def load(self, machine_code: bytes, *,
             argtypes: Iterable[Any] = ()) -> JitFunction[int]: ...

    @overload
    def load(self, machine_code: bytes, restype: Any,
             argtypes: Iterable[Any] = ()) -> JitFunction[Any]: ...

    def load(self, machine_code: bytes, restype: Any = ctypes.c_int,
             argtypes: Iterable[Any] = ()) -> JitFunction[Any]:
        """Put machine_code in place and make it executable in one call
        (ep_add(): no staging buffer): a callable JitFunction.

        Its calls return what ctypes makes of restype (default c_int: an
        int; c_double: a float; None: None), and it is typed so."""
        if isinstance(machine_code, int):
            raise TypeError("machine_code must be bytes-like, not int")
        code = bytes(machine_code)
        if not code:
            raise _einval("load: empty machine code")
        h = self._h("ep_add")
        types = tuple(argtypes)
        buf = ctypes.create_string_buffer(code, len(code))
        addr = ctypes.c_void_p()
        _check(library().ep_add(h, buf, len(code), ctypes.byref(addr)), "ep_add")
        img = Image(int(addr.value or 0), 0, len(code))
        img._alloc = self._track(img.exec, 0, len(code))
        img._alloc.finalized = True
        try:
            return JitFunction(self, img, restype, types)
        except BaseException:
            self.free(img)
            raise

    def stats(self) -> Dict[str, int]:
        """ep_pool_stats() as a dict keyed by the struct ep_stats field names."""
        st = _Stats()
        _check(library().ep_pool_stats(self._h("ep_pool_stats"), ctypes.byref(st)),
               "ep_pool_stats")
        return {name: int(getattr(st, name)) for name, _ in _Stats._fields_}

    @property
    def backend(self) -> str:
        """ep_pool_backend(): "memfd", "hugetlb" or "kmod"."""
        name: bytes = library().ep_pool_backend(self._h("ep_pool_backend"))
        return name.decode()

    @property
    def reasons(self) -> str:
        """ep_pool_reasons(): why AUTO passed over the backends it did not
        take, "name: reason; name: reason" ("" when it took the first)."""
        text: Optional[bytes] = library().ep_pool_reasons(self._h("ep_pool_reasons"))
        return (text or b"").decode(errors="replace")

    @property
    def guards(self) -> Tuple[int, str]:
        """ep_pool_guards(): the GUARD_* bits that protect this pool's code,
        and "name: reason; ..." for those that do not ("" when all do)."""
        why = ctypes.create_string_buffer(512)
        bits: int = library().ep_pool_guards(self._h("ep_pool_guards"), why, len(why))
        return int(bits), why.value.decode(errors="replace")

    def set_name(self, target: Union["JitFunction[Any]", Image, int],
                 name: Union[str, bytes]) -> None:
        """ep_set_name(): name the allocation for symbolize(), perf and
        debuggers.  A name longer than NAME_MAX bytes or with a null byte
        raises ValueError; the library's own errors raise OSError."""
        h = self._h("ep_set_name")
        addr, _ = self._target(target, "ep_set_name")
        raw = name.encode() if isinstance(name, str) else bytes(name)
        if b"\0" in raw:
            raise ValueError("name contains a null byte: %r" % raw)
        if len(raw) > NAME_MAX:
            raise ValueError("name is %d bytes, more than NAME_MAX (%d)" % (len(raw), NAME_MAX))
        _check(library().ep_set_name(h, addr, raw), "ep_set_name")

    def patch(self, target: Union["JitFunction[Any]", Image, int], offset: int = 0,
              length: Optional[int] = None) -> "Window":
        """ep_patch_begin(): a patch window on finalized code (execpack.Window:
        commit() or abort(); a context manager that commits)."""
        from ._patch import Window
        return Window(self, target, offset, length)

    def set_unwind(self, target: Union["JitFunction[Any]", Image, int], kind: int,
                   prologue: int = 0, frame: int = 0) -> None:
        """ep_set_unwind(): how libunwind unwinds the allocation (UNWIND_*);
        OSError(EOPNOTSUPP) for the DWARF kinds without libunwind."""
        h = self._h("ep_set_unwind")
        addr, _ = self._target(target, "ep_set_unwind")
        kind = _unsigned(kind, _INT_MAX, "int", "kind")
        prologue = _unsigned(prologue, _SIZE_MAX, "size_t", "prologue")
        frame = _unsigned(frame, _SIZE_MAX, "size_t", "frame")
        _check(library().ep_set_unwind(h, addr, kind, prologue, frame), "ep_set_unwind")


def _near_address(near: NearAddress) -> Optional[int]:
    """The address Pool(near=...) stands for, None for NULL."""
    if near is None:
        return None
    if isinstance(near, JitFunction):
        addr: Any = near.address
    elif isinstance(near, ctypes.c_void_p):
        addr = near.value or 0
    elif isinstance(near, _CFuncPtr):
        addr = ctypes.cast(near, ctypes.c_void_p).value or 0
    elif isinstance(near, (int, SupportsIndex)):
        addr = near
    else:
        raise TypeError("near must be an address (int), a ctypes function pointer, "
                        "a c_void_p or a JitFunction, not %s" % type(near).__name__)
    v = _unsigned(addr, _UINTPTR_MAX, "a pointer", "near")
    return v or None


def _config(backend: Union[str, int], pack_size: int, limit: int, flags: int,
            path: Optional[Union[str, bytes, "os.PathLike[str]"]],
            near: NearAddress = None, code_range: int = 0,
            chunk_size: int = 0) -> _Config:
    """A struct ep_config from checked Python values (Pool() and probe())."""
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ValueError("unknown backend %r (one of %s)"
                             % (backend, ", ".join(sorted(BACKENDS))))
        code = BACKENDS[backend]
    else:
        code = _unsigned(backend, _INT_MAX, "int", "backend")
    cfg = _Config()
    cfg.sz = ctypes.sizeof(_Config)
    cfg.backend = code
    cfg.pack_size = _unsigned(pack_size, _SIZE_MAX, "size_t", "pack_size")
    cfg.limit = _unsigned(limit, _SIZE_MAX, "size_t", "limit")
    cfg.flags = _unsigned(flags, _UINT_MAX, "unsigned int", "flags")
    raw = None
    if path is not None:
        raw = os.fsencode(path)
        if b"\0" in raw:
            # a C string would end there: another path than asked for
            raise ValueError("path contains a null byte: %r" % raw)
    cfg.path = raw
    cfg.near = _near_address(near)
    cfg.code_range = _unsigned(code_range, _SIZE_MAX, "size_t", "code_range")
    cfg.chunk_size = _unsigned(chunk_size, _SIZE_MAX, "size_t", "chunk_size")
    return cfg

