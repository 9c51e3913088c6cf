// SPDX-License-Identifier: LGPL-2.1-or-later
// ExecpackMemoryManager: JITLink's memory on a libexecpack pool
// (include/execpack/llvm.h, doc/jit-shapes.md "LLVM ORC").
//
// One module (a LinkGraph) is one set of segments laid out by BasicLayout:
// the executable one from the pool's code packs, the others from its data
// packs.  JITLink writes and fixes up the staging buffers (image.rw) against
// the final addresses (image.exec); finalize makes all of them live with one
// ep_finalize_group(), runs the graph's finalize actions (eh-frame
// registration), and then drops what only finalization needed.
#include <execpack/llvm.h>

#include <llvm/ExecutionEngine/JITLink/JITLink.h>
#include <llvm/ExecutionEngine/Orc/Shared/AllocationActions.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using namespace llvm;
using namespace llvm::jitlink;

namespace execpack {

namespace {

Error epError(const char *what, int rc)
{
	return make_error<StringError>(std::string("execpack: ") + what + ": " + ep_strerror(rc),
				       inconvertibleErrorCode());
}

// What deallocate() needs of a finalized module: FinalizedAlloc carries
// only an address, this record's.
struct Finalized {
	std::vector<void *> Execs;
	std::vector<orc::shared::WrapperFunctionCall> DeallocActions;
};

struct Segment {
	void *Exec;
	size_t Size;
	bool Standard; // MemLifetime::Standard: lives until deallocate()
	bool Code;
};

// Frees every segment; the first error wins, the rest are still freed.
int freeAll(struct ep_pool *pool, const std::vector<Segment> &segs)
{
	int first = 0;
	for (const Segment &s : segs) {
		int rc = ep_free(pool, s.Exec);
		if (rc && !first)
			first = rc;
	}
	return first;
}

} // namespace

class ExecpackMemoryManager::InFlight final : public JITLinkMemoryManager::InFlightAlloc {
public:
	InFlight(ExecpackMemoryManager &mm, std::vector<Segment> segs,
		 orc::shared::AllocActions actions)
		: MM(mm), Segs(std::move(segs)), Actions(std::move(actions))
	{
	}

	~InFlight() override
	{
		// Neither finalized nor abandoned (a link that gave up): the
		// memory is still the pool's to take back.
		if (!Done)
			freeAll(MM.Pool, Segs);
	}

	void abandon(OnAbandonedFunction OnAbandoned) override
	{
		Done = true;
		int rc = freeAll(MM.Pool, Segs);
		OnAbandoned(rc ? epError("ep_free", rc) : Error::success());
	}

