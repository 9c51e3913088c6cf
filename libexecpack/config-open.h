/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * config-open.h - checking a struct ep_config and opening its backend
 * (config.c).
 */
#ifndef EP_CONFIG_OPEN_H
#define EP_CONFIG_OPEN_H

#include "types.h"

/* On success h->ops and h->be are open and *cfg holds the checked copy. */
int ep__config_open(const struct ep_config *cfg_in, int backend, struct ep_config *cfg,
		    struct ep__heap *h);
/* ep_backend_probe()'s work (api.c makes the call). */
int ep__backend_probe(enum ep_backend backend, const struct ep_config *cfg_in, char *why,
		      size_t whylen);
/* The default of ep_config.purge_delay_ms. */
#define EP__PURGE_DELAY_MS 10L
/* ep_config.purge_delay_ms (checked) with EXECPACK_PURGE_DELAY_MS for 0:
 * milliseconds, or < 0 for never. */
long ep__purge_delay(long cfg_ms);

#endif /* EP_CONFIG_OPEN_H */
