/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * multi.c - several functions in one object, as clang lays them out: in
 * .text byte_sum() (called by the others), scan() (called by nobody; its
 * last instruction is a goto back to the loop, the shared return sits in
 * the middle) and sum_twice(); classify() in section xdp, calling
 * into .text.  Each one is loaded by name.
 */
#include "progs.h"

#define MAX_LEN 64 /* bounded loops */

__attribute__((noinline)) u64 byte_sum(const u8 *buf, u64 len)
{
	u64 sum = 0;

	for (u64 i = 0; i < len && i < MAX_LEN; i++)
		sum += buf[i];
	return sum;
}

u64 scan(const u8 *buf, u64 len)
{
	u64 r = 0, i = 0;

	while (i < len && i < MAX_LEN) {
		u8 c = buf[i++];

		if (c == 0)
			return 9;
		if (c & 1)
			r += c;
		else
			r ^= c;
	}
	return r;
}

u64 sum_twice(const u8 *buf, u64 len)
{
	return byte_sum(buf, len) * 2 + len;
}

__attribute__((section("xdp"))) u64 classify(const u8 *buf, u64 len)
{
	u64 s = byte_sum(buf, len);

	return s > 1000 ? 2 : s > 100 ? 1 : 0;
}
