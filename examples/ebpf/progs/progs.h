/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * progs.h - shared by the C programs that are compiled both to eBPF
 * (clang -target bpf -O2 -c) and natively, for comparison.  No libc
 * headers: the BPF target has none.
 */
#ifndef EBPF_PROGS_H
#define EBPF_PROGS_H

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

/* Entry points: r1 = buffer, r2 = length; the result is r0. */
u64 filter(const u8 *pkt, u64 len);
u64 checksum(const u8 *buf, u64 len);
u64 crc32(const u8 *buf, u64 len);
u64 count_words(const u8 *buf, u64 len);
u64 byte_sum(const u8 *buf, u64 len);
u64 scan(const u8 *buf, u64 len);
u64 sum_twice(const u8 *buf, u64 len);
u64 classify(const u8 *buf, u64 len);

#endif
