// SPDX-License-Identifier: LGPL-2.1-or-later
// bench-llvm: LLJIT with ExecpackMemoryManager against LLJIT with LLVM's
// own InProcessMemoryManager, side by side in one run (`make bench`,
// doc/performance.md).  Each manager runs in a child process of its own:
// 1,000 small modules (a function, read-only and read-write data), each
// added, linked and called in turn.  Reported per manager: the process's
// Pss growth and its new mappings over the 1,000 modules, the time spent
// inside the memory manager (allocate, finalize, deallocate, without the
// JITLink work they call back into), and the whole run's wall time.  For
// execpack every module's segments are checked to lie within the pool's
// reach of each other, and all modules of the run within it too.
//
//   bench-llvm [MODULES]     (default 1000)
#include <execpack/llvm.h>

#include <llvm/ExecutionEngine/JITLink/EHFrameSupport.h>
#include <llvm/ExecutionEngine/JITLink/JITLink.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llvm-module.h"

using namespace llvm;
using namespace llvm::orc;
using namespace llvm::jitlink;

static uint64_t nowNs()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000u + ts.tv_nsec;
}

// Time spent in callbacks that a manager's call made on this thread: the
// JIT linker's work, which is not the manager's.  A callback's time is set,
// not added to, over what the calls nested in it counted (JITLink finalizes
// inside allocate's callback), so that no time is taken off twice.
static thread_local uint64_t calledBackNs;

template <typename F> static void calledBack(F &&f)
{
	uint64_t t = nowNs(), before = calledBackNs;
	f();
	calledBackNs = before + (nowNs() - t);
}

struct Span {
	uint64_t Lo = UINT64_MAX, Hi = 0;
};

// Forwards to a manager and times it.
class TimedManager : public JITLinkMemoryManager {
public:
	explicit TimedManager(JITLinkMemoryManager &inner) : Inner(inner) {}
	uint64_t Ns = 0;       // inside the manager (one linking thread here)
	uint64_t PhaseNs[3] = {}; // of it: allocate, finalize, deallocate
	uint64_t WorstModule = 0; // widest module: its segments' span
	Span All;              // every segment of the run

	class Flight : public InFlightAlloc {
	public:
		Flight(TimedManager &tm, std::unique_ptr<InFlightAlloc> inner)
			: TM(tm), In(std::move(inner)) {}
		// (JITLink destroys this object inside the callback: only
		// locals after it)
		void abandon(OnAbandonedFunction OnAbandoned) override
		{
			TimedManager &tm = TM;
			uint64_t t0 = nowNs(), cb0 = calledBackNs;
			In->abandon([&](Error E) { calledBack([&] { OnAbandoned(std::move(E)); }); });
			tm.Ns += nowNs() - t0 - (calledBackNs - cb0);
		}
		void finalize(OnFinalizedFunction OnFinalized) override
		{
			TimedManager &tm = TM;
			uint64_t t0 = nowNs(), cb0 = calledBackNs;
			In->finalize([&](Expected<FinalizedAlloc> R) {
				calledBack([&] { OnFinalized(std::move(R)); });
			});
			uint64_t d = nowNs() - t0 - (calledBackNs - cb0);
			tm.Ns += d;
			tm.PhaseNs[1] += d;
		}

	private:
		TimedManager &TM;
		std::unique_ptr<InFlightAlloc> In;
	};

	void allocate(const JITLinkDylib *JD, LinkGraph &G, OnAllocatedFunction OnAllocated) override
	{
		uint64_t t0 = nowNs(), cb0 = calledBackNs;
		Inner.allocate(JD, G, [&](AllocResult R) {
			calledBack([&] {
				if (R) {
					measure(G);
					R = std::make_unique<Flight>(*this, std::move(*R));
				}
				OnAllocated(std::move(R));
			});
		});
		uint64_t d = nowNs() - t0 - (calledBackNs - cb0);
		Ns += d;
		PhaseNs[0] += d;
	}
	using JITLinkMemoryManager::allocate;

