# Makefile — builds libringo (.so/.a), the tools in bench/, and the GoogleTest suites in test/.
# `make`, `make test`, `make bench`, `make install PREFIX=...`; see README.md.

PREFIX    ?= /usr/local
CUDA_HOME ?= /usr/local/cuda
SANITIZE  ?=
BUILD     ?= build$(if $(SANITIZE),-$(subst $(comma),-,$(SANITIZE)))
comma := ,

CC  ?= cc
CXX ?= c++
NVCC := $(shell command -v $(CUDA_HOME)/bin/nvcc 2>/dev/null || command -v nvcc 2>/dev/null)
# MPI support (the mpi transport and ringoCommInitMPI) is built when mpicc is found; MPI=0 turns it off.
MPI   ?= 1
MPICC := $(if $(filter 1,$(MPI)),$(shell command -v mpicc 2>/dev/null))
MPI_CFLAGS := $(if $(MPICC),-DRINGO_HAVE_MPI $(shell $(MPICC) --showme:compile 2>/dev/null))
MPI_LIBS   := $(if $(MPICC),$(shell $(MPICC) --showme:link 2>/dev/null))

# WERROR=0 keeps warnings as warnings: for a compiler other than CI's gcc 12, whose new warnings
# should not stop a build (make gpu-check on a machine with another image does this).
WERROR    ?= 1
WARN      := -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror)
OPT       ?= -O2 -g
SANFLAGS  := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer)
CPPFLAGS  := -D_GNU_SOURCE -Iinclude -Isrc $(MPI_CFLAGS)
CFLAGS    = -std=c11 $(OPT) $(WARN) -fPIC -fvisibility=hidden -pthread $(SANFLAGS) -DRINGO_BUILDING_LIBRARY
CXXFLAGS  = -std=c++17 $(OPT) $(WARN) -pthread $(SANFLAGS)
# The suites' own objects: -O1 without debug info takes 40 % less CPU than -O2 -g (their compiles are
# most of the build: docs/testing.md); the library keeps OPT, and sanitized builds keep -g for their
# reports' lines. To debug a suite: make TEST_OPT='-O0 -g'.
TEST_OPT  ?= $(if $(SANITIZE),-O1 -g,-O1)
TEST_CXXFLAGS = -std=c++17 $(TEST_OPT) $(WARN) -pthread $(SANFLAGS)
# Except test_collectives, whose checks walk every element of buffers of millions (collective_cases.h):
# at -O1 those loops were most of the sanitizer stages' longest tests, and -O2 costs 15 s of compile
# to take a third off them (docs/testing.md). Pattern-specific: naming the object as a target would
# change which link rule make picks for other suites.
%/test_collectives.o: TEST_OPT := $(patsubst -O1,-O2,$(TEST_OPT))
LDLIBS    := $(MPI_LIBS) -pthread -lrt -lm

