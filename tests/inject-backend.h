/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* inject-backend.h - knobs of the failure-injecting backend wrapper. */
#ifndef EP_INJECT_BACKEND_H
#define EP_INJECT_BACKEND_H

extern int ep_inject_countdown; /* backend calls to let through before one fails; <0: none */
extern int ep_inject_errno;     /* the errno the failing call returns */
extern unsigned ep_inject_fired; /* failures injected so far */

#endif
