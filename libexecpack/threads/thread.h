/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * thread.h - the heap each thread allocates from (thread.c).
 */
#ifndef EP_THREAD_H
#define EP_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "interleave.h"
#include "types.h"

#define EP__TL_SLOTS 4
/* The calling thread's last pools and its heap in each (a pool is told
 * from one made later at the same address by its id). */
struct ep__tl_slot {
	const struct ep_pool *pool;
	uint64_t id;
	struct ep__heap *heap;
};
extern __thread struct ep__tl_slot ep__tl_cache[EP__TL_SLOTS]
	__attribute__((tls_model("initial-exec")));

struct ep__heap *ep__home_slow(struct ep_pool *pool, struct ep__tl_slot *slot);
void ep__thread_put(struct ep__thread *t);
/* The thread records' mutexes: the pthread key's making, the spares (the
 * fork handlers take them too: fork.c says in which order). */
extern pthread_mutex_t ep__thread_key_lock, ep__thread_spare_lock;
unsigned ep__heaps_wanted(const struct ep__heap *first);

/* The calling thread's heap in pool; NULL without memory. */
static inline struct ep__heap *ep__home(struct ep_pool *pool)
{
	struct ep__tl_slot *slot = &ep__tl_cache[((uintptr_t)pool >> 6) % EP__TL_SLOTS];

	if (__builtin_expect(slot->pool == pool && slot->id == pool->id, 1))
		return slot->heap;
	return ep__home_slow(pool, slot);
}

#endif /* EP_THREAD_H */
