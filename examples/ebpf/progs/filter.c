/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * filter.c - a packet filter over an Ethernet frame in a byte buffer.
 * Returns 1 for IPv4/TCP to port 80 or 443, 2 for IPv4/UDP to port 53,
 * 3 for IPv6, 0 for anything else or a truncated frame.  Everything is
 * read bytewise with explicit bounds checks, as a BPF program must.
 */
#include "progs.h"

static u16 be16(const u8 *p)
{
	return (u16)(p[0] << 8 | p[1]);
}

u64 filter(const u8 *pkt, u64 len)
{
	u64 ihl;
	u16 proto, dport;

	if (len < 14)
		return 0;
	proto = be16(pkt + 12);
	if (proto == 0x86dd)
		return 3;
	if (proto != 0x0800 || len < 14 + 20)
		return 0;
	if ((pkt[14] >> 4) != 4)
		return 0;
	ihl = (u64)(pkt[14] & 0x0f) * 4;
	if (ihl < 20 || len < 14 + ihl + 4)
		return 0;
	if (be16(pkt + 20) & 0x3fff) /* fragment: no ports to look at */
		return 0;
	dport = be16(pkt + 14 + ihl + 2);
	if (pkt[23] == 6 && (dport == 80 || dport == 443))
		return 1;
	if (pkt[23] == 17 && dport == 53)
		return 2;
	return 0;
}
