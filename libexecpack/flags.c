/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * flags.c - the process-wide words that every file of the library reads
 * (internal.h): whether it runs under Valgrind, and the fork generation.
 * They live here, below every file that reads them, so that no lower file
 * depends on api.c or fork.c, which set them.
 */
#include "internal.h"

int ep__valgrind;    /* set by ep_pool_create() (api.c) */
_Atomic unsigned ep__fork_gen; /* raised in a child of fork() (fork.c) */
