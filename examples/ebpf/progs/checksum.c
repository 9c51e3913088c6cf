/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * checksum.c - loop-heavy code: the Internet checksum (RFC 1071), a
 * table-driven CRC-32 (the table is data: an lddw relocation) and a word
 * counter calling a non-inlined function (a BPF-to-BPF call).
 */
#include "progs.h"

#define MAX_LEN 4096 /* bounded loops */

u64 checksum(const u8 *buf, u64 len)
{
	u64 sum = 0, i;

	for (i = 0; i + 1 < len && i < MAX_LEN; i += 2)
		sum += (u64)(buf[i] << 8 | buf[i + 1]);
	if (i < len && i < MAX_LEN)
		sum += (u64)buf[i] << 8;
	for (int k = 0; k < 4; k++)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

static u32 crc_table[256];
static int crc_ready;

static void crc_init(void)
{
	for (u32 n = 0; n < 256; n++) {
		u32 c = n;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[n] = c;
	}
	crc_ready = 1;
}

u64 crc32(const u8 *buf, u64 len)
{
	u32 c = 0xffffffffu;

	if (!crc_ready)
		crc_init();
	for (u64 i = 0; i < len && i < MAX_LEN; i++)
		c = crc_table[(c ^ buf[i]) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

__attribute__((noinline)) static int is_space(u64 c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

__attribute__((noinline)) u64 count_words(const u8 *buf, u64 len)
{
	u64 words = 0;
	int in_word = 0;

	for (u64 i = 0; i < len && i < MAX_LEN; i++) {
		if (is_space(buf[i])) {
			in_word = 0;
		} else if (!in_word) {
			in_word = 1;
			words++;
		}
	}
	return words;
}