LIB_SRC   ?= $(wildcard src/*/*.c)
LIB_HDR   := $(wildcard include/*.h src/*/*.h)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC  := $(wildcard test/test_*.cc)
# The support files (harness, main) are compiled once, into $(BUILD)/support/, not once per suite:
# that took a third of the build's CPU time.
TEST_SUPPORT ?= $(patsubst test/%.cc,$(BUILD)/support/%.o,$(filter-out $(TEST_SRC),$(wildcard test/*.cc))) \
                $(patsubst test/%.c,$(BUILD)/support/%.o,$(wildcard test/*.c))
TEST_BIN  := $(TEST_SRC:test/%.cc=$(BUILD)/test/%)
# MPI suites (test/mpi/) are built with MPI and run under mpirun by .ci/run_tests.sh. The ring and two-level suites
# (and the staged suite's MpiTurns tests) run twice: with Open MPI's defaults (shared memory between
# the ranks of this host), then over TCP, as between hosts, where a posted MPI send moves only while
# its rank calls into MPI. The ring suite's shm* rings (one host, every link shm: MPI only carries
# the unique id) would run the same again over TCP, so its second run leaves them out.
MPI_TEST_SRC := $(if $(MPICC),$(wildcard test/mpi/test_*.cc))
MPI_TEST_BIN := $(MPI_TEST_SRC:test/mpi/%.cc=$(BUILD)/test/mpi/%)
MPI_TCP_RUN  := $(if $(MPICC),OMPI_MCA_btl=tcp$(comma)self \
                $(BUILD)/test/mpi/test_mpi_ring@-Rings/MpiRingTest.EveryCollectiveTypeAndOpIsExact/shm* \
                $(BUILD)/test/mpi/test_mpi_two_level $(BUILD)/test/mpi/test_mpi_staged@MpiTurns.*)
# Gloo (libgloo-dev): ringo-bench --compare gloo, in bench/bench_gloo.cc, is built in when Gloo's headers
# are found; GLOO=0 leaves it out.
GLOO ?= 1
GLOO_FOUND := $(if $(filter 1,$(GLOO)),$(shell $(CXX) -std=c++17 -fsyntax-only -x c++ -include gloo/allreduce.h /dev/null 2>/dev/null && echo 1))
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bin/%)
# The teaching tools (tools/): ringo-trace and ringo-model.
TOOLS_SRC := $(wildcard tools/*.c)
TOOLS_BIN := $(TOOLS_SRC:tools/%.c=$(BUILD)/bin/%)

# ---- CUDA (begin) ---- owned by the CUDA work (cuda/, .ci/gpu_check.sh); edit outside this block.
# When nvcc is found and CUDA is not 0, cuda/*.cu compile for sm_90 plus compute_90 PTX (which the
# driver JIT-compiles for newer GPUs) into libringo, which then links libcudart (with an rpath), and
# everything is built with -DRINGO_HAVE_CUDA. libcudart loads without a driver or a GPU, its calls
# then return errors, so the library still works there. `make CUDA=0` builds without CUDA.
CUDA ?= 1
# This block names the first targets of the file (the config stamp): a bare `make` must still mean all.
.DEFAULT_GOAL := all
NVCC := $(if $(filter 1,$(CUDA)),$(NVCC))
CUDA_ROOT := $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)))
CUDA_LIB := $(if $(NVCC),$(firstword $(wildcard $(CUDA_ROOT)/lib64 $(CUDA_ROOT)/lib)))
CUDA_GENCODE ?= -gencode arch=compute_90,code=[sm_90,compute_90]
# -ffp-contract=off: the host half of the .cu (the CPU emulation the tests run) must not fuse a*b+c,
# like src/reduce.c (elementwise.h's rules). Never --use_fast_math: it flushes subnormals.
NVCCFLAGS = -std=c++17 -O3 -g -lineinfo $(CUDA_GENCODE) $(if $(filter 1,$(WERROR)),--Werror all-warnings) \
            -Xcompiler -fPIC,-fvisibility=hidden,-ffp-contract=off,-Wall,-Wextra$(if $(filter 1,$(WERROR)),$(comma)-Werror)
CUDA_SRC ?= $(wildcard cuda/*.cu)
CUDA_OBJ := $(if $(NVCC),$(CUDA_SRC:%.cu=$(BUILD)/obj/%.o))
ifneq ($(NVCC),)
CPPFLAGS += -DRINGO_HAVE_CUDA $(if $(wildcard $(CUDA_ROOT)/include/cuda_runtime_api.h),-I$(CUDA_ROOT)/include)
# nvcc's launch stubs use C++ function-local statics (__cxa_guard_*): the C-linked .so and C programs
# linking libringo.a need libstdc++ as well.
CUDA_LDLIBS := $(if $(CUDA_LIB),-L$(CUDA_LIB) -Wl$(comma)-rpath$(comma)$(CUDA_LIB)) -lcudart -lstdc++
LDLIBS += $(CUDA_LDLIBS)
LIB_OBJ += $(CUDA_OBJ)
endif

$(BUILD)/obj/cuda/%.o: cuda/%.cu $(wildcard cuda/*.cuh src/include/*.h) include/ringo.h
	@mkdir -p $(dir $@)
	$(NVCC) -D_GNU_SOURCE -DRINGO_BUILDING_LIBRARY -Iinclude -Isrc $(NVCCFLAGS) -c $< -o $@

# Every object depends on the build's configuration (CUDA, MPI, Gloo: found or not, and their flags),
# so switching CUDA on or off (or the arch), or a first `make` before `make deps` installed MPI, then
# any make in the same build folder, rebuilds them, and with them the libraries, tests and tools
# (a library built without MPI would leave ringo-bench unlinkable). The stamp is rewritten only
# when the configuration changed.
CUDA_CONFIG := $(if $(NVCC),$(NVCC) $(CUDA_GENCODE) $(CUDA_LDLIBS),none)
BUILD_CONFIG = cuda: $(CUDA_CONFIG); mpi: $(MPI_CFLAGS) $(MPI_LIBS); gloo: $(or $(GLOO_FOUND),no)
$(BUILD)/build.config: build-config-check
	@mkdir -p $(dir $@)
	@echo '$(BUILD_CONFIG)' | cmp -s - $@ || echo '$(BUILD_CONFIG)' > $@
$(LIB_OBJ): $(BUILD)/build.config

detect: cuda-detect
cuda-detect:
	@echo "ringo build: CUDA $(if $(NVCC),on: cuda/*.cu with $(CUDA_GENCODE)$(comma) -lcudart from $(CUDA_LIB),part skipped ($(if $(filter 1,$(CUDA)),nvcc not found at $(CUDA_HOME)/bin/nvcc nor on PATH,CUDA=$(CUDA))): building without it)"

# The device benchmark (bench/ringo-gpu-bench.c) needs the CUDA runtime's headers and library, so
# the generic bench rule below, which has neither, must never build it: it is taken out of the
# tools list here and built by its own rule only when nvcc is found.
BENCH_BIN := $(filter-out $(BUILD)/bin/ringo-gpu-bench,$(BENCH_BIN))
ifneq ($(NVCC),)
tools: $(BUILD)/bin/ringo-gpu-bench
$(BUILD)/bin/ringo-gpu-bench: bench/ringo-gpu-bench.c bench/gpu_bench.h bench/gpu_bench_data.h bench/bench_args.h $(BUILD)/lib/libringo.a include/ringo.h \
                             $(BUILD)/build.config
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(WARN) -pthread $(SANFLAGS) -D_GNU_SOURCE -DRINGO_HAVE_CUDA -I$(CUDA_ROOT)/include \
	  -Iinclude $< -o $@ $(BUILD)/lib/libringo.a $(LDLIBS)
else
$(BUILD)/bin/ringo-gpu-bench:
	@echo "ringo-gpu-bench needs CUDA ($(if $(filter 1,$(CUDA)),nvcc not found,CUDA=$(CUDA))): not built"; exit 1
endif

# On a machine with a GPU: build for sm_90, run the GPU suites, log everything into LOG (a folder).
gpu-check:
	@.ci/gpu_check.sh "$(or $(LOG),gpu-check-log)"

.PHONY: cuda-detect build-config-check gpu-check
# ---- CUDA (end) ----

.PHONY: all lib tests tools test check test-stages bench install detect clean deps deps-check plot chaos
all: detect lib tools nccl

detect:
	@echo "ringo build: cc=$(CC) nvcc: $(if $(NVCC),yes ($(NVCC)),no) mpi: $(if $(MPICC),yes ($(MPICC)),no) gloo: $(if $(GLOO_FOUND),yes (ringo-bench --compare gloo),no)$(if $(SANITIZE), sanitize=$(SANITIZE))"

# nvcc's objects first (when built): they are the build's longest jobs, and under -j the C
# objects and the suites' compiles fill the other cores while they run.
lib: $(CUDA_OBJ) $(BUILD)/lib/libringo.so $(BUILD)/lib/libringo.a

$(BUILD)/obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The reduce loops are the hot path: let the compiler vectorise them hard.
$(BUILD)/obj/src/reduce/reduce.o: OPT := -O3 -g

$(BUILD)/lib/libringo.so: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libringo.so.0 $(SANFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/lib/libringo.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

tools: $(BENCH_BIN) $(TOOLS_BIN)
$(BUILD)/bin/%: bench/%.c $(wildcard bench/*.h) $(BUILD)/lib/libringo.a include/ringo.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(WARN) -pthread $(SANFLAGS) -D_GNU_SOURCE -Iinclude $(TOOL_CPPFLAGS) $(MPI_CFLAGS) $< -o $@ \
	  $(TOOL_OBJ) $(BUILD)/lib/libringo.a $(TOOL_LIBS) $(LDLIBS)
$(BUILD)/bin/%: tools/%.c $(wildcard tools/*.h) $(BUILD)/lib/libringo.a include/ringo.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(WARN) -pthread $(SANFLAGS) -D_GNU_SOURCE -Iinclude $(TOOL_CPPFLAGS) $< -o $@ \
	  $(BUILD)/lib/libringo.a $(LDLIBS)

ifeq ($(GLOO_FOUND),1)
$(BUILD)/bin/ringo-bench: TOOL_CPPFLAGS := -DRINGO_HAVE_GLOO
$(BUILD)/bin/ringo-bench: TOOL_OBJ := $(BUILD)/obj/bench/bench_gloo.o
$(BUILD)/bin/ringo-bench: TOOL_LIBS := -lgloo -lstdc++
$(BUILD)/bin/ringo-bench: $(BUILD)/obj/bench/bench_gloo.o
$(BUILD)/obj/bench/bench_gloo.o: bench/bench_gloo.cc bench/bench_gloo.h include/ringo.h $(BUILD)/build.config
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -Iinclude -c $< -o $@
endif

# The chaos test (test/chaos/): ranks killed or stopped at random instants; make chaos, in make check.
CHAOS_BIN := $(BUILD)/bin/ringo-chaos
CHAOS_RUNS ?= 48
$(CHAOS_BIN): test/chaos/ringo_chaos.c $(BUILD)/lib/libringo.a include/ringo.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(WARN) -pthread $(SANFLAGS) -D_GNU_SOURCE -Iinclude $< -o $@ $(BUILD)/lib/libringo.a $(LDLIBS)
chaos: $(CHAOS_BIN)
	$(CHAOS_BIN) --runs $(CHAOS_RUNS) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

$(BUILD)/bin/ddp_train: include/ringo_ddp.h
$(BUILD)/test-obj/test_ddp.o: bench/mlp.h include/ringo_ddp.h
$(BUILD)/test/test_bench: $(BUILD)/bin/ringo-bench $(BUILD)/bin/ddp_train
$(BUILD)/test/test_model: $(BUILD)/bin/ringo-model
$(BUILD)/test/test_trace $(BUILD)/test/mpi/test_mpi_two_level: $(BUILD)/bin/ringo-trace
$(BUILD)/test-obj/test_gpu_bench_data.o: bench/gpu_bench_data.h

# The teaching tools print the library's own schedule and cost model, so they (alone in bench/)
# see the internal headers.
$(BUILD)/bin/ringo-trace $(BUILD)/bin/ringo-model: TOOL_CPPFLAGS := -Isrc
$(BUILD)/bin/ringo-trace $(BUILD)/bin/ringo-model: $(wildcard src/sched/*.h)

# Tests link the static library so they can also reach internal functions (src/<layer>/*.h).
# A suite is compiled (into $(BUILD)/test-obj/) apart from its link, so the compiles need no
# library and run beside the library's own (nvcc's cuda/*.cu, the build's longest jobs).
tests: $(TEST_BIN) $(MPI_TEST_BIN) $(CHAOS_BIN)
.PRECIOUS: $(BUILD)/test-obj/%.o $(BUILD)/test-obj/mpi/%.o $(BUILD)/support/%.o
$(BUILD)/test-obj/%.o: test/%.cc $(wildcard test/*.h) $(LIB_HDR) $(BUILD)/build.config
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(TEST_CXXFLAGS) -c $< -o $@
$(BUILD)/test/%: $(BUILD)/test-obj/%.o $(TEST_SUPPORT) $(BUILD)/lib/libringo.a
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $< $(TEST_SUPPORT) -o $@ $(BUILD)/lib/libringo.a -lgtest $(LDLIBS)

$(BUILD)/test-obj/mpi/%.o: test/mpi/%.cc $(wildcard test/mpi/*.h test/*.h) $(LIB_HDR) $(BUILD)/build.config
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(TEST_CXXFLAGS) -c $< -o $@
# A static pattern rule: $(BUILD)/test/% (the suites' link, without MPI's main) must never take these.
$(MPI_TEST_BIN): $(BUILD)/test/mpi/%: $(BUILD)/test-obj/mpi/%.o $(BUILD)/test-obj/mpi/main.o $(BUILD)/lib/libringo.a
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $< $(BUILD)/test-obj/mpi/main.o -o $@ $(BUILD)/lib/libringo.a -lgtest $(LDLIBS)

# deps: what make, make bench and make test need; deps-check adds make check's (clang, libFuzzer).
deps:
	@.ci/deps.sh
deps-check:
	@.ci/deps.sh check

# The main job: 4 local ranks, float32 sum all-reduce, 1 KiB .. 64 MiB.
bench: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/bin/ringo-bench -N 4 -b 1K -e 64M -f 2 -d float32 -o sum --bound

# make test: what a user runs to see it works (about 5 minutes on 2 cores after the build): every
# suite, the MPI ones under mpirun, the installed tree, one short valgrind run. make check: the
# full gate before a change goes in (about 30 minutes): make test's stages, then ASan+UBSan, TSan,
# valgrind, the fuzzers and .ci/python_tests.sh. Both end with one line "N passed, M failed, K
# skipped" (.ci/test_all.sh, which also prints each stage's time and five slowest tests).
# The stages run in a make of their own: on a bare machine deps has just installed MPI, which this
# make, parsed before, did not see (so it would leave the MPI suites out).
TEST_RUN = $(TEST_BIN) $(MPI_TEST_BIN) $(MPI_TCP_RUN)
test: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all tests
	@$(MAKE) --no-print-directory test-stages STAGES=test
check: deps-check
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all tests
	@$(MAKE) --no-print-directory test-stages STAGES=check
test-stages:
	@MAKE="$(MAKE)" BUILD="$(BUILD)" QUICK="$(QUICK)" SANITIZE="$(SANITIZE)" .ci/test_all.sh $(STAGES) $(TEST_RUN)

# Pictures: busbw vs size (ringo, Open MPI, naive, bound) and bytes sent per rank vs N, from
# real runs -> $(BUILD)/plots/ and docs/img/.
plot: deps
	@$(MAKE) --no-print-directory all
	BUILD=$(BUILD) bench/plot.sh
	BUILD=$(BUILD) bench/plot_ddp.sh

# Headers, libringo.so (.so.0) and libringo.a, ringo.pc, the CMake package (lib/cmake/ringo/:
# find_package(ringo), ringo::ringo and ringo::ringo_static) and the NCCL drop-in. The version is
# ringo.pc's. test/install/run.sh (in make test) builds the README's example against it.
RINGO_VERSION := $(shell sed -n 's/^Version: *//p' src/ringo.pc.in)
space := $(empty) $(empty)
install: lib
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/ringo.h include/ringo_ddp.h $(DESTDIR)$(PREFIX)/include/
	$(if $(MPICC),install -m 644 include/ringo_mpi.h $(DESTDIR)$(PREFIX)/include/)
	install -m 755 $(BUILD)/lib/libringo.so $(DESTDIR)$(PREFIX)/lib/libringo.so.0
	ln -sf libringo.so.0 $(DESTDIR)$(PREFIX)/lib/libringo.so
	install -m 644 $(BUILD)/lib/libringo.a $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@MPI_LIBS@|$(MPI_LIBS)|' -e 's|@CUDA_LIBS@|$(CUDA_LDLIBS)|' src/ringo.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ringo.pc
	install -d $(DESTDIR)$(PREFIX)/lib/ringo-nccl $(DESTDIR)$(PREFIX)/include/ringo/nccl
	install -m 755 $(NCCL_LIB) $(DESTDIR)$(PREFIX)/lib/ringo-nccl/libnccl.so.2
	ln -sf libnccl.so.2 $(DESTDIR)$(PREFIX)/lib/ringo-nccl/libnccl.so
	install -m 644 nccl/nccl.h $(DESTDIR)$(PREFIX)/include/ringo/nccl/nccl.h
	install -d $(DESTDIR)$(PREFIX)/lib/cmake/ringo
	sed -e 's|@STATIC_LIBS@|$(subst $(space),;,$(strip $(LDLIBS)))|' -e 's|@HAVE_MPI@|$(if $(MPICC),TRUE,FALSE)|' \
	  cmake/ringoConfig.cmake.in > $(DESTDIR)$(PREFIX)/lib/cmake/ringo/ringoConfig.cmake
	sed -e 's|@VERSION@|$(RINGO_VERSION)|' -e 's|@VERSION_MAJOR@|$(firstword $(subst ., ,$(RINGO_VERSION)))|' \
	  cmake/ringoConfigVersion.cmake.in > $(DESTDIR)$(PREFIX)/lib/cmake/ringo/ringoConfigVersion.cmake

clean:
	rm -rf build build-*

# ---- NCCL drop-in (begin) ---- owned by the NCCL drop-in work (nccl/, test/*nccl*; issue #9).
# nccl/nccl.h (NCCL 2.10.3's API) and libnccl.so.2, which forwards it to ringo, so an NCCL program
# builds and runs unchanged: -Inccl -L$(BUILD)/lib/ringo-nccl -lnccl (nccl/README.md). The library
# has a folder of its own so that putting it on a program's paths brings nothing else along, and
# finds libringo.so.0 one folder up ($ORIGIN/..) in the build tree and after `make install`.
# DT_RPATH (--disable-new-dtags), unlike DT_RUNPATH, also wins over LD_LIBRARY_PATH, where a CUDA
# install often lists a real libnccl.so.2.
NCCL_DIR := $(BUILD)/lib/ringo-nccl
NCCL_LIB := $(NCCL_DIR)/libnccl.so.2
NCCL_PROGRAM := $(BUILD)/test/nccl_program
# The NCCL tests link only test/main.cc (or its object) of the support files: no libringo.a.
NCCL_TEST_MAIN = $(filter %main.cc %main.o,$(TEST_SUPPORT))
NCCL_TEST_DEFS = -DRINGO_NCCL_LIB='"$(abspath $(NCCL_LIB))"' -DRINGO_NCCL_PROGRAM='"$(abspath $(NCCL_PROGRAM))"' \
                 -DRINGO_NCCL_ABI_DIR='"$(abspath nccl/abi)"'

.PHONY: nccl
nccl: $(NCCL_LIB) $(NCCL_DIR)/libnccl.so
install: nccl

# The shim is split by concern (nccl/shim.h lists the parts); every part sees nccl.h and ringo.h.
NCCL_SHIM_OBJ := $(patsubst nccl/%.c,$(BUILD)/obj/nccl/%.o,$(wildcard nccl/*.c))
$(BUILD)/obj/nccl/%.o: nccl/%.c nccl/nccl.h nccl/shim.h include/ringo.h $(BUILD)/build.config
	@mkdir -p $(dir $@)
	$(CC) -Inccl $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# libringo.so's soname is libringo.so.0: the name the shim looks for at run time.
$(BUILD)/lib/libringo.so.0: $(BUILD)/lib/libringo.so
	ln -sf libringo.so $@

# -ldl: the shim finds the CUDA runtime the process has loaded (nccl/shim_mem.c) rather than link it.
$(NCCL_LIB): $(NCCL_SHIM_OBJ) $(BUILD)/lib/libringo.so $(BUILD)/lib/libringo.so.0
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libnccl.so.2 $(SANFLAGS) -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/..:$$ORIGIN' \
	  -o $@ $(NCCL_SHIM_OBJ) $(BUILD)/lib/libringo.so -pthread -ldl -lm

$(NCCL_DIR)/libnccl.so: $(NCCL_LIB)
	ln -sf libnccl.so.2 $@

# An NCCL program compiled and linked as its users would, against nothing but nccl.h and the shim
# (with the CUDA headers when present, so nccl.h's CUDA branch is compiled from C too).
$(NCCL_PROGRAM): test/nccl/nccl_program.c nccl/nccl.h $(NCCL_LIB) $(NCCL_DIR)/libnccl.so
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(WARN) -pthread $(SANFLAGS) -D_GNU_SOURCE -Inccl \
	  $(if $(NVCC),-I$(CUDA_ROOT)/include) $< -o $@ \
	  -L$(NCCL_DIR) -Wl,--disable-new-dtags,-rpath,$(abspath $(NCCL_DIR)) -lnccl -ldl

# The same client on device memory (test/nccl/nccl_device_program.c), built only with CUDA: it needs the
# runtime's headers and libcudart besides the shim. Not a GoogleTest suite: `make gpu-check` runs it.
NCCL_DEVICE_PROGRAM := $(BUILD)/test/nccl_device_program
ifneq ($(NVCC),)
tests: $(NCCL_DEVICE_PROGRAM)
$(NCCL_DEVICE_PROGRAM): test/nccl/nccl_device_program.c nccl/nccl.h $(NCCL_LIB) $(NCCL_DIR)/libnccl.so $(BUILD)/build.config
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(WARN) -pthread $(SANFLAGS) -D_GNU_SOURCE -Inccl -I$(CUDA_ROOT)/include $< -o $@ \
	  -L$(NCCL_DIR) -Wl,--disable-new-dtags,-rpath,$(abspath $(NCCL_DIR)) -lnccl \
	  $(if $(CUDA_LIB),-L$(CUDA_LIB) -Wl$(comma)-rpath$(comma)$(CUDA_LIB)) -lcudart
endif

# The two suites see nccl.h only and reach the shim through dlopen or nccl_program.
$(BUILD)/test/test_nccl_abi: test/test_nccl_abi.cc $(NCCL_TEST_MAIN) nccl/nccl.h $(NCCL_LIB) $(wildcard nccl/abi/*.txt)
	@mkdir -p $(dir $@)
	$(CXX) -Inccl $(CPPFLAGS) $(TEST_CXXFLAGS) $(NCCL_TEST_DEFS) $< $(NCCL_TEST_MAIN) -o $@ -lgtest -ldl -pthread

$(BUILD)/test/test_nccl_program: test/test_nccl_program.cc $(NCCL_TEST_MAIN) $(NCCL_PROGRAM) $(NCCL_LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(TEST_CXXFLAGS) $(NCCL_TEST_DEFS) $< $(NCCL_TEST_MAIN) -o $@ -lgtest -pthread
# The calls beyond 2.10 (test_nccl_calls: init, split, all-to-all/gather/scatter; test_nccl_ops:
# PreMulSum, groups, memory, the unsupported calls), ranks as threads, linked as a client links.
NCCL_CALL_TESTS := $(BUILD)/test/test_nccl_calls $(BUILD)/test/test_nccl_ops
$(NCCL_CALL_TESTS): $(BUILD)/test/%: test/%.cc test/nccl/nccl_ranks.h $(NCCL_TEST_MAIN) nccl/nccl.h $(NCCL_LIB) \
                    $(NCCL_DIR)/libnccl.so
	@mkdir -p $(dir $@)
	$(CXX) -Inccl -Itest $(CPPFLAGS) $(TEST_CXXFLAGS) $< $(NCCL_TEST_MAIN) -o $@ \
	  -L$(NCCL_DIR) -Wl,--disable-new-dtags,-rpath,$(abspath $(NCCL_DIR)) -lnccl -lgtest -pthread
# On a GPU: PyTorch DDP (torchrun, backend "nccl", 2 ranks on GPU 0) and nccl-tests' all_reduce_perf under 2
# MPI processes on ringo's libnccl.so.2 (nccl/gpu_check_nccl.sh; PYTHON=python with torch, NCCL_TESTS=its build).
.PHONY: gpu-check-nccl
gpu-check-nccl: nccl tools
	nccl/gpu_check_nccl.sh $(BUILD)
# ---- NCCL drop-in (end) ----

# ==== reliability: sanitizers, ThreadSanitizer, valgrind, fuzzers (.ci/test_all.sh) ==============
# `make check` runs, after make test's stages: test-asan, test-tsan, test-valgrind and fuzz, and
# totals them all in its one closing line; make test runs test-valgrind-short. `make test QUICK=1`
# (or any SANITIZE= build) runs only the normal suites. Each also runs alone. What each covers and
# costs: docs/testing.md.
.PHONY: test-asan test-tsan test-valgrind test-valgrind-short fuzz fuzzers
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
SUBMAKE_J  := $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))
ASAN_BUILD ?= build-address-undefined
TSAN_BUILD ?= build-thread

# Sanitizer builds leave CUDA out (nvcc objects are not instrumented, and the sanitizer runtimes
# do not mix with a GPU driver): $(call SAN_MAKE,folder,sanitizers) targets...
SAN_MAKE = $(MAKE) --no-print-directory $(SUBMAKE_J) CUDA=0 BUILD=$(1) SANITIZE=$(2)
# The test support files, compiled once per build folder (TEST_SUPPORT above).
$(BUILD)/support/%.o: test/%.cc $(wildcard test/*.h) $(BUILD)/build.config
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(TEST_CXXFLAGS) -c $< -o $@
# C support files: those that read the library's internals (their headers are C11).
$(BUILD)/support/%.o: test/%.c $(wildcard test/*.h) $(LIB_HDR) $(BUILD)/build.config
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -std=c11 $(OPT) $(WARN) -pthread $(SANFLAGS) -c $< -o $@

# AddressSanitizer + UBSan (leaks included) over every suite, the MPI ones under mpirun too.
# Run-time options and the Open MPI leak suppressions: .ci/run_tests.sh, .ci/lsan.supp.
test-asan: deps
	@$(call SAN_MAKE,$(ASAN_BUILD),address$(comma)undefined) tests
	@RINGO_STAGE="address,undefined" .ci/run_tests.sh $(patsubst $(BUILD)/%,$(ASAN_BUILD)/%,$(TEST_BIN) $(MPI_TEST_BIN))

# ThreadSanitizer over the suites where threads share a process (ranks as threads, the bootstrap
# root thread, abort from another thread, the DDP comm thread). Of the collective sweeps only one
# runs with a thread per rank (N=3, about a minute under TSan); the rest run in group mode.
TSAN_SUITES ?= test_api test_bootstrap test_shm test_failures test_ddp test_collectives test_p2p test_staged test_p2p_device test_ddp_device test_oneshot
TSAN_FILTER_test_collectives ?= N/AllReduceThreads.OneThreadPerRank/1:OtherCollectivesGroup.*:CountersGroup.*
TSAN_FILTER_test_p2p ?= N/P2PThreads.*:N/P2PGroup.*:DeferredInit.*:P2PSelf.*
TSAN_FILTER_test_oneshot ?= OneShot.*:N/OneShotBits.EqualTheRingsForEveryCollectiveTypeAndOp/2
TSAN_RUN := $(foreach t,$(filter $(TSAN_SUITES),$(TEST_SRC:test/%.cc=%)),$(TSAN_BUILD)/test/$(t)$(if $(TSAN_FILTER_$(t)),@$(TSAN_FILTER_$(t))))
test-tsan: deps
	@$(call SAN_MAKE,$(TSAN_BUILD),thread) $(foreach r,$(TSAN_RUN),$(firstword $(subst @, ,$(r))))
	@RINGO_STAGE="thread sanitizer" .ci/run_tests.sh $(foreach r,$(TSAN_RUN),'$(r)')

# Memcheck on multi-rank runs of the normal build. make test's short run (test-valgrind-short):
# every collective and root with 4 forked ranks over shm; make check adds test-valgrind: forked
# ranks 1..8 (the two together are what one valgrind stage ran before make test and make check
# were split). Leaks a forked rank inherits from its parent are suppressed (.ci/valgrind.supp).
VALGRIND_RUN ?= $(BUILD)/test/test_collectives@N/Counters.*
VALGRIND     ?= valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
                --suppressions=.ci/valgrind.supp
test-valgrind: deps $(firstword $(subst @, ,$(VALGRIND_RUN)))
	@RINGO_STAGE=valgrind RINGO_TEST_LAUNCH="$(VALGRIND)" .ci/run_tests.sh '$(VALGRIND_RUN)'
VALGRIND_SHORT_RUN ?= $(BUILD)/test/test_collectives@N/OtherCollectivesFork.EveryRootAndPlacement/3
test-valgrind-short: deps $(firstword $(subst @, ,$(VALGRIND_SHORT_RUN)))
	@RINGO_STAGE="valgrind (short)" RINGO_TEST_LAUNCH="$(VALGRIND)" .ci/run_tests.sh '$(VALGRIND_SHORT_RUN)'

# libFuzzer harnesses (test/fuzz/fuzz_*.cc), one per parser of bytes that come from another
# process, each run for FUZZ_TIME seconds by `make fuzz` (corpus kept in $(FUZZ_BUILD)/corpus/).
# The library is rebuilt with clang for coverage feedback, ASan and UBSan.
FUZZ_TIME    ?= 20
FUZZ_BUILD   ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_CXX     ?= clang++
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_SRC     := $(wildcard test/fuzz/fuzz_*.cc)
FUZZ_BIN     := $(FUZZ_SRC:test/fuzz/%.cc=$(FUZZ_BUILD)/bin/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
# Host code only: the nvcc objects are not part of the fuzzing build.
FUZZ_CPPFLAGS = $(filter-out -DRINGO_HAVE_CUDA,$(CPPFLAGS))

fuzzers: $(FUZZ_BIN)
fuzz: deps-check
	@$(MAKE) --no-print-directory $(SUBMAKE_J) fuzzers
	@RINGO_STAGE=fuzzers FUZZ_TIME=$(FUZZ_TIME) FUZZ_DIR=$(FUZZ_BUILD) .ci/fuzz.sh $(FUZZ_BIN)

$(FUZZ_BUILD)/obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) -std=c11 -O1 -g $(WARN) -fPIC -fvisibility=hidden -pthread -fsanitize=fuzzer-no-link $(FUZZ_SAN) -DRINGO_BUILDING_LIBRARY -c $< -o $@

# clang 14 rejects reduce.c's gcc CPU dispatch (__builtin_cpu_supports("f16c")); no fuzzer aims
# at the arithmetic, so it is built with gcc and left uninstrumented.
$(FUZZ_BUILD)/obj/src/reduce/reduce.o: src/reduce/reduce.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	gcc $(FUZZ_CPPFLAGS) -std=c11 -O2 -g $(WARN) -fPIC -fvisibility=hidden -pthread -DRINGO_BUILDING_LIBRARY -c $< -o $@

$(FUZZ_BUILD)/lib/libringo.a: $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/bin/%: test/fuzz/%.cc test/fuzz/fuzz.h $(FUZZ_BUILD)/lib/libringo.a
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_CPPFLAGS) -std=c++17 -O1 -g $(WARN) -pthread -fsanitize=fuzzer $(FUZZ_SAN) $< -o $@ $(FUZZ_BUILD)/lib/libringo.a $(LDLIBS)
# ==== end of reliability block ====================================================================

# ---- peers (begin) ---- owned by the peers work (bench/peers/, docs/peers.md; issue #25).
# ringo beside Intel MPI, oneCCL (both from PyPI, under $(BUILD)/peers/), MPICH and Open MPI's coll/tuned
# algorithms, interleaved run by run; installs what is missing. QUICK=1: the smoke run (N = 2, 3 sizes).
# PEERS_ARGS passes more flags (bench/peers/bench-peers.sh --help). plot-peers draws its table.
.PHONY: bench-peers plot-peers
bench-peers:
	BUILD=$(BUILD) bench/peers/bench-peers.sh $(if $(QUICK),--quick) $(PEERS_ARGS)
plot-peers:
	BUILD=$(BUILD) bench/peers/plot_peers.sh
# ---- peers (end) ----
