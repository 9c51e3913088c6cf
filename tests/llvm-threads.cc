// SPDX-License-Identifier: LGPL-2.1-or-later
// ORC on ExecpackMemoryManager across threads: LLJIT compiles and links
// modules on four threads at once (one lookup of many symbols), and
// modules are removed (ResourceTracker::remove()) on another thread while
// new ones are added, linked and called.  Each module has code, read-only
// and read-write data; each function's result depends on all three, its
// code and data lie in the pool within its reach, and every module taken
// out gives its memory back (the manager's and the pool's counts).
#include <config.h>

#include <execpack/llvm.h>

#include <llvm/ExecutionEngine/JITLink/EHFrameSupport.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#include "llvm-module.h"

using namespace llvm;
using namespace llvm::orc;

static int failures;

#define EXPECT(cond, ...)                                                   \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			failures++;                                         \
		}                                                           \
	} while (0)

static void die(Error E, const char *what)
{
	errs() << "FAIL: " << what << ": " << toString(std::move(E)) << "\n";
	exit(1);
}

// Module i: f<i>(x) = ++ctr<i> + msg<i>[x & 3] + x, ctr<i> starting at i
// (tests/llvm-module.h).
static std::string moduleText(int i)
{
	return llvmModuleText(i, 3, true);
}

static long expected(int i, long x)
{
	char msg[16];
	snprintf(msg, sizeof(msg), "m%06d", i);
	return i + 1 + msg[x & 3] + x;
}

static ThreadSafeModule parseModule(int i)
{
	auto Ctx = std::make_unique<LLVMContext>();
	SMDiagnostic Diag;
	auto M = parseIR(MemoryBufferRef(moduleText(i), "m"), Diag, *Ctx);
	if (!M) {
		Diag.print("llvm-threads", errs());
		exit(1);
	}
	return ThreadSafeModule(std::move(M), std::move(Ctx));
}

struct Jit {
	std::unique_ptr<execpack::ExecpackMemoryManager> MM;
	std::unique_ptr<LLJIT> J;
	std::vector<ResourceTrackerSP> Trackers;
};

// Adds modules [from, to), each under its own tracker, and looks all of
// their functions and counters up in one lookup: ORC materializes them on
// its compile threads concurrently.  Then calls and checks them.
static void addAndCheck(Jit &jit, int from, int to)
{
	JITDylib &JD = jit.J->getMainJITDylib();
	for (int i = from; i < to; i++) {
		auto RT = JD.createResourceTracker();
		if (Error E = jit.J->addIRModule(RT, parseModule(i)))
			die(std::move(E), "addIRModule");
		jit.Trackers.push_back(RT);
	}
	SymbolLookupSet names;
	for (int i = from; i < to; i++) {
		names.add(jit.J->mangleAndIntern("f" + std::to_string(i)));
		names.add(jit.J->mangleAndIntern("ctr" + std::to_string(i)));
	}
	auto Syms = jit.J->getExecutionSession().lookup(makeJITDylibSearchOrder(&JD), names);
	if (!Syms)
		die(Syms.takeError(), "lookup");
	for (int i = from; i < to; i++) {
		auto f = (*Syms)[jit.J->mangleAndIntern("f" + std::to_string(i))].getAddress();
		auto ctr = (*Syms)[jit.J->mangleAndIntern("ctr" + std::to_string(i))].getAddress();
		auto fn = f.toPtr<long (*)(long)>();
		long x = i * 7 + 1;
		long got = fn(x);
		EXPECT(got == expected(i, x), "module %d: %ld, want %ld", i, got, expected(i, x));
		EXPECT(*ctr.toPtr<long *>() == i + 1, "module %d: counter %ld", i, *ctr.toPtr<long *>());
		uint64_t a = f.getValue(), b = ctr.getValue();
		EXPECT((a > b ? a - b : b - a) < jit.MM->reach(), "module %d: code and data %llu apart", i,
		       (unsigned long long)(a > b ? a - b : b - a));
		struct ep_info info;
		EXPECT(ep_lookup(f.toPtr<void *>(), &info) == 0 && info.pool == jit.MM->pool(),
		       "module %d: code not in the pool", i);
		EXPECT(ep_lookup(ctr.toPtr<void *>(), &info) == 0 && info.pool == jit.MM->pool(),
		       "module %d: data not in the pool", i);
	}
}

static void removeRange(Jit &jit, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (Error E = jit.Trackers[i]->remove())
			die(std::move(E), "ResourceTracker::remove");
}

int main()
{
	if (RUNNING_ON_VALGRIND) {
		// minutes of LLVM code generation under it; the llvm stage
		// runs this natively, and ThreadSanitizer's build checks races
		printf("SKIP: LLVM's code generation is too slow under valgrind\n");
		return 77;
	}
	InitializeNativeTarget();
	InitializeNativeTargetAsmPrinter();

	Jit jit;
	auto MM = execpack::ExecpackMemoryManager::Create();
	if (!MM)
		die(MM.takeError(), "ExecpackMemoryManager::Create");
	jit.MM = std::move(*MM);
	auto J = LLJITBuilder()
			 .setNumCompileThreads(4)
			 .setObjectLinkingLayerCreator([&](ExecutionSession &ES, const Triple &) {
				 auto L = std::make_unique<ObjectLinkingLayer>(ES, *jit.MM);
				 L->addPlugin(std::make_unique<EHFrameRegistrationPlugin>(
					 ES, std::make_unique<jitlink::InProcessEHFrameRegistrar>()));
				 return std::unique_ptr<ObjectLayer>(std::move(L));
			 })
			 .create();
	if (!J)
		die(J.takeError(), "LLJIT");
	jit.J = std::move(*J);

	const int first = 64, more = 64;
	addAndCheck(jit, 0, first);
	EXPECT(jit.MM->liveModules() == first, "%zu modules live, want %d", jit.MM->liveModules(), first);

	// Half of them go on another thread while more are linked here.
	std::thread remover([&] { removeRange(jit, 0, first / 2); });
	addAndCheck(jit, first, first + more);
	remover.join();
	size_t want = first / 2 + more;
	EXPECT(jit.MM->liveModules() == want, "%zu modules live, want %zu", jit.MM->liveModules(), want);

	// The rest, from yet another thread.
	std::thread rest([&] { removeRange(jit, first / 2, jit.Trackers.size()); });
	rest.join();
	EXPECT(jit.MM->liveModules() == 0, "%zu modules live after removing all", jit.MM->liveModules());
	struct ep_stats st;
	EXPECT(ep_pool_stats(jit.MM->pool(), &st) == 0 && st.live_allocs == 0,
	       "%zu allocations live in the pool after removing all", st.live_allocs);

	jit.Trackers.clear();
	jit.J.reset();
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("PASS: %d modules linked on 4 compile threads, removed on other threads\n", first + more);
	return 0;
}
