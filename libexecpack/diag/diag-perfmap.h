/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * diag-perfmap.h - perf's /tmp/perf-<pid>.map (diag-perfmap.c): one line
 * per named, finalized allocation.  diag.c calls these with its lock held.
 */
#ifndef EP_DIAG_PERFMAP_H
#define EP_DIAG_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>

/* EP_F_PERFMAP in the pool's flags, or EXECPACK_PERFMAP set and not "0". */
bool ep__perfmap_wanted(unsigned pool_flags);
/* Append "START SIZE name"; best effort: on any failure nothing is written. */
void ep__perfmap_append(const void *exec, size_t size, const char *name);

#endif /* EP_DIAG_PERFMAP_H */