	void deallocate(std::vector<FinalizedAlloc> Allocs, OnDeallocatedFunction OnDeallocated) override
	{
		uint64_t t0 = nowNs(), cb0 = calledBackNs;
		Inner.deallocate(std::move(Allocs),
				 [&](Error E) { calledBack([&] { OnDeallocated(std::move(E)); }); });
		uint64_t d = nowNs() - t0 - (calledBackNs - cb0);
		Ns += d;
		PhaseNs[2] += d;
	}
	using JITLinkMemoryManager::deallocate;

private:
	// Where the graph's blocks landed: its span, and the run's.
	void measure(LinkGraph &G)
	{
		Span s;
		for (Section &Sec : G.sections()) {
			if (Sec.getMemLifetime() == MemLifetime::NoAlloc)
				continue;
			for (Block *B : Sec.blocks()) {
				uint64_t a = B->getAddress().getValue();
				s.Lo = std::min(s.Lo, a);
				s.Hi = std::max(s.Hi, a + B->getSize());
			}
		}
		if (s.Hi == 0)
			return;
		WorstModule = std::max(WorstModule, s.Hi - s.Lo);
		All.Lo = std::min(All.Lo, s.Lo);
		All.Hi = std::max(All.Hi, s.Hi);
	}
	JITLinkMemoryManager &Inner;
};

