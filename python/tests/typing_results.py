# SPDX-License-Identifier: LGPL-2.1-or-later
"""What mypy must infer for JitFunction calls: checked with mypy --strict by
test_api.py (TypesTest) and tests/python-binding.sh, never run (its name
keeps pytest from collecting it).  Each assert_type() is an error for mypy
when the type given is not the one inferred."""

import ctypes
from typing import Optional, assert_type

import execpack


def check(pool: execpack.Pool, code: bytes) -> None:
    assert_type(pool.load(code)(), int)
    assert_type(pool.load(code, argtypes=(ctypes.c_int,))(1), int)
    assert_type(pool.load(code, restype=ctypes.c_int)(), int)
    assert_type(pool.load(code, ctypes.c_uint64)(), int)
    assert_type(pool.load(code, restype=ctypes.c_double,
                          argtypes=(ctypes.c_double,))(1.0), float)
    assert_type(pool.load(code, restype=ctypes.c_bool)(), bool)
    assert_type(pool.load(code, restype=ctypes.c_void_p)(), Optional[int])
    assert_type(pool.load(code, restype=ctypes.c_char_p)(), Optional[bytes])
    assert_type(pool.load(code, restype=None)(), None)
    with pool.load(code, restype=ctypes.c_float) as f:
        assert_type(f, execpack.JitFunction[float])
        assert_type(f(), float)
    img = pool.alloc(16)
    assert_type(img.buffer, memoryview)
