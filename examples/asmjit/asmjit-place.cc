/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * asmjit-place.cc - code assembled with asmjit's x86::Assembler, placed
 * with libexecpack (doc/assemblers.md walks through it):
 *
 *   assemble with the base address unknown -> its size is an upper bound
 *   -> ep_alloc(bound) -> relocate to image.exec -> copy into image.rw
 *   -> ep_finalize() -> ep_shrink() to the exact size.
 *
 * The pool is created with ep_config.near set to a C++ function of this
 * program, so the JIT code calls it with a direct "call rel32": asmjit
 * emits a call through its address table for an absolute target and turns
 * it into a direct call at relocation when the target is within reach.
 * The program checks that every such call became direct and that its
 * target is the helper, and calls the code.
 *
 * Exit status: 0 when all is as described; 77 (SKIP) where the code cannot
 * run (not x86-64, or no executable memory here); 1 otherwise.
 */
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <asmjit/x86.h>

#include "execpack.h"

#if defined(__x86_64__)

/* The helpers the JIT code calls (a C ABI, like a runtime's helpers). */
extern "C" int example_scale(int x);
extern "C" int example_square(int x);
extern "C" int example_negate(int x);

extern "C" int example_scale(int x)
{
	return 3 * x + 1;
}

extern "C" int example_square(int x)
{
	return x * x;
}

extern "C" int example_negate(int x)
{
	return -x;
}

static uint64_t address_of(int (*f)(int))
{
	uintptr_t a;

	std::memcpy(&a, &f, sizeof(a));
	return a;
}

/* Any assembler error ends the program with its message. */
class Fail : public asmjit::ErrorHandler {
public:
	void handleError(asmjit::Error err, const char *message, asmjit::BaseEmitter *) override
	{
		std::fprintf(stderr, "asmjit: %s (%s)\n", message,
			     asmjit::DebugUtils::errorAsString(err));
		std::exit(1);
	}
};

/* Where each function starts, from image.exec. */
struct Entry {
	uint64_t f, g, h;
};

/*
 * f(x) = example_scale(x) + 1
 * g(x) = f(example_scale(x))      (a call by label, inside this code)
 * h(x) = example_negate(example_square(x))
 * Each starts "sub rsp, 8; call <helper>", which main() inspects.
 */
static void assemble(asmjit::CodeHolder &code, asmjit::Label &f, asmjit::Label &g,
		     asmjit::Label &h)
{
	using namespace asmjit;
	x86::Assembler a(&code);

	f = a.newLabel();
	g = a.newLabel();
	h = a.newLabel();

	a.bind(f);
	a.sub(x86::rsp, 8); /* the stack 16-byte aligned at the call */
	a.call(imm(address_of(example_scale)));
	a.add(x86::eax, 1);
	a.add(x86::rsp, 8);
	a.ret();

	a.bind(g);
	a.sub(x86::rsp, 8);
	a.call(imm(address_of(example_scale)));
	a.mov(x86::edi, x86::eax);
	a.call(f);
	a.add(x86::rsp, 8);
	a.ret();

	a.bind(h);
	a.sub(x86::rsp, 8);
	a.call(imm(address_of(example_square)));
	a.mov(x86::edi, x86::eax);
	a.call(imm(address_of(example_negate)));
	a.add(x86::rsp, 8);
	a.ret();
}

/*
 * The call at p: 1 if it is a direct call rel32 (E8, or asmjit's
 * REX-padded 40 E8) to target; 0 if it is anything else, such as asmjit's
 * "call [rip+table]" (FF 15) for a target out of rel32 reach.
 */
static int direct_call(const unsigned char *p, uint64_t target)
{
	int32_t rel;

	if (p[0] == 0x40)
		p++;
	if (p[0] != 0xe8)
		return 0;
	std::memcpy(&rel, p + 1, 4);
	return (uint64_t)(uintptr_t)(p + 5) + (uint64_t)(int64_t)rel == target;
}

/* Every helper call of one placed copy (each after "sub rsp, 8"; h's
 * second after "mov edi, eax" too). */
static int all_direct(const unsigned char *code, const Entry &e)
{
	const unsigned char *h2 = code + e.h + 4 + (code[e.h + 4] == 0x40 ? 6 : 5) + 2;

	return direct_call(code + e.f + 4, address_of(example_scale)) &&
	       direct_call(code + e.g + 4, address_of(example_scale)) &&
	       direct_call(code + e.h + 4, address_of(example_square)) &&
	       direct_call(h2, address_of(example_negate));
}

/*
 * Place one copy of the code in pool: the sizes it had before and after
 * relocation come back in *bound and *size, the entries in *e.
 */
