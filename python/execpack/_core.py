"""execpack - run machine code from Python with libexecpack (ctypes only).

    import ctypes, execpack

    with execpack.Pool() as pool:
        add = pool.load(bytes.fromhex("8d0437c3"),          # lea eax,[rdi+rsi]; ret
                        restype=ctypes.c_int,
                        argtypes=(ctypes.c_int, ctypes.c_int))
        assert add(2, 3) == 5
        pool.free(add)

The library is found through the EXECPACK_LIBRARY environment variable (a
path or a soname), else ctypes.util.find_library("execpack"), else
"libexecpack.so.0".  Every failure of a library call raises OSError whose
errno is the library's error code and whose strerror is ep_strerror()'s
message; a double free, for example, is OSError(errno.EINVAL, ...).

The code is position-dependent on purpose: pool.load() places it where it
will run, so relative addresses inside it are fine, but anything that needs
its final address must use Pool.alloc()/Pool.finalize() instead, which
expose image.exec before the code is written.

Lifetime.  A JitFunction or Image keeps its Pool alive: the pool is not
destroyed by garbage collection while anything loaded from it is still
referenced.  Pool.close() (or leaving the with block) is explicit and
unmaps the code at once: every JitFunction of that pool then raises
ValueError when called, as a closed file does on read(), and passing it
or its Image to any method raises OSError(EINVAL).  The same holds after
pool.free(f) (by function, Image or address): calling f raises ValueError,
and a second free, a write or a finalize through f raises OSError(EINVAL)
without reaching the library, so a stale handle can never touch code that
later reuses its address.  Giving a pool a function or Image of another
pool raises OSError(EINVAL) too.  Freeing or closing while another thread
is still inside a call of that function stays the caller's business, as in
C.  A raw address (a ctypes function made from image.exec by hand) is not
tracked.

Integers.  Every integer handed to the library is checked against the C
type it becomes (size_t, unsigned, int, a pointer) instead of being
truncated by ctypes: a negative size, offset, limit, flags value or
address raises ValueError, one too large for its type OverflowError, a
non-integer TypeError.  Integer arguments of a JitFunction whose argtypes
are ctypes integer or pointer types are checked the same way and raise
OverflowError outside the type's range.  An unknown backend name raises
ValueError; an integer backend that fits an int is left to the library,
which answers OSError(EINVAL) for one it does not know.
"""

import ctypes
import ctypes.util
import errno
import operator
import os
import weakref

__all__ = ["Pool", "JitFunction", "Image", "version", "strerror", "library"]

# enum ep_backend
BACKENDS = {"auto": 0, "memfd": 1, "hugetlb": 2, "kmod": 3}

# ep_config.flags
F_RANDOMIZE = 1 << 0
F_SEAL = 1 << 1
F_PERFMAP = 1 << 2

CHUNK_SIZE = 64

# The ranges of the C types the binding passes integers as.  ctypes itself
# would keep only the low bits of a value out of range.
_SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1
_UINT_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_uint))) - 1
_INT_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_int) - 1)) - 1
_UINTPTR_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1


def _unsigned(value, maximum, ctype, what):
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
    ]


