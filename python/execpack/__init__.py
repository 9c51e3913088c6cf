# SPDX-License-Identifier: LGPL-2.1-or-later
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
expose image.exec before the code is written.  The code goes into
image.buffer, a writable memoryview of the staging buffer (no ctypes
needed), until finalize():

    img = pool.alloc(64)
    img.buffer[:len(code)] = code                   # or struct.pack_into()
    pool.finalize(img)

The view stands for the staging buffer, which the library reuses for other
code once the image is finalized or freed: from then on image.buffer and
every view taken of it raise ValueError (patch live code with
pool.write()).

A JitFunction is a context manager that frees its code when the block
ends (`with pool.load(code) as f: ...`), and it is typed by what its calls
return: pool.load(code, restype=ctypes.c_double) is a
JitFunction[float], the default (c_int) a JitFunction[int], restype=None a
JitFunction[None], so that mypy knows what f() gives.

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

Sizes and placement.  pool.shrink(f, n) keeps the first n bytes of an
allocation and gives the whole chunks past them back, before or after
finalize() (allocate an upper bound, assemble, shrink to what was used);
it never grows one, and a size of 0 or more than is left raises
OSError(EINVAL).  Pool(near=address) keeps all code of the pool within
2 GiB of an address of the program (an int, a ctypes function pointer
such as libc.abs, a c_void_p or a JitFunction), so that the code can call
it with a call rel32; when nothing that near can be mapped, Pool() or
alloc() raises OSError(EADDRNOTAVAIL).  Pool(code_range=size) keeps every
allocation of the pool inside one range of that size, reserved at
creation, so that JIT code calls any other of the pool's with a call
rel32 (up to 2 GiB); a full range raises OSError(ENOMEM) from alloc(),
one smaller than a pack OSError(EINVAL).  Pool(chunk_size=16) (or 32)
packs tiny code on a finer grain than the default 64 bytes (CHUNK_SIZE):
a 15-byte thunk takes 16 bytes; other sizes raise OSError(EINVAL).

Diagnostics.  pool.set_name(f, "name") names code for symbolize(address)
(which gives (name, offset) or None), perf and debuggers (with the flags
F_PERFMAP and F_JITDUMP, perf's map and jitdump files get it too);
pool.set_unwind() tells libunwind how to step through it; backtrace(fd)
writes the calling thread's backtrace; probe("kmod") says whether a backend
works here and why not; pool.reasons says why AUTO passed over the others;
pool.guards which of the hardware's guards protect the code (GUARD_PKEY,
GUARD_BTI) and why the others do not (F_NO_PKEY, F_BTI choose them).
Patching published code.  pool.patch(f, offset, length) opens a patch
window (ep_patch_begin(3)): window.buffer holds the live bytes, to
rewrite; window.commit() writes the words that changed, each in one store
(a thread running the code sees old or new instructions), abort() writes
nothing; as a context manager it commits when the block ends and aborts
when it raises.  One window per allocation (OSError(EBUSY)); finalized
code only.  pool.free() of the code closes its window (abort() then does
nothing, commit() raises); a Window collected while open aborts.
F_KEEP_STAGING keeps the staging buffer for the windows.
A JIT that links modules (code, read-only and writable data, as LLVM's
JITLink does) allocates with alloc(size, align) and alloc_data(size,
DATA_RO or DATA_RW, align): the data lies within a 32-bit displacement of
the pool's code.  keep_staging() keeps Image.buffer readable past
finalize until release_staging(); finalize_group() finalizes a module's
parts all or nothing; set_symbols() names the functions inside one
allocation.
lookup(address) gives the Info (exec, size, name...) of the live
allocation of any pool that holds an address, or None.

ep_config.fill is not offered: a fill must never fail, and Python code can
(fill_x86_int3() is the library's own fill, for buffers of the caller).
"""

from ._core import (BACKENDS, CHUNK_SIZE, DATA_RO, DATA_RW, F_BTI, F_JITDUMP, F_NO_PKEY, F_PERFMAP, F_RANDOMIZE,
                    F_SEAL, GUARD_BTI, GUARD_PKEY, NAME_MAX, STAGE_ALIGN, UNWIND_DWARF_FP, UNWIND_DWARF_SP,
                    UNWIND_NAME, Image, JitFunction, Pool, library, strerror, version)
from ._diag import backtrace, fill_x86_int3, probe, symbolize
from ._patch import F_KEEP_STAGING, INFO_FINALIZED, INFO_LARGE, INFO_NAMED, Info, Window, lookup

# The version of this package, which is that of the libexecpack sources it
# comes from (include/execpack.h; the tests check that they agree).
# version() is the library's actually loaded.
__version__ = "0.1.0"

__all__ = ["Pool", "JitFunction", "Image", "version", "strerror", "library",
           "probe", "symbolize", "backtrace", "fill_x86_int3", "lookup", "Info", "Window",
           "F_KEEP_STAGING", "INFO_FINALIZED", "INFO_LARGE", "INFO_NAMED",
           "BACKENDS", "F_RANDOMIZE", "F_SEAL", "F_PERFMAP", "F_JITDUMP", "F_NO_PKEY", "F_BTI",
           "GUARD_PKEY", "GUARD_BTI", "CHUNK_SIZE", "STAGE_ALIGN", "NAME_MAX", "UNWIND_NAME", "UNWIND_DWARF_FP",
           "UNWIND_DWARF_SP", "DATA_RO", "DATA_RW", "__version__"]