	void finalize(OnFinalizedFunction OnFinalized) override
	{
		Done = true;
		std::vector<void *> execs;
		execs.reserve(Segs.size());
		for (const Segment &s : Segs)
			execs.push_back(s.Exec);

		// JITLink's blocks point into the staging buffers: they stay
		// valid until finalization is over, not only until the copy.
		size_t kept = 0;
		int rc = 0;
		for (; MM.KeepStaging && kept < execs.size(); kept++) {
			rc = ep_keep_staging(MM.Pool, execs[kept]);
			if (rc)
				break;
		}
		if (rc) {
			freeAll(MM.Pool, Segs);
			return OnFinalized(epError("ep_keep_staging", rc));
		}
		// (a graph with nothing to allocate has no group)
		rc = execs.empty() ? 0 : ep_finalize_group(MM.Pool, execs.data(), execs.size());
		if (rc) {
			freeAll(MM.Pool, Segs);
			return OnFinalized(epError("ep_finalize_group", rc));
		}

		auto DeallocActions = orc::shared::runFinalizeActions(Actions);
		if (!DeallocActions) {
			freeAll(MM.Pool, Segs);
			return OnFinalized(DeallocActions.takeError());
		}

		auto F = std::make_unique<Finalized>();
		F->DeallocActions = std::move(*DeallocActions);
		for (const Segment &s : Segs) {
			if (s.Standard) {
				if (MM.KeepStaging)
					ep_release_staging(MM.Pool, s.Exec);
				F->Execs.push_back(s.Exec);
			} else {
				// finalize lifetime: done with once the actions ran
				ep_free(MM.Pool, s.Exec);
			}
		}
		MM.Live.fetch_add(1, std::memory_order_relaxed);
		OnFinalized(FinalizedAlloc(orc::ExecutorAddr::fromPtr(F.release())));
	}

private:
	ExecpackMemoryManager &MM;
	std::vector<Segment> Segs;
	orc::shared::AllocActions Actions;
	bool Done = false;
};

Expected<std::unique_ptr<ExecpackMemoryManager>> ExecpackMemoryManager::Create(const Options &O)
{
	struct ep_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.sz = sizeof(cfg);
	cfg.backend = O.Backend;
	cfg.flags = O.Flags;
	cfg.code_range = O.CodeRange;
	struct ep_pool *pool = nullptr;
	int rc = ep_pool_create(&cfg, &pool);
	if (rc)
		return epError("ep_pool_create", rc);
	std::unique_ptr<ExecpackMemoryManager> MM(
		new ExecpackMemoryManager(pool, O.CodeRange, O.NameFunctions, O.KeepStaging));
	MM->OwnsPool = true;
	return MM;
}

Expected<std::unique_ptr<ExecpackMemoryManager>> ExecpackMemoryManager::Create()
{
	return Create(Options());
}

ExecpackMemoryManager::ExecpackMemoryManager(struct ep_pool *pool, size_t reach, bool nameFunctions,
					     bool keepStaging)
	: Pool(pool), Reach(reach), NameFunctions(nameFunctions), KeepStaging(keepStaging)
{
}

ExecpackMemoryManager::~ExecpackMemoryManager()
{
	if (OwnsPool)
		ep_pool_destroy(Pool);
}

// The functions of the code segment at exec, for perf's map, jitdump, gdb
// and ep_symbolize(): the graph's defined symbols with a size, without
// overlaps (aliases keep the first name at an address).
static void nameFunctions(struct ep_pool *pool, LinkGraph &G, const Segment &code)
{
	struct Named {
		size_t Offset, Size;
		StringRef Name;
	};
	std::vector<Named> found;
	uintptr_t base = reinterpret_cast<uintptr_t>(code.Exec);
	for (Symbol *S : G.defined_symbols()) {
		if (!S->hasName() || S->getSize() == 0)
			continue;
		uintptr_t a = S->getAddress().getValue();
		if (a < base || a - base >= code.Size || S->getSize() > code.Size - (a - base))
			continue;
		found.push_back({size_t(a - base), size_t(S->getSize()), S->getName()});
	}
	std::sort(found.begin(), found.end(), [](const Named &x, const Named &y) {
		return x.Offset < y.Offset || (x.Offset == y.Offset && x.Size > y.Size);
	});
	std::vector<std::string> names;
	std::vector<struct ep_symbol> syms;
	names.reserve(found.size());
	size_t end = 0;
	for (const Named &n : found) {
		if (!syms.empty() && n.Offset < end)
			continue;
		names.push_back(n.Name.str());
		syms.push_back({n.Offset, n.Size, nullptr});
		end = n.Offset + n.Size;
	}
	if (syms.empty())
		return;
	for (size_t i = 0; i < syms.size(); i++)
		syms[i].name = names[i].c_str();
	// Names are diagnostics: a module links without them.
	(void)ep_set_symbols(pool, code.Exec, syms.data(), syms.size());
}

void ExecpackMemoryManager::allocate(const JITLinkDylib *JD, LinkGraph &G,
				     OnAllocatedFunction OnAllocated)
{
	BasicLayout BL(G);
	std::vector<Segment> segs;
	uintptr_t lo = UINTPTR_MAX, hi = 0;

	auto fail = [&](Error E) {
		freeAll(Pool, segs);
		OnAllocated(std::move(E));
	};

	for (auto &KV : BL.segments()) {
		const orc::AllocGroup &AG = KV.first;
		BasicLayout::Segment &Seg = KV.second;
		orc::MemProt prot = AG.getMemProt();
		if (AG.getMemLifetime() == orc::MemLifetime::NoAlloc)
			continue; // never reaches the executor
		if ((prot & orc::MemProt::Exec) != orc::MemProt::None &&
		    (prot & orc::MemProt::Write) != orc::MemProt::None)
			return fail(make_error<StringError>(
				"execpack: graph " + G.getName() +
					" has a writable and executable segment",
				inconvertibleErrorCode()));
		size_t size = Seg.ContentSize + Seg.ZeroFillSize;
		if (size == 0)
			size = 1;
		size_t align = Seg.Alignment.value();
		struct ep_image img;
		int rc;
		bool exec = (prot & orc::MemProt::Exec) != orc::MemProt::None;
		if (exec)
			rc = ep_alloc_aligned(Pool, size, align, &img);
		else
			rc = ep_alloc_data(Pool, size, align,
					   (prot & orc::MemProt::Write) != orc::MemProt::None ?
						   EP_DATA_RW : EP_DATA_RO,
					   &img);
		if (rc)
			return fail(epError(exec ? "ep_alloc_aligned" : "ep_alloc_data", rc));
		segs.push_back({img.exec, size,
				AG.getMemLifetime() == orc::MemLifetime::Standard, exec});
		char *rw = static_cast<char *>(img.rw);
		// Staging buffers hold traps: data starts zeroed, as does the
		// zero-fill tail of any segment (code keeps traps in its gaps).
		if (exec)
			memset(rw + Seg.ContentSize, 0, size - Seg.ContentSize);
		else
			memset(rw, 0, size);
		Seg.Addr = orc::ExecutorAddr::fromPtr(img.exec);
		Seg.WorkingMem = rw;
		uintptr_t e = reinterpret_cast<uintptr_t>(img.exec);
		lo = std::min(lo, e);
		hi = std::max(hi, e + size);
	}

	// The pool's code range makes this hold; a pool of the caller's that
	// was made without one may not.
	if (!segs.empty() && hi - lo > Reach)
		return fail(make_error<StringError>(
			"execpack: the segments of graph " + G.getName() +
				" lie farther apart than the pool's reach",
			inconvertibleErrorCode()));

	if (Error E = BL.apply())
		return fail(std::move(E));

	// (after apply(): it moves each segment's Addr past its blocks)
	if (NameFunctions)
		for (const Segment &s : segs)
			if (s.Code && s.Standard)
				nameFunctions(Pool, G, s);

	OnAllocated(std::make_unique<InFlight>(*this, std::move(segs),
					       std::move(BL.graphAllocActions())));
}

void ExecpackMemoryManager::deallocate(std::vector<FinalizedAlloc> Allocs,
				       OnDeallocatedFunction OnDeallocated)
{
	Error Err = Error::success();
	for (FinalizedAlloc &FA : Allocs) {
		std::unique_ptr<Finalized> F(FA.release().toPtr<Finalized *>());
		Err = joinErrors(std::move(Err), orc::shared::runDeallocActions(F->DeallocActions));
		for (void *exec : F->Execs) {
			int rc = ep_free(Pool, exec);
			if (rc)
				Err = joinErrors(std::move(Err), epError("ep_free", rc));
		}
		Live.fetch_sub(1, std::memory_order_relaxed);
	}
	OnDeallocated(std::move(Err));
}

} // namespace execpack
