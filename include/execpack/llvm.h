/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * execpack/llvm.h - a JITLink memory manager for LLVM's ORC on libexecpack
 * (libexecpack-llvm, pkg-config execpack-llvm; doc/jit-shapes.md).
 *
 * Every module's segments come from one pool: the code segment from its
 * packs (ep_alloc_aligned()), the read-only and read-write segments from
 * its data packs (ep_alloc_data()), all inside the pool's code range, so a
 * module's code reaches its data (and every other module's) with a 32-bit
 * PC-relative fixup.  A module is made live with one ep_finalize_group()
 * (all of its segments or none), its functions are named for perf, gdb and
 * ep_symbolize() (ep_set_symbols()), and many small modules share packs
 * instead of taking pages of their own.
 *
 * Thread-safe: ORC may link on several threads and remove modules on any.
 */
#ifndef EXECPACK_LLVM_H
#define EXECPACK_LLVM_H

#include <execpack.h>

#include <llvm/ExecutionEngine/JITLink/JITLinkMemoryManager.h>
#include <llvm/Support/Error.h>

#include <atomic>
#include <cstddef>
#include <memory>

namespace execpack {

class ExecpackMemoryManager : public llvm::jitlink::JITLinkMemoryManager {
public:
	struct Options {
		/* The pool's code range (ep_config.code_range): every segment
		 * of every module lies inside it.  1 GiB: all of them within
		 * x86-64's rel32 and the small code model's reach. */
		size_t CodeRange = size_t(1) << 30;
		unsigned Flags = 0; /* EP_F_*, e.g. EP_F_PERFMAP */
		enum ep_backend Backend = EP_BACKEND_AUTO;
		/* Name functions (ep_set_symbols()) from each graph's defined
		 * symbols. */
		bool NameFunctions = true;
		/* Keep each segment's staging buffer (JITLink's working
		 * memory) through finalization: ep_keep_staging() before
		 * ep_finalize_group(), ep_release_staging() once the finalize
		 * actions ran.  false: the buffers go at ep_finalize_group(),
		 * about half of the manager's time per module; LLVM 19's JITLink
		 * and ORC read no block content after that point, a plugin of
		 * the caller's might. */
		bool KeepStaging = true;
	};

	/* A manager with a pool of its own, destroyed with it. */
	static llvm::Expected<std::unique_ptr<ExecpackMemoryManager>> Create(const Options &O);
	static llvm::Expected<std::unique_ptr<ExecpackMemoryManager>> Create();

	/* A manager on the caller's pool, which must outlive it; reach is the
	 * pool's code range (or the distance the caller's code model allows),
	 * which every module's segments are checked against. */
	ExecpackMemoryManager(struct ep_pool *pool, size_t reach, bool nameFunctions = true,
			      bool keepStaging = true);
	~ExecpackMemoryManager() override;

	ExecpackMemoryManager(const ExecpackMemoryManager &) = delete;
	ExecpackMemoryManager &operator=(const ExecpackMemoryManager &) = delete;

	struct ep_pool *pool() const { return Pool; }
	size_t reach() const { return Reach; }
	/* Modules allocated and not yet deallocated (abandoned ones excluded). */
	size_t liveModules() const { return Live.load(std::memory_order_relaxed); }

	void allocate(const llvm::jitlink::JITLinkDylib *JD, llvm::jitlink::LinkGraph &G,
		      OnAllocatedFunction OnAllocated) override;
	using llvm::jitlink::JITLinkMemoryManager::allocate;
	void deallocate(std::vector<FinalizedAlloc> Allocs,
			OnDeallocatedFunction OnDeallocated) override;
	using llvm::jitlink::JITLinkMemoryManager::deallocate;

private:
	class InFlight;
	struct ep_pool *Pool;
	size_t Reach;
	bool OwnsPool = false;
	bool NameFunctions;
	bool KeepStaging;
	std::atomic<size_t> Live{0};
};

} // namespace execpack

#endif /* EXECPACK_LLVM_H */
