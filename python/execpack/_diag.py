# SPDX-License-Identifier: LGPL-2.1-or-later
"""execpack._diag: what the library says about code and backends (names,
backtraces, backend probes) and the trap fill, outside any one pool."""

import ctypes
import errno
from typing import Any, Optional, Tuple, Union

from ._core import (_INT_MAX, _UINTPTR_MAX, NearAddress, _check, _Config, _config, _unsigned,
                    library)

__all__ = ["probe", "symbolize", "backtrace", "fill_x86_int3"]

# Longest name plus its NUL: ep_symbolize() then never truncates.
_NAME_BUF = 256


def probe(backend: Union[str, int] = "auto", pack_size: int = 0, limit: int = 0,
          flags: int = 0, path: Optional[Union[str, bytes]] = None,
          near: NearAddress = None, code_range: int = 0,
          chunk_size: int = 0) -> Tuple[int, str]:
    """ep_backend_probe(): (0, why) when the backend works here with this
    configuration, else (-errno, the one-line reason).  For "auto", why
    names the backend AUTO would take.  Bad arguments raise as for Pool();
    near as for Pool(): -EADDRNOTAVAIL when nothing that near is free;
    code_range as for Pool(): -EINVAL when it is less than a pack;
    chunk_size as for Pool(): -EINVAL for a size other than 0, 16, 32, 64."""
    cfg: _Config = _config(backend, pack_size, limit, flags, path, near, code_range,
                           chunk_size)
    why = ctypes.create_string_buffer(256)
    rc: int = library().ep_backend_probe(cfg.backend, ctypes.byref(cfg), why, len(why))
    return rc, why.value.decode(errors="replace")


def symbolize(address: Union[int, Any]) -> Optional[Tuple[str, int]]:
    """ep_symbolize(): (name, offset) of the named, live JIT code that
    holds address (an int or a JitFunction), in any pool; None when the
    address is not in named JIT code."""
    if hasattr(address, "address"):
        address = address.address
    addr = _unsigned(address, _UINTPTR_MAX, "a pointer", "address")
    buf = ctypes.create_string_buffer(_NAME_BUF)
    off = ctypes.c_size_t()
    rc: int = library().ep_symbolize(addr, buf, len(buf), ctypes.byref(off))
    if rc == -errno.ENOENT:
        return None
    if rc < 0 and rc != -errno.ERANGE:
        _check(rc, "ep_symbolize")
    return buf.value.decode(errors="replace"), int(off.value)


def backtrace(fd: Union[int, Any] = 2) -> int:
    """ep_backtrace(): write the calling thread's backtrace to fd (an int
    or an object with fileno()), JIT frames by name; the frame count."""
    if hasattr(fd, "fileno"):
        flush = getattr(fd, "flush", None)
        if flush is not None:
            flush()  # what Python buffered comes first
        fd = fd.fileno()
    n = _unsigned(fd, _INT_MAX, "int", "fd")
    rc: int = library().ep_backtrace(n)
    if rc < 0:
        _check(rc, "ep_backtrace")
    return rc


def fill_x86_int3(buffer: Any) -> None:
    """ep_fill_x86_int3(): fill a writable buffer (bytearray, ctypes array,
    writable memoryview) with the x86 trap instruction, as the library
    fills free space."""
    mv = memoryview(buffer)
    if mv.readonly:
        raise TypeError("fill_x86_int3 needs a writable buffer")
    if not mv.contiguous:
        raise ValueError("fill_x86_int3 needs a contiguous buffer")
    n = mv.nbytes
    if n == 0:
        return
    c = (ctypes.c_char * n).from_buffer(mv.cast("B"))
    library().ep_fill_x86_int3(ctypes.addressof(c), n, None)
