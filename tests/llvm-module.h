// SPDX-License-Identifier: LGPL-2.1-or-later
// The small module the LLVM tests and benchmark add by the thousand:
// module i has code, read-only and read-write data, and the result of its
// function depends on all three, so a segment put in the wrong place or
// with the wrong protection shows in the value returned.
//
//   f<i>(x) = ++ctr<i> + msg<i>[x & mask] (+ x when add_x)
//
// with ctr<i> starting at i and msg<i> = "m%06d" of i.
#ifndef EP_TESTS_LLVM_MODULE_H
#define EP_TESTS_LLVM_MODULE_H

#include <cstdio>
#include <string>

static inline std::string llvmModuleText(int i, int mask, bool add_x)
{
	char buf[1024];
	snprintf(buf, sizeof(buf),
		 "@ctr%d = global i64 %d\n"
		 "@msg%d = constant [8 x i8] c\"m%06d\\00\"\n"
		 "define i64 @f%d(i64 %%x) {\n"
		 "  %%c = load i64, ptr @ctr%d\n"
		 "  %%n = add i64 %%c, 1\n"
		 "  store i64 %%n, ptr @ctr%d\n"
		 "  %%k = and i64 %%x, %d\n"
		 "  %%p = getelementptr [8 x i8], ptr @msg%d, i64 0, i64 %%k\n"
		 "  %%b = load i8, ptr %%p\n"
		 "  %%z = zext i8 %%b to i64\n"
		 "%s"
		 "  ret i64 %%r\n"
		 "}\n",
		 i, i, i, i, i, i, i, mask, i,
		 add_x ? "  %s = add i64 %n, %z\n  %r = add i64 %s, %x\n"
		       : "  %r = add i64 %n, %z\n");
	return buf;
}

#endif
