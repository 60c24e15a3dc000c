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

WARN      := -Wall -Wextra -Werror
OPT       ?= -O2 -g
SANFLAGS  := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer)
CPPFLAGS  := -D_GNU_SOURCE -Iinclude -Isrc/include $(MPI_CFLAGS)
CFLAGS    = -std=c11 $(OPT) $(WARN) -fPIC -fvisibility=hidden -pthread $(SANFLAGS) -DRINGO_BUILDING_LIBRARY
CXXFLAGS  = -std=c++17 $(OPT) $(WARN) -pthread $(SANFLAGS)
LDLIBS    := $(MPI_LIBS) -pthread -lrt -lm

LIB_SRC   ?= $(wildcard src/*.c src/transport/*.c)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC  := $(wildcard test/test_*.cc)
TEST_SUPPORT ?= $(filter-out $(TEST_SRC),$(wildcard test/*.cc))
TEST_BIN  := $(TEST_SRC:test/%.cc=$(BUILD)/test/%)
# MPI suites (test/mpi/) are built with MPI and run under mpirun by .ci/run_tests.sh.
MPI_TEST_SRC := $(if $(MPICC),$(wildcard test/mpi/test_*.cc))
MPI_TEST_BIN := $(MPI_TEST_SRC:test/mpi/%.cc=$(BUILD)/test/mpi/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bin/%)

# ---- CUDA (begin) ---- owned by the CUDA work (cuda/, .ci/gpu_check.sh); edit outside this block.
# When nvcc is found and CUDA is not 0, cuda/*.cu compile for sm_90 plus compute_90 PTX (which the
# driver JIT-compiles for newer GPUs) into libringo, which then links libcudart (with an rpath), and
# everything is built with -DRINGO_HAVE_CUDA. libcudart loads without a driver or a GPU, its calls
# then return errors, so the library still works there. `make CUDA=0` builds without CUDA.
CUDA ?= 1
NVCC := $(if $(filter 1,$(CUDA)),$(NVCC))
CUDA_ROOT := $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)))
CUDA_LIB := $(if $(NVCC),$(firstword $(wildcard $(CUDA_ROOT)/lib64 $(CUDA_ROOT)/lib)))
CUDA_GENCODE ?= -gencode arch=compute_90,code=[sm_90,compute_90]
# -ffp-contract=off: the host half of the .cu (the CPU emulation the tests run) must not fuse a*b+c,
# like src/reduce.c (elementwise.h's rules). Never --use_fast_math: it flushes subnormals.
NVCCFLAGS = -std=c++17 -O3 -g -lineinfo $(CUDA_GENCODE) --Werror all-warnings \
            -Xcompiler -fPIC,-fvisibility=hidden,-ffp-contract=off,-Wall,-Wextra,-Werror
CUDA_SRC ?= $(wildcard cuda/*.cu)
CUDA_OBJ := $(if $(NVCC),$(CUDA_SRC:%.cu=$(BUILD)/obj/%.o))
ifneq ($(NVCC),)
CPPFLAGS += -DRINGO_HAVE_CUDA $(if $(wildcard $(CUDA_ROOT)/include/cuda_runtime_api.h),-I$(CUDA_ROOT)/include)
LDLIBS += $(if $(CUDA_LIB),-L$(CUDA_LIB) -Wl$(comma)-rpath$(comma)$(CUDA_LIB)) -lcudart
LIB_OBJ += $(CUDA_OBJ)
endif

$(BUILD)/obj/cuda/%.o: cuda/%.cu $(wildcard cuda/*.cuh src/include/*.h) include/ringo.h
	@mkdir -p $(dir $@)
	$(NVCC) -D_GNU_SOURCE -DRINGO_BUILDING_LIBRARY -Iinclude -Isrc/include $(NVCCFLAGS) -c $< -o $@

# Every object depends on the CUDA configuration, so switching CUDA on or off (or the arch) in one
# build folder rebuilds them, and with them the libraries, tests and tools. The stamp is rewritten
# only when the configuration changed.
CUDA_CONFIG := $(if $(NVCC),$(NVCC) $(CUDA_GENCODE),none)
$(BUILD)/cuda.config: cuda-config-check
	@mkdir -p $(dir $@)
	@echo '$(CUDA_CONFIG)' | cmp -s - $@ || echo '$(CUDA_CONFIG)' > $@
$(LIB_OBJ): $(BUILD)/cuda.config

detect: cuda-detect
cuda-detect:
	@echo "ringo build: CUDA $(if $(NVCC),on: cuda/*.cu for sm_90 + compute_90 PTX$(comma) -lcudart from $(CUDA_LIB),part skipped ($(if $(filter 1,$(CUDA)),nvcc not found at $(CUDA_HOME)/bin/nvcc nor on PATH,CUDA=$(CUDA))): building without it)"

# On a machine with a GPU: build for sm_90, run the GPU suites, log everything into LOG (a folder).
gpu-check:
	@.ci/gpu_check.sh "$(or $(LOG),gpu-check-log)"

.PHONY: cuda-detect cuda-config-check gpu-check
# ---- CUDA (end) ----

.PHONY: all lib tests tools test bench install detect clean deps plot
all: detect lib tools

detect:
	@echo "ringo build: cc=$(CC) nvcc: $(if $(NVCC),yes ($(NVCC)),no) mpi: $(if $(MPICC),yes ($(MPICC)),no)$(if $(SANITIZE), sanitize=$(SANITIZE))"

lib: $(BUILD)/lib/libringo.so $(BUILD)/lib/libringo.a

$(BUILD)/obj/%.o: %.c $(wildcard include/*.h src/include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The reduce loops are the hot path: let the compiler vectorise them hard.
$(BUILD)/obj/src/reduce.o: OPT := -O3 -g

$(BUILD)/lib/libringo.so: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libringo.so.0 $(SANFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/lib/libringo.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

tools: $(BENCH_BIN)
$(BUILD)/bin/%: bench/%.c $(wildcard bench/*.h) $(BUILD)/lib/libringo.a include/ringo.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(WARN) -pthread $(SANFLAGS) -D_GNU_SOURCE -Iinclude $(TOOL_CPPFLAGS) $(MPI_CFLAGS) $< -o $@ $(BUILD)/lib/libringo.a $(LDLIBS)

$(BUILD)/bin/ddp_train: include/ringo_ddp.h
$(BUILD)/test/test_ddp: bench/mlp.h include/ringo_ddp.h

# The teaching tools print the library's own schedule and cost model, so they (alone in bench/)
# see the internal headers.
$(BUILD)/bin/ringo-trace $(BUILD)/bin/ringo-model: TOOL_CPPFLAGS := -Isrc/include
$(BUILD)/bin/ringo-trace $(BUILD)/bin/ringo-model: $(wildcard src/include/*.h)

# Tests link the static library so they can also reach internal functions (src/include).
tests: $(TEST_BIN) $(MPI_TEST_BIN)
$(BUILD)/test/%: test/%.cc $(TEST_SUPPORT) $(wildcard test/*.h) $(BUILD)/lib/libringo.a
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $< $(TEST_SUPPORT) -o $@ $(BUILD)/lib/libringo.a -lgtest $(LDLIBS)

$(BUILD)/test/mpi/%: test/mpi/%.cc test/mpi/main.cc $(wildcard test/mpi/*.h) $(BUILD)/lib/libringo.a
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $< test/mpi/main.cc -o $@ $(BUILD)/lib/libringo.a -lgtest $(LDLIBS)

deps:
	@.ci/deps.sh

# The main job: 4 local ranks, float32 sum all-reduce, 1 KiB .. 64 MiB.
bench: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/bin/ringo-bench -N 4 -b 1K -e 64M -f 2 -d float32 -o sum --bound

# Every test binary, then one closing line "N passed, M failed[, K skipped]".
test: deps
	@$(MAKE) --no-print-directory all tests
	@.ci/run_tests.sh $(TEST_BIN) $(MPI_TEST_BIN)

# Pictures: busbw vs size (ringo, Open MPI, naive, bound) and bytes sent per rank vs N, from
# real runs -> $(BUILD)/plots/ and docs/img/.
plot: deps
	@$(MAKE) --no-print-directory all
	BUILD=$(BUILD) bench/plot.sh
	BUILD=$(BUILD) bench/plot_ddp.sh

install: lib
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/ringo.h include/ringo_ddp.h $(DESTDIR)$(PREFIX)/include/
	$(if $(MPICC),install -m 644 include/ringo_mpi.h $(DESTDIR)$(PREFIX)/include/)
	install -m 755 $(BUILD)/lib/libringo.so $(DESTDIR)$(PREFIX)/lib/libringo.so.0
	ln -sf libringo.so.0 $(DESTDIR)$(PREFIX)/lib/libringo.so
	install -m 644 $(BUILD)/lib/libringo.a $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@MPI_LIBS@|$(MPI_LIBS)|' src/ringo.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ringo.pc

clean:
	rm -rf build build-*
