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
"""

import ctypes
import ctypes.util
import errno
import os

__all__ = ["Pool", "JitFunction", "Image", "version", "strerror", "library"]

# enum ep_backend
BACKENDS = {"auto": 0, "memfd": 1, "hugetlb": 2, "kmod": 3}

# ep_config.flags
F_RANDOMIZE = 1 << 0
F_SEAL = 1 << 1
F_PERFMAP = 1 << 2

CHUNK_SIZE = 64

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
    return library().ep_strerror(-abs(int(err))).decode()


def version():
    """ep_version(): the version of the library actually loaded."""
    return library().ep_version().decode()


def _check(rc, what):
    if rc < 0:
        raise OSError(-rc, "%s: %s" % (what, strerror(rc)))
    return rc


def _einval(what):
    return OSError(errno.EINVAL, "%s: %s" % (what, strerror(-errno.EINVAL)))


class Image:
    """A reservation from Pool.alloc(): exec address, staging buffer, size."""

    def __init__(self, exec_addr, rw_addr, size):
        self.exec = exec_addr
        self.rw = rw_addr
        self.size = size

    def __repr__(self):
        return "Image(exec=0x%x, size=%d)" % (self.exec, self.size)


class JitFunction:
    """Machine code loaded by Pool.load(), callable like a ctypes function."""

    def __init__(self, pool, image, restype, argtypes):
        self.pool = pool
        self.address = image.exec
        self.size = image.size
        proto = ctypes.CFUNCTYPE(restype, *argtypes)
        self._fn = proto(image.exec)

    def __call__(self, *args):
        return self._fn(*args)

    def __repr__(self):
        return "<JitFunction at 0x%x, %d bytes>" % (self.address, self.size)


class Pool:
    """A libexecpack pool.  Use it as a context manager, or call close()."""

    def __init__(self, backend="auto", pack_size=0, limit=0, flags=0, path=None):
        if isinstance(backend, str):
            if backend not in BACKENDS:
                raise _einval("unknown backend %r" % backend)
            backend = BACKENDS[backend]
        self._handle = None
        lib = library()
        cfg = _Config()
        cfg.sz = ctypes.sizeof(_Config)
        cfg.backend = int(backend)
        cfg.pack_size = pack_size
        cfg.limit = limit
        cfg.flags = flags
        cfg.path = os.fsencode(path) if path is not None else None
        handle = ctypes.c_void_p()
        _check(lib.ep_pool_create(ctypes.byref(cfg), ctypes.byref(handle)), "ep_pool_create")
        self._handle = handle.value

    # -- lifetime ---------------------------------------------------------
    def close(self):
        """ep_pool_destroy(): unmaps all code of the pool.  Idempotent."""
        if self._handle is not None:
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

    # -- the C calls --------------------------------------------------------
    def alloc(self, size):
        """ep_alloc(): an Image whose .rw is filled before finalize(.exec)."""
        img = _Image()
        _check(library().ep_alloc(self._h("ep_alloc"), size, ctypes.byref(img)), "ep_alloc")
        return Image(img.exec, img.rw, img.size)

    def write(self, target, data, offset=0):
        """ep_write(): copy data to the executable address of target + offset."""
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        _check(library().ep_write(self._h("ep_write"), _address(target) + offset,
                                  buf, len(data)), "ep_write")

    def finalize(self, target):
        """ep_finalize(): copy the staging buffer into place."""
        _check(library().ep_finalize(self._h("ep_finalize"), _address(target)), "ep_finalize")

    def free(self, target):
        """ep_free(): release a JitFunction, Image or exec address."""
        _check(library().ep_free(self._h("ep_free"), _address(target)), "ep_free")

    def load(self, machine_code, restype=ctypes.c_int, argtypes=()):
        """Allocate, copy machine_code, finalize: a callable JitFunction."""
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


def _address(target):
    if isinstance(target, JitFunction):
        return target.address
    if isinstance(target, Image):
        return target.exec
    if isinstance(target, int):
        return target
    raise TypeError("expected a JitFunction, an Image or an address, not %s"
                    % type(target).__name__)
