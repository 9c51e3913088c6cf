/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * jitdump.h - perf's jitdump file for named JIT code (jitdump.c).
 *
 * diag.c calls these with its lock held: that lock orders the records of
 * one process and keeps fork() from copying a half-written one.
 */
#ifndef EP_JITDUMP_H
#define EP_JITDUMP_H

#include <stdbool.h>
#include <stddef.h>

/* EP_F_JITDUMP in the pool's flags, or EXECPACK_JITDUMP set and not "0". */
bool ep__jitdump_wanted(unsigned pool_flags);

/* A JIT_CODE_LOAD record for [exec, exec+size), named name, with the code
 * bytes as they are now.  Best effort: on any failure nothing is written. */
void ep__jitdump_load(const void *exec, size_t size, const char *name);

/* At exit: a JIT_CODE_CLOSE record, if this process opened a file. */
void ep__jitdump_close(void);

#endif /* EP_JITDUMP_H */