// The floor: a manager's own work with no allocator under it.  The same
// steps as ExecpackMemoryManager (BasicLayout, the zero fill, apply(),
// the finalize and dealloc actions: eh-frame registration), with every
// segment bumped out of one memfd mapped once, read-write and
// read-execute (and one read-write arena for writable data), and never
// reused: what no memory manager of this shape can go below.
class FloorManager : public JITLinkMemoryManager {
public:
	FloorManager()
	{
		int fd = memfd_create("bench-llvm-floor", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, long(Cap)) != 0)
			abort();
		Rw = static_cast<char *>(mmap(nullptr, Cap, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
		Rx = static_cast<char *>(mmap(nullptr, Cap, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0));
		Data = static_cast<char *>(mmap(nullptr, Cap, PROT_READ | PROT_WRITE,
						 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
		close(fd);
		if (Rw == MAP_FAILED || Rx == MAP_FAILED || Data == MAP_FAILED)
			abort();
	}

	class Flight : public InFlightAlloc {
	public:
		explicit Flight(orc::shared::AllocActions A) : Actions(std::move(A)) {}
		void abandon(OnAbandonedFunction OnAbandoned) override { OnAbandoned(Error::success()); }
		void finalize(OnFinalizedFunction OnFinalized) override
		{
			auto D = orc::shared::runFinalizeActions(Actions);
			if (!D)
				return OnFinalized(D.takeError());
			auto *F = new std::vector<orc::shared::WrapperFunctionCall>(std::move(*D));
			OnFinalized(FinalizedAlloc(orc::ExecutorAddr::fromPtr(F)));
		}

	private:
		orc::shared::AllocActions Actions;
	};

	void allocate(const JITLinkDylib *, LinkGraph &G, OnAllocatedFunction OnAllocated) override
	{
		BasicLayout BL(G);
		for (auto &KV : BL.segments()) {
			const orc::AllocGroup &AG = KV.first;
			BasicLayout::Segment &Seg = KV.second;
			if (AG.getMemLifetime() == orc::MemLifetime::NoAlloc)
				continue;
			size_t size = Seg.ContentSize + Seg.ZeroFillSize;
			size_t align = Seg.Alignment.value();
			bool writable = (AG.getMemProt() & orc::MemProt::Write) != orc::MemProt::None;
			size_t &used = writable ? DataUsed : CodeUsed;
			size_t off = (used + align - 1) & ~(align - 1);
			if (off + size > Cap)
				return OnAllocated(make_error<StringError>("bench-llvm: floor arena full",
									   inconvertibleErrorCode()));
			used = off + size;
			char *rw = writable ? Data + off : Rw + off;
			memset(rw + Seg.ContentSize, 0, size - Seg.ContentSize);
			Seg.Addr = orc::ExecutorAddr::fromPtr(writable ? Data + off : Rx + off);
			Seg.WorkingMem = rw;
		}
		if (Error E = BL.apply())
			return OnAllocated(std::move(E));
		OnAllocated(std::make_unique<Flight>(std::move(BL.graphAllocActions())));
	}

	void deallocate(std::vector<FinalizedAlloc> Allocs, OnDeallocatedFunction OnDeallocated) override
	{
		Error Err = Error::success();
		for (FinalizedAlloc &FA : Allocs) {
			std::unique_ptr<std::vector<orc::shared::WrapperFunctionCall>> D(
				FA.release().toPtr<std::vector<orc::shared::WrapperFunctionCall> *>());
			Err = joinErrors(std::move(Err), orc::shared::runDeallocActions(*D));
		}
		OnDeallocated(std::move(Err));
	}

private:
	static constexpr size_t Cap = size_t(256) << 20;
	char *Rw, *Rx, *Data;
	size_t CodeUsed = 0, DataUsed = 0;
};

// Module i: f<i>(x) = ++ctr<i> + msg<i>[x & 7] (tests/llvm-module.h).
static std::string moduleText(int i)
{
	return llvmModuleText(i, 7, false);
}

static long pssKb()
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static long mappings()
{
	FILE *f = fopen("/proc/self/maps", "r");
	long n = 0;
	int c;
	while (f && (c = getc(f)) != EOF)
		n += c == '\n';
	if (f)
		fclose(f);
	return n;
}

struct Result {
	int ok;
	long pss_kb, maps;
	long pool_kb; // execpack: the pool's committed pack bytes (ep_pool_stats())
	double mm_ms, run_ms;
	double phase_ms[3];
	uint64_t worst_module, all_span, reach;
};

static void die(Error E, const char *what)
{
	errs() << "bench-llvm: " << what << ": " << toString(std::move(E)) << "\n";
	_exit(1);
}

enum Kind { LLVM_MM, EXECPACK, EXECPACK_NOKEEP, FLOOR };

static Result runOne(Kind kind, int modules)
{
	Result res{};
	std::unique_ptr<JITLinkMemoryManager> MM;
	bool execpack = kind == EXECPACK || kind == EXECPACK_NOKEEP;
	bool keep = kind == EXECPACK;
	if (kind == FLOOR) {
		MM = std::make_unique<FloorManager>();
	} else if (execpack) {
		execpack::ExecpackMemoryManager::Options O;
		O.KeepStaging = keep;
		auto E = execpack::ExecpackMemoryManager::Create(O);
		if (!E)
			die(E.takeError(), "ExecpackMemoryManager");
		res.reach = (*E)->reach();
		MM = std::move(*E);
	} else {
		auto E = InProcessMemoryManager::Create();
		if (!E)
			die(E.takeError(), "InProcessMemoryManager");
		MM = std::move(*E);
	}
	TimedManager TM(*MM);
	auto J = LLJITBuilder()
			 .setObjectLinkingLayerCreator([&](ExecutionSession &ES, const Triple &) {
				 auto L = std::make_unique<ObjectLinkingLayer>(ES, TM);
				 L->addPlugin(std::make_unique<EHFrameRegistrationPlugin>(
					 ES, std::make_unique<jitlink::InProcessEHFrameRegistrar>()));
				 return std::unique_ptr<ObjectLayer>(std::move(L));
			 })
			 .create();
	if (!J)
		die(J.takeError(), "LLJIT");

	auto addCall = [&](int i) {
		auto Ctx = std::make_unique<LLVMContext>();
		SMDiagnostic Diag;
		std::string text = moduleText(i);
		auto M = parseIR(MemoryBufferRef(text, "m"), Diag, *Ctx);
		if (!M) {
			Diag.print("bench-llvm", errs());
			_exit(1);
		}
		if (Error E = (*J)->addIRModule(ThreadSafeModule(std::move(M), std::move(Ctx))))
			die(std::move(E), "addIRModule");
		auto F = (*J)->lookup("f" + std::to_string(i));
		if (!F)
			die(F.takeError(), "lookup");
		return F->toPtr<long (*)(long)>()(1) == i + 1 + '0' + (i / 100000) % 10;
	};
	// One module first: what the first of anything costs (the pool, the
	// first pack, LLVM's own tables) is not per module.
	if (!addCall(0)) {
		fprintf(stderr, "bench-llvm: module 0 returned a wrong value\n");
		_exit(1);
	}
	TM.Ns = 0;
	TM.PhaseNs[0] = TM.PhaseNs[1] = TM.PhaseNs[2] = 0;
	long pss0 = pssKb(), maps0 = mappings();
	uint64_t t0 = nowNs();
	bool ok = true;
	for (int i = 1; i <= modules; i++)
		ok &= addCall(i);
	res.run_ms = (nowNs() - t0) / 1e6;
	res.pss_kb = pssKb() - pss0;
	res.maps = mappings() - maps0;
	res.ok = ok;
	if (execpack) {
		struct ep_stats st;
		auto *EMM = static_cast<execpack::ExecpackMemoryManager *>(MM.get());
		if (ep_pool_stats(EMM->pool(), &st) == 0)
			res.pool_kb = long((st.pack_bytes + st.large_bytes) / 1024);
	}
	// the removal's time counts too: a module's life is both
	uint64_t t1 = nowNs();
	if (Error E = (*J)->getMainJITDylib().clear())
		die(std::move(E), "clear");
	res.run_ms += (nowNs() - t1) / 1e6;
	res.mm_ms = TM.Ns / 1e6;
	for (int k = 0; k < 3; k++)
		res.phase_ms[k] = TM.PhaseNs[k] / 1e6;
	res.worst_module = TM.WorstModule;
	res.all_span = TM.All.Hi - TM.All.Lo;
	return res;
}

static bool inChild(Kind kind, int modules, Result *out)
{
	int fd[2];
	if (pipe(fd))
		return false;
	pid_t pid = fork();
	if (pid == 0) {
		close(fd[0]);
		Result r = runOne(kind, modules);
		_exit(write(fd[1], &r, sizeof(r)) == sizeof(r) ? 0 : 1);
	}
	close(fd[1]);
	bool ok = read(fd[0], out, sizeof(*out)) == sizeof(*out);
	close(fd[0]);
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fprintf(stderr, "bench-llvm: the %s run ended with status %#x\n",
			kind == LLVM_MM ? "LLVM" : kind == FLOOR ? "floor" : "execpack", st);
	return ok && WIFEXITED(st) && WEXITSTATUS(st) == 0 && out->ok;
}

int main(int argc, char **argv)
{
	int modules = argc > 1 ? atoi(argv[1]) : 1000;
	if (modules < 1) {
		fprintf(stderr, "usage: bench-llvm [MODULES]\n");
		return 2;
	}
	InitializeNativeTarget();
	InitializeNativeTargetAsmPrinter();

	// Rounds of the three runs in turn; each figure is the median over
	// rounds (a busy machine moves single runs by a factor of two).
	enum { ROUNDS = 5 };
	Result r[4][ROUNDS];
	for (int i = 0; i < ROUNDS; i++)
		if (!inChild(LLVM_MM, modules, &r[0][i]) || !inChild(EXECPACK, modules, &r[1][i]) ||
		    !inChild(EXECPACK_NOKEEP, modules, &r[2][i]) || !inChild(FLOOR, modules, &r[3][i])) {
			fprintf(stderr, "bench-llvm: a run failed\n");
			return 1;
		}
	Result med[4];
	for (int k = 0; k < 4; k++) {
		med[k] = r[k][0];
		auto median = [&](auto field) {
			std::vector<double> v;
			for (int i = 0; i < ROUNDS; i++)
				v.push_back(double(field(r[k][i])));
			std::sort(v.begin(), v.end());
			return v[ROUNDS / 2];
		};
		med[k].pss_kb = long(median([](const Result &x) { return x.pss_kb; }));
		med[k].maps = long(median([](const Result &x) { return x.maps; }));
		med[k].mm_ms = median([](const Result &x) { return x.mm_ms; });
		med[k].run_ms = median([](const Result &x) { return x.run_ms; });
		med[k].phase_ms[0] = median([](const Result &x) { return x.phase_ms[0]; });
		med[k].phase_ms[1] = median([](const Result &x) { return x.phase_ms[1]; });
		med[k].phase_ms[2] = median([](const Result &x) { return x.phase_ms[2]; });
		for (int i = 0; i < ROUNDS; i++) {
			med[k].all_span = std::max(med[k].all_span, r[k][i].all_span);
			med[k].worst_module = std::max(med[k].worst_module, r[k][i].worst_module);
		}
	}
	const Result &l = med[0], &e = med[1], &n = med[2], &f = med[3];
	printf("LLJIT, %d small modules (text + rodata + data), each linked and called;\n"
	       "medians of %d rounds:\n", modules, ROUNDS);
	printf("%-34s %14s %14s %8s\n", "", "LLVM InProcess", "execpack", "ratio");
	printf("%-34s %11ld kB %11ld kB %8.3f  (target <= 0.1)\n", "process Pss growth", l.pss_kb,
	       e.pss_kb, l.pss_kb > 0 ? double(e.pss_kb) / l.pss_kb : 0.0);
	printf("%-34s %14ld %14ld\n", "new mappings", l.maps, e.maps);
	printf("%-34s %11.2f ms %11.2f ms %8.3f  (target <= 0.1)\n", "time inside the memory manager",
	       l.mm_ms, e.mm_ms, e.mm_ms / l.mm_ms);
	const char *phase[3] = {"  of it: allocate", "          finalize", "          deallocate"};
	for (int k = 0; k < 3; k++)
		printf("%-34s %11.2f ms %11.2f ms %8.3f\n", phase[k], l.phase_ms[k], e.phase_ms[k],
		       e.phase_ms[k] / l.phase_ms[k]);
	printf("%-34s %11.1f ms %11.1f ms %8.3f  (target <= 1)\n", "whole LLJIT run", l.run_ms, e.run_ms,
	       e.run_ms / l.run_ms);
	printf("%-34s %11.2f ms %11.2f ms %8.3f  (KeepStaging = false)\n", "", l.mm_ms, n.mm_ms,
	       n.mm_ms / l.mm_ms);
	printf("%-34s %11.2f ms %11.2f ms %8.3f  (the floor: the same work, no allocator)\n", "",
	       l.mm_ms, f.mm_ms, f.mm_ms / l.mm_ms);
	printf("%-34s %11ld kB %11ld kB %8.3f  (the floor's Pss growth)\n", "", l.pss_kb, f.pss_kb,
	       l.pss_kb > 0 ? double(f.pss_kb) / l.pss_kb : 0.0);
	printf("execpack: the pool's packs hold %ld kB (the rest of its Pss growth is LLVM's own\n"
	       "  bookkeeping, which LLVM's manager's growth includes too)\n", e.pool_kb);
	printf("execpack: widest module %llu bytes, all modules within %llu bytes (reach %llu): %s\n",
	       (unsigned long long)e.worst_module, (unsigned long long)e.all_span,
	       (unsigned long long)e.reach, e.all_span < e.reach ? "ok" : "OUT OF REACH");
	return e.all_span < e.reach && n.all_span < n.reach ? 0 : 1;
}
