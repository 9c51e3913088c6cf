// SPDX-License-Identifier: LGPL-2.1-or-later
// JIT code for tests/llvm-eh.sh: a C++ exception thrown three JIT frames
// down, through a frame with a destructor to run, caught in main; all of
// it JIT code in a libexecpack pool.  Exit 0 when caught with its value
// and the cleanup ran once.
#include <cstdio>

struct Oops {
	int code;
};

static int cleaned;

struct Guard {
	~Guard() { cleaned++; }
};

__attribute__((noinline)) int thrower(int x)
{
	if (x > 2)
		throw Oops{x * 10};
	return x;
}

__attribute__((noinline)) int middle(int x)
{
	Guard g;
	return thrower(x + 1) + 1;
}

__attribute__((noinline)) int outer(int x)
{
	volatile int v = x;
	return middle(v + 1);
}

int main()
{
	try {
		outer(1);
		puts("no exception");
		return 1;
	} catch (const Oops &o) {
		printf("caught %d, cleanups %d\n", o.code, cleaned);
		return o.code == 30 && cleaned == 1 ? 0 : 2;
	}
}