class _Image(ctypes.Structure):
    _fields_ = [
        ("exec", ctypes.c_void_p),
        ("rw", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
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


def _load_library():
    name = os.environ.get("EXECPACK_LIBRARY") or ctypes.util.find_library("execpack")
    lib = ctypes.CDLL(name or "libexecpack.so.0")
    P = ctypes.c_void_p
    protos = {
        "ep_pool_create": (ctypes.c_int, [ctypes.POINTER(_Config), ctypes.POINTER(P)]),
        "ep_pool_destroy": (None, [P]),
        "ep_alloc": (ctypes.c_int, [P, ctypes.c_size_t, ctypes.POINTER(_Image)]),
        "ep_write": (ctypes.c_int, [P, P, P, ctypes.c_size_t]),
        "ep_finalize": (ctypes.c_int, [P, P]),
        "ep_free": (ctypes.c_int, [P, P]),
        "ep_pool_stats": (ctypes.c_int, [P, ctypes.POINTER(_Stats)]),
        "ep_pool_backend": (ctypes.c_char_p, [P]),
        "ep_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "ep_version": (ctypes.c_char_p, []),
    }
    for fname, (restype, argtypes) in protos.items():
        f = getattr(lib, fname)
        f.restype = restype
        f.argtypes = argtypes
    return lib


_lib = None


def library():
    """The loaded ctypes.CDLL (loaded on first use)."""
    global _lib
    if _lib is None:
        _lib = _load_library()
    return _lib


def strerror(err):
    """ep_strerror(): the library's message for an error code (either sign)."""
    e = operator.index(err)
    if abs(e) > _INT_MAX:
        raise OverflowError("error code does not fit in int: %d" % e)
    return library().ep_strerror(-abs(e)).decode()


def version():
    """ep_version(): the version of the library actually loaded."""
    return library().ep_version().decode()


def _check(rc, what):
    if rc < 0:
        raise OSError(-rc, "%s: %s" % (what, strerror(rc)))
    return rc


def _einval(what):
    return OSError(errno.EINVAL, "%s: %s" % (what, strerror(-errno.EINVAL)))


class _Allocation:
    """One live allocation as the binding knows it: the Image and the
    JitFunction made from it share this record, and it holds the pool."""

    __slots__ = ("pool", "exec", "dead", "__weakref__")

    def __init__(self, pool, exec_addr):
        self.pool = pool
        self.exec = exec_addr
        self.dead = None  # "freed" or "closed" once unusable


def _dead_text(alloc):
    return "freed" if alloc.dead == "freed" else "unmapped by Pool.close()"


class Image:
    """A reservation from Pool.alloc(): exec address, staging buffer, size."""

    _alloc = None  # set by Pool.alloc(); None for an Image made by hand

    def __init__(self, exec_addr, rw_addr, size):
        self.exec = exec_addr
        self.rw = rw_addr
        self.size = size

    def __repr__(self):
        return "Image(exec=0x%x, size=%d)" % (self.exec, self.size)


# ctypes integer and pointer codes whose conversion of a Python int drops
# the high bits: argument range checks for JitFunction calls
_SIGNED_CODES = "bhilq"
_INTEGER_CODES = "bBhHiIlLqQP"


def _arg_range(argtype):
    code = getattr(argtype, "_type_", None)
    if not (isinstance(argtype, type) and issubclass(argtype, ctypes._SimpleCData)
            and isinstance(code, str) and code in _INTEGER_CODES):
        return None
    bits = 8 * ctypes.sizeof(argtype)
    if code in _SIGNED_CODES:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


class JitFunction:
    """Machine code loaded by Pool.load(), callable like a ctypes function.

    Calling it after pool.free() of it or after pool.close() raises
    ValueError; it keeps its pool alive while it is referenced."""

    def __init__(self, pool, image, restype, argtypes):
        self.pool = pool
        self.address = image.exec
        self.size = image.size
        alloc = image._alloc if isinstance(image, Image) else None
        if alloc is None:
            alloc = pool._track(image.exec)
        self._alloc = alloc
        argtypes = tuple(argtypes)
        proto = ctypes.CFUNCTYPE(restype, *argtypes)
        self._fn = proto(image.exec)
        self._ranges = tuple((i, r[0], r[1], argtypes[i].__name__)
                             for i, r in enumerate(map(_arg_range, argtypes))
                             if r is not None)

    def __call__(self, *args):
        if self._alloc.dead is not None:
            raise ValueError("call of %r: the code was %s"
                             % (self, _dead_text(self._alloc)))
        for i, lo, hi, name in self._ranges:
            if i < len(args):
                a = args[i]
                if isinstance(a, int) and not lo <= a <= hi:
                    raise OverflowError("argument %d does not fit in %s: %d"
                                        % (i + 1, name, a))
        return self._fn(*args)

    def __repr__(self):
        return "<JitFunction at 0x%x, %d bytes>" % (self.address, self.size)


class Pool:
    """A libexecpack pool.  Use it as a context manager, or call close()."""

    def __init__(self, backend="auto", pack_size=0, limit=0, flags=0, path=None):
        self._handle = None
        # exec address -> _Allocation of what this pool handed out and
        # is still referenced: free() and close() mark them dead
        self._live = weakref.WeakValueDictionary()
        if isinstance(backend, str):
            if backend not in BACKENDS:
                raise ValueError("unknown backend %r (one of %s)"
                                 % (backend, ", ".join(sorted(BACKENDS))))
            backend = BACKENDS[backend]
        else:
            backend = _unsigned(backend, _INT_MAX, "int", "backend")
        cfg = _Config()
        cfg.sz = ctypes.sizeof(_Config)
        cfg.backend = backend
        cfg.pack_size = _unsigned(pack_size, _SIZE_MAX, "size_t", "pack_size")
        cfg.limit = _unsigned(limit, _SIZE_MAX, "size_t", "limit")
        cfg.flags = _unsigned(flags, _UINT_MAX, "unsigned int", "flags")
        if path is not None:
            path = os.fsencode(path)
            if b"\0" in path:
                # a C string would end there: another path than asked for
                raise ValueError("path contains a null byte: %r" % path)
        cfg.path = path
        lib = library()
        handle = ctypes.c_void_p()
        _check(lib.ep_pool_create(ctypes.byref(cfg), ctypes.byref(handle)), "ep_pool_create")
        self._handle = handle.value

    # -- lifetime ---------------------------------------------------------
    def close(self):
        """ep_pool_destroy(): unmaps all code of the pool.  Idempotent.

        Functions and Images of the pool are dead afterwards: a call raises
        ValueError, a method given one raises OSError(EINVAL)."""
        if self._handle is not None:
            for alloc in list(self._live.values()):
                alloc.dead = "closed"
            self._live.clear()
            library().ep_pool_destroy(self._handle)
            self._handle = None

    @property
    def closed(self):
        return self._handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _h(self, what):
        if self._handle is None:
            raise _einval("%s: the pool is closed" % what)
        return self._handle

    def _track(self, exec_addr):
        alloc = _Allocation(self, exec_addr)
        self._live[exec_addr] = alloc
        return alloc

    def _target(self, target, what):
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
    def alloc(self, size):
        """ep_alloc(): an Image whose .rw is filled before finalize(.exec)."""
        size = _unsigned(size, _SIZE_MAX, "size_t", "size")
        img = _Image()
        _check(library().ep_alloc(self._h("ep_alloc"), size, ctypes.byref(img)), "ep_alloc")
        image = Image(img.exec, img.rw, img.size)
        image._alloc = self._track(img.exec)
        return image

    def write(self, target, data, offset=0):
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
        _check(library().ep_write(h, addr + offset, buf, len(code)), "ep_write")

    def finalize(self, target):
        """ep_finalize(): copy the staging buffer into place."""
        h = self._h("ep_finalize")
        addr, _ = self._target(target, "ep_finalize")
        _check(library().ep_finalize(h, addr), "ep_finalize")

    def free(self, target):
        """ep_free(): release a JitFunction, Image or exec address.

        What was loaded there is dead afterwards: calling it raises
        ValueError, freeing it again raises OSError(EINVAL)."""
        h = self._h("ep_free")
        addr, alloc = self._target(target, "ep_free")
        _check(library().ep_free(h, addr), "ep_free")
        if alloc is not None:
            alloc.dead = "freed"
        if self._live.get(addr) is alloc:
            self._live.pop(addr, None)

    def load(self, machine_code, restype=ctypes.c_int, argtypes=()):
        """Allocate, copy machine_code, finalize: a callable JitFunction."""
        if isinstance(machine_code, int):
            raise TypeError("machine_code must be bytes-like, not int")
        code = bytes(machine_code)
        if not code:
            raise _einval("load: empty machine code")
        img = self.alloc(len(code))
        try:
            ctypes.memmove(img.rw, code, len(code))
            self.finalize(img)
        except BaseException:
            self.free(img)
            raise
        return JitFunction(self, img, restype, tuple(argtypes))

    def stats(self):
        """ep_pool_stats() as a dict keyed by the struct ep_stats field names."""
        st = _Stats()
        _check(library().ep_pool_stats(self._h("ep_pool_stats"), ctypes.byref(st)),
               "ep_pool_stats")
        return {name: getattr(st, name) for name, _ in _Stats._fields_}

    @property
    def backend(self):
        """ep_pool_backend(): "memfd", "hugetlb" or "kmod"."""
        return library().ep_pool_backend(self._h("ep_pool_backend")).decode()