static int place(struct ep_pool *pool, void **exec, size_t *bound, size_t *size, Entry *e)
{
	using namespace asmjit;
	Fail fail;
	CodeHolder code;
	Label f, g, h;

	code.init(Environment::host()); /* no base address: it is not known yet */
	code.setErrorHandler(&fail);
	assemble(code, f, g, h);
	code.flatten();
	code.resolveUnresolvedLinks();
	/* an upper bound: it counts an address-table slot for every absolute
	 * target, which relocation drops for the ones reached by rel32 */
	*bound = code.codeSize();

	struct ep_image img;
	int rc = ep_alloc(pool, *bound, &img);

	if (rc)
		return rc;
	/* every address computed against where the code will run ... */
	code.relocateToBase((uint64_t)(uintptr_t)img.exec);
	*size = code.codeSize();
	/* ... and the bytes written where it is staged */
	code.copyFlattenedData(img.rw, img.size, CopySectionFlags::kNone);
	e->f = code.labelOffsetFromBase(f);
	e->g = code.labelOffsetFromBase(g);
	e->h = code.labelOffsetFromBase(h);
	if ((rc = ep_finalize(pool, img.exec)) || (rc = ep_shrink(pool, img.exec, *size))) {
		ep_free(pool, img.exec);
		return rc;
	}
	*exec = img.exec;
	return 0;
}

template <typename T> static T at(void *exec, uint64_t off)
{
	T fn;
	void *p = static_cast<unsigned char *>(exec) + off;

	std::memcpy(&fn, &p, sizeof(fn));
	return fn;
}

/* Place one copy in pool and check it; 0 if all is as described. */
static int place_and_run(struct ep_pool *pool, int x, void **exec, size_t *bound, size_t *size,
			 bool *direct)
{
	typedef int (*fn)(int);
	Entry e = {};
	int rc = place(pool, exec, bound, size, &e);

	if (rc) {
		std::fprintf(stderr, "placing the code: %s\n", ep_strerror(rc));
		return 1;
	}
	*direct = all_direct(static_cast<const unsigned char *>(*exec), e);
	if (at<fn>(*exec, e.f)(x) != 3 * x + 2 || at<fn>(*exec, e.g)(x) != 3 * (3 * x + 1) + 2 ||
	    at<fn>(*exec, e.h)(x) != -(x * x)) {
		std::fprintf(stderr, "the code at %p returned the wrong values\n", *exec);
		return 1;
	}
	return 0;
}

static struct ep_pool *make_pool(const void *near)
{
	struct ep_config cfg;
	struct ep_pool *pool;

	std::memset(&cfg, 0, sizeof(cfg));
	cfg.sz = sizeof(cfg);
	cfg.backend = EP_BACKEND_AUTO;
	cfg.near = near;
	int rc = ep_pool_create(&cfg, &pool);

	if (rc == -EACCES || rc == -EPERM || rc == -ENODEV) {
		std::printf("SKIP: no executable memory here: %s\n", ep_strerror(rc));
		std::exit(77);
	}
	if (rc) {
		std::fprintf(stderr, "ep_pool_create: %s\n", ep_strerror(rc));
		std::exit(1);
	}
	return pool;
}

int main()
{
	const void *near = reinterpret_cast<const void *>(address_of(example_scale));
	struct ep_pool *pool = make_pool(near);
	enum { N = 1000 };
	static void *execs[N];
	size_t bound = 0, size = 0;
	int bad = 0;

	for (int i = 0; i < N; i++) {
		bool direct;

		if (place_and_run(pool, i, &execs[i], &bound, &size, &direct))
			return 1;
		if (!direct) {
			std::fprintf(stderr, "copy %d at %p: a helper is not called by rel32\n", i,
				     execs[i]);
			bad++;
		}
	}
	struct ep_stats st;

	ep_pool_stats(pool, &st);
	std::printf("near: %s backend; helpers at %p, code at %p ... %p\n", ep_pool_backend(pool),
		    near, execs[0], execs[N - 1]);
	std::printf("each copy %zu bytes as assembled (an upper bound), %zu once relocated;\n"
		    "%d copies use %zu bytes of code memory, %zu each; every helper call is a "
		    "call rel32\n", bound, size, N, st.used_bytes, st.used_bytes / N);
	for (int i = 0; i < N; i++)
		ep_free(pool, execs[i]);
	ep_pool_destroy(pool);

	/* For comparison, a pool without near: the code lands where the
	 * kernel maps it, and asmjit reaches a far helper through its table. */
	pool = make_pool(nullptr);
	void *exec;
	bool direct;

	if (place_and_run(pool, 5, &exec, &bound, &size, &direct))
		return 1;
	std::printf("without near: code at %p, %zu bytes; the helpers are called %s\n", exec, size,
		    direct ? "by rel32 (the kernel happened to map it near)"
			   : "through asmjit's address table (call [rip+disp32])");
	ep_free(pool, exec);
	ep_pool_destroy(pool);
	return bad ? 1 : 0;
}

#else

int main()
{
	std::printf("SKIP: the example assembles and runs x86-64 code\n");
	return 77;
}

#endif
