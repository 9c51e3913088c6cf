// SPDX-License-Identifier: LGPL-2.1-or-later
// execpack-lli: run an LLVM IR or bitcode file's main() under ORC's LLJIT,
// its code and data in a libexecpack pool (ExecpackMemoryManager), or with
// LLVM's own InProcessMemoryManager for comparison.
//
//   execpack-lli [--mm=execpack|--mm=llvm] FILE.bc|FILE.ll [ARGS...]
//
// Exits with main's return value; main's output is the program's.  With
// EXECPACK_PERFMAP=1 the functions of every module are listed in
// /tmp/perf-<pid>.map.  The llvm stage of build-aux/run.sh runs csmith's
// programs through it (build-aux/llvm.sh).
#include <execpack/llvm.h>

#include <llvm/ExecutionEngine/JITLink/EHFrameSupport.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <cstdio>
#include <cstring>

using namespace llvm;
using namespace llvm::orc;

static int usage()
{
	fprintf(stderr, "usage: execpack-lli [--mm=execpack|--mm=llvm] FILE.bc|FILE.ll [ARGS...]\n");
	return 2;
}

static int fail(Error E, const char *what)
{
	errs() << "execpack-lli: " << what << ": " << toString(std::move(E)) << "\n";
	return 1;
}

int main(int argc, char **argv)
{
	bool useExecpack = true;
	int i = 1;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--mm=execpack") == 0)
			useExecpack = true;
		else if (strcmp(argv[i], "--mm=llvm") == 0)
			useExecpack = false;
		else
			return usage();
	}
	if (i >= argc)
		return usage();
	const char *file = argv[i];

	InitializeNativeTarget();
	InitializeNativeTargetAsmPrinter();

	std::unique_ptr<jitlink::JITLinkMemoryManager> MM;
	if (useExecpack) {
		auto E = execpack::ExecpackMemoryManager::Create();
		if (!E)
			return fail(E.takeError(), "memory manager");
		MM = std::move(*E);
	} else {
		auto E = jitlink::InProcessMemoryManager::Create();
		if (!E)
			return fail(E.takeError(), "memory manager");
		MM = std::move(*E);
	}

	int rc;
	{
		auto J = LLJITBuilder()
				 .setObjectLinkingLayerCreator([&](ExecutionSession &ES, const Triple &) {
					 auto L = std::make_unique<ObjectLinkingLayer>(ES, *MM);
					 // C++ exceptions through JIT frames: libgcc's
					 // unwinder learns of each module's .eh_frame
					 L->addPlugin(std::make_unique<EHFrameRegistrationPlugin>(
						 ES, std::make_unique<jitlink::InProcessEHFrameRegistrar>()));
					 return std::unique_ptr<ObjectLayer>(std::move(L));
				 })
				 .create();
		if (!J)
			return fail(J.takeError(), "LLJIT");

		auto Ctx = std::make_unique<LLVMContext>();
		SMDiagnostic Diag;
		std::unique_ptr<Module> M = parseIRFile(file, Diag, *Ctx);
		if (!M) {
			Diag.print("execpack-lli", errs());
			return 1;
		}
		if (Error E = (*J)->addIRModule(ThreadSafeModule(std::move(M), std::move(Ctx))))
			return fail(std::move(E), file);
		// static constructors (C++), then main
		if (Error E = (*J)->initialize((*J)->getMainJITDylib()))
			return fail(std::move(E), "initializers");
		auto Main = (*J)->lookup("main");
		if (!Main)
			return fail(Main.takeError(), "main");
		auto *mainFn = Main->toPtr<int (*)(int, char **)>();
		rc = mainFn(argc - i, argv + i);
		fflush(stdout);
		if (Error E = (*J)->deinitialize((*J)->getMainJITDylib()))
			return fail(std::move(E), "finalizers");
	}
	return rc;
}
