# inferlab: the pipeline. `make help` lists the targets.
#
#   make deps     install the Debian packages the lab needs (apt-get; prints the command when not root)
#   make          build bin/* (CUDA parts only when nvcc is found; CUDA=0 turns them off)
#   make test     build and run the cmocka tests (SANITIZE=1: with ASan + UBSan)
#   make report   models -> experiments -> out/<hw>/report.pdf  (PROFILE=quick|full)
#   make fuzz     build the libFuzzer targets (clang), run each FUZZ_SECONDS (default 60; FUZZ_RUNS=N caps)
#   make fleet    every partition of a Slurm cluster runs the lab; one comparison report (README)
#   make clean    remove build outputs (out/ is kept; `make distclean` removes it too)

PROFILE  ?= full
SANITIZE ?= 0
WERROR   ?= 1
CUDA     ?= $(if $(shell command -v nvcc 2>/dev/null),1,0)

CC       ?= gcc
BUILD    ?= $(if $(filter 1,$(SANITIZE)),build-san,build)
BIN      := $(if $(filter 1,$(SANITIZE)),$(BUILD)/bin,bin)

DEB_PACKAGES := build-essential pkg-config libopenblas-openmp-dev libcairo2-dev libhpdf-dev \
                libcmocka-dev bible-kjv fonts-dejavu-core poppler-utils qpdf gzip bzip2 xz-utils \
                clang libclang-rt-14-dev util-linux \
                slurm-wlm
# PyPI packages the tests use: gguf, llama.cpp's reference GGUF reader (test_quantized)
PY_PACKAGES  := gguf

# Each layer sees only its own headers and those below it (DESIGN.md, "Layout"), so an include
# that points upward fails to compile: base <- kernels <- engine <- lab <- programs and tests;
# the renderer sees only the base. A program sees its own directory and LAB_INC, never another
# experiment's directory, so a sideways include fails too (the per-directory INC below).
BASE_INC   := -Ikernels/base
KERNEL_INC := $(BASE_INC) -Ikernels
ENGINE_INC := $(KERNEL_INC) -Iexperiments/engine
LAB_INC    := $(ENGINE_INC) -Iexperiments/lab
RENDER_INC := $(BASE_INC) -Irender
# tests and fuzz targets: everything, each experiment's directory too (tests include its helpers)
INCLUDES   := $(LAB_INC) -Irender \
              $(patsubst %/,-I%,$(filter-out experiments/engine/ experiments/lab/,$(wildcard experiments/*/)))
# MARCH: the CPU the build targets; the quantised kernels use AVX-512 or AVX2 where it has them
# (`make MARCH=x86-64-v3 BUILD=build-avx2 build-avx2/tests/test_quant` tests the AVX2 path on an
# AVX-512 machine, MARCH=x86-64 the scalar one).
MARCH    ?= native
CFLAGS   := -std=c11 -D_GNU_SOURCE -O2 -fvect-cost-model=dynamic -march=$(MARCH) -fopenmp -Wall -Wextra -MMD -MP -g
ifeq ($(WERROR),1)
CFLAGS   += -Werror
endif
ifeq ($(SANITIZE),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif
# OpenBLAS's OpenMP build, so BLAS calls and our own parallel loops share one thread pool:
# with the default pthread build, idle OpenMP threads spin while BLAS threads want the
# cores, and 2-thread decode ran ~10x slower than 1-thread on a 2-core machine.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
OPENBLAS  := /usr/lib/$(MULTIARCH)/openblas-openmp
CFLAGS   += -I/usr/include/$(MULTIARCH)/openblas-openmp
LDFLAGS  += -fopenmp
LDLIBS   := -L$(OPENBLAS) -Wl,-rpath,$(OPENBLAS) -lopenblas -lm
RENDER_CFLAGS := $(shell pkg-config --cflags cairo 2>/dev/null)
RENDER_LIBS   := $(shell pkg-config --libs cairo 2>/dev/null) -lhpdf

# --- sources ---------------------------------------------------------------------------
BASE_SRC   := $(wildcard kernels/base/*.c)
KERNEL_SRC := $(wildcard kernels/*.c kernels/cpu/*.c)
ENGINE_SRC := $(wildcard experiments/engine/*.c)
RENDER_SRC := $(filter-out render/main.c,$(wildcard render/*.c))
PROG_SRC   := $(wildcard experiments/*.c)
TEST_SRC   := $(wildcard tests/test_*.c)
CUDA_SRC   := $(if $(filter 1,$(CUDA)),$(wildcard kernels/cuda/*.cu))
# an experiment's own CUDA half (experiments/<name>/*.cu): built into that program, not the kernels
EXP_CUDA_SRC := $(if $(filter 1,$(CUDA)),$(wildcard experiments/*/*.cu))

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
BASE_LIB   := $(BUILD)/libbase.a
KERNEL_LIB := $(BUILD)/libkernels.a
ENGINE_LIB := $(BUILD)/libengine.a
RENDER_LIB := $(BUILD)/librender.a
CUDA_LIB   := $(if $(CUDA_SRC),$(BUILD)/libkernels_cuda.a)

ifneq ($(CUDA_SRC),)
NVCC       ?= nvcc
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC)))
NVCCFLAGS  := -O3 -std=c++17 $(KERNEL_INC) \
              -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
              -gencode arch=compute_90,code=compute_90 -Xcompiler -Wall,-Wextra -MMD -MP
CFLAGS     += -DINFERLAB_CUDA -I$(CUDA_HOME)/include
LDLIBS     += -L$(CUDA_HOME)/lib64 -lcudart -lcublas -lstdc++
# cuDNN's fused attention (kernels/cuda/attention_cudnn.cu) when cudnn.h sits beside nvcc's
# headers; CUDNN=0 (or no cudnn.h) builds that file as a stub that reports "built without cuDNN".
CUDNN      ?= $(if $(wildcard $(CUDA_HOME)/include/cudnn.h),1,0)
ifeq ($(CUDNN),1)
NVCCFLAGS  += -DINFERLAB_CUDNN
LDLIBS     += -lcudnn
endif
endif

# meta.csv records the flags the lab was built with
HW_CFLAGS := $(filter-out -I% -M% -MP,$(CFLAGS))

# The build remembers its configuration: when the compilers, their flags or the libraries
# differ from the last build's (CUDA=0/1, SANITIZE, WERROR, CC...), every object rebuilds.
BUILD_CONFIG := $(CC) $(CFLAGS) | $(NVCC) $(NVCCFLAGS) | $(LDFLAGS) $(LDLIBS) $(RENDER_LIBS)
CONFIG_STAMP := $(BUILD)/config.stamp
$(BUILD)/experiments/lab/hw.o: CFLAGS += -DINFERLAB_CFLAGS='"$(HW_CFLAGS)"'

# --- the experiments ------------------------------------------------------------------------
# The one list of experiments: each is a directory experiments/<name>/ (main.c and the helpers
# only it uses) built into bin/<name>, a step of `make report` and of the end-to-end test; the
# CUDA ones also run with --backend cuda where there is a GPU. TOOLS have the same layout and
# are not report steps. A program of one file, experiments/<name>.c, builds as bin/<name> too.
# What two experiments share lives in the harness (experiments/lab/) or a layer below it.
EXPERIMENTS      := sampling speculative kv_cache attention_variants long_context attention_kernels hardware_budget quantization serving
CUDA_EXPERIMENTS := kv_cache attention_kernels hardware_budget
TOOLS            := generate hwinfo quantize
LAB_SRC    := $(wildcard experiments/lab/*.c)
# the directories that build a program: experiments/<name>/main.c
PROGRAM_DIRS := $(patsubst experiments/%/main.c,%,$(wildcard experiments/*/main.c))
HELPER_SRC := $(filter-out %/main.c,$(wildcard $(patsubst %,experiments/%/*.c,$(EXPERIMENTS) $(TOOLS))))
LAB_LIB    := $(BUILD)/liblab.a
# every experiment's helpers (and, with CUDA, their .cu objects), for the tests alone: a
# program links only its own directory's objects
HELPER_LIB := $(BUILD)/libhelpers.a

PROGRAMS := $(patsubst %,$(BIN)/%,$(EXPERIMENTS) $(TOOLS)) $(patsubst experiments/%.c,$(BIN)/%,$(PROG_SRC)) \
            $(if $(wildcard render/main.c),$(BIN)/render)
# The tests of the vectorised CPU kernels also run on the kernels built at narrower vectors
# than the machine's (kernels/cpu/vec.h's VEC_BITS): 256-bit and scalar, so the fallbacks
# stay tested on an AVX-512 machine.
VEC_FALLBACK_BITS := 256 32
VEC_TESTS         := test_attention_full test_kernels test_quant
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC)) \
            $(foreach b,$(VEC_FALLBACK_BITS),$(patsubst %,$(BUILD)/tests/%_vec$(b),$(VEC_TESTS)))
# Link order is layer order, top first: each library uses only those after it (a program's
# own objects or, for a test, the experiments' helpers, then the harness, the engine, the CUDA
# and CPU kernels, the base).
LIBS      := $(LAB_LIB) $(ENGINE_LIB) $(CUDA_LIB) $(KERNEL_LIB) $(BASE_LIB)
TEST_LIBS := $(HELPER_LIB) $(LIBS)
LINK_LIBS = $(filter %.a,$^)

.PHONY: all deps test report experiments models compare fleet gpu-check fuzz clean distclean help FORCE
.SECONDARY:
.DEFAULT_GOAL := all

all: $(PROGRAMS)

help:
	@sed -n '1,10p' Makefile | sed 's/^# \{0,1\}//'

# --- dependencies ---------------------------------------------------------------------
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then echo "deps: all packages present"; \
	elif [ "$$(id -u)" != 0 ]; then \
	    echo "deps: missing packages; run:"; \
	    echo "  sudo apt-get update && sudo apt-get install -y" $$missing; exit 1; \
	else \
	    echo "deps: installing" $$missing; \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi
	@for p in $(PY_PACKAGES); do python3 -c "import $$p" 2>/dev/null && continue; \
	    if [ "$$(id -u)" != 0 ]; then echo "deps: missing Python package $$p; run: pip install $$p"; exit 1; fi; \
	    echo "deps: installing Python package $$p"; \
	    python3 -m pip install -q $$p 2>/dev/null || python3 -m pip install -q --break-system-packages $$p; done

# --- build ------------------------------------------------------------------------------
$(CONFIG_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(BUILD_CONFIG)' | cmp -s - $@ || echo '$(BUILD_CONFIG)' > $@

$(BUILD)/kernels/%.o: INC := $(KERNEL_INC)
$(BUILD)/kernels/base/%.o: INC := $(BASE_INC)
$(BUILD)/experiments/engine/%.o: INC := $(ENGINE_INC)
$(BUILD)/experiments/lab/%.o: INC := $(LAB_INC)
# a program: its own directory and the layers below (experiments/<name>.c: the layers alone)
$(BUILD)/experiments/%.o: INC := $(LAB_INC)
$(foreach d,$(PROGRAM_DIRS),$(eval $(BUILD)/experiments/$(d)/%.o: INC := $(LAB_INC) -Iexperiments/$(d)))
$(BUILD)/render/%.o: INC := $(RENDER_INC) $(RENDER_CFLAGS)
$(BUILD)/tests/test_render%.o: INC := $(INCLUDES) $(RENDER_CFLAGS)

$(BUILD)/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(or $(INC),$(INCLUDES)) -c $< -o $@

$(BUILD)/%.o: %.cu $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(INC) -c $< -o $@

$(BASE_LIB): $(call obj,$(BASE_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^
$(KERNEL_LIB): $(call obj,$(KERNEL_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^
$(ENGINE_LIB): $(call obj,$(ENGINE_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^
$(RENDER_LIB): $(call obj,$(RENDER_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^
$(BUILD)/libkernels_cuda.a: $(patsubst %.cu,$(BUILD)/%.o,$(CUDA_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

# The renderer reads CSV and templates only: it links the base, cairo and libharu, nothing else.
$(BIN)/render: $(BUILD)/render/main.o $(RENDER_LIB) $(BASE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $< $(LINK_LIBS) -o $@ $(RENDER_LIBS) -lm

$(LAB_LIB): $(call obj,$(LAB_SRC))
$(HELPER_LIB): $(call obj,$(HELPER_SRC)) $(patsubst %.cu,$(BUILD)/%.o,$(EXP_CUDA_SRC))
$(LAB_LIB) $(HELPER_LIB):
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

# A program is experiments/<name>.c, or experiments/<name>/main.c with the objects of its own
# directory: its helpers (*.c) and, with CUDA, its *.cu (nvcc), linked whole, ahead of the
# libraries. Static patterns, so an object left by a program that has since moved into its
# directory is never linked in its place.
FILE_PROGRAMS := $(patsubst experiments/%.c,$(BIN)/%,$(PROG_SRC))
DIR_PROGRAMS  := $(patsubst %,$(BIN)/%,$(PROGRAM_DIRS))
$(FILE_PROGRAMS): $(BIN)/%: $(BUILD)/experiments/%.o $(LIBS)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $< $(LINK_LIBS) -o $@ $(LDLIBS)
$(foreach d,$(PROGRAM_DIRS),$(eval $(BIN)/$(d): $(call obj,$(wildcard experiments/$(d)/*.c)) \
    $(patsubst %.cu,$(BUILD)/%.o,$(filter experiments/$(d)/%,$(EXP_CUDA_SRC)))))
$(DIR_PROGRAMS): $(BIN)/%: $(BUILD)/experiments/%/main.o $(LIBS)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $(filter %.o,$^) $(LINK_LIBS) -o $@ $(LDLIBS)

# --- tests ------------------------------------------------------------------------------
# Every tests/test_<module>.c is one cmocka binary; render tests also link the renderer.
$(BUILD)/tests/test_render%: $(BUILD)/tests/test_render%.o $(RENDER_LIB) $(TEST_LIBS)
	$(CC) $(LDFLAGS) $< $(LINK_LIBS) -o $@ $(RENDER_LIBS) $(LDLIBS) -lcmocka
$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_LIBS)
	$(CC) $(LDFLAGS) $< $(LINK_LIBS) -o $@ $(LDLIBS) -lcmocka
# A fallback test links the CPU kernels compiled with -DVEC_BITS=<b> ahead of the libraries,
# so they stand in for the archive's.
define vec_fallback
$(BUILD)/vec$(1)/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -DVEC_BITS=$(1) $$(KERNEL_INC) -c $$< -o $$@
$(BUILD)/tests/%_vec$(1): $(BUILD)/tests/%.o $(patsubst %.c,$(BUILD)/vec$(1)/%.o,$(KERNEL_SRC)) $(TEST_LIBS)
	$$(CC) $$(LDFLAGS) $$(filter %.o,$$^) $$(LINK_LIBS) -o $$@ $$(LDLIBS) -lcmocka
endef
$(foreach b,$(VEC_FALLBACK_BITS),$(eval $(call vec_fallback,$(b))))
# the fuzzers' kept inputs go to every parser, the renderer's too
$(BUILD)/tests/test_fuzz_regressions.o: INC := $(INCLUDES) $(RENDER_CFLAGS)
$(BUILD)/tests/test_fuzz_regressions: $(BUILD)/tests/test_fuzz_regressions.o $(RENDER_LIB) $(TEST_LIBS)
	$(CC) $(LDFLAGS) $< $(LINK_LIBS) -o $@ $(RENDER_LIBS) $(LDLIBS) -lcmocka

test: $(TESTS) $(PROGRAMS)
	@failed=""; for t in $(TESTS); do \
	    echo "== $$t"; INFERLAB_ROOT=$(CURDIR) INFERLAB_BIN=$(CURDIR)/$(BIN) \
	        INFERLAB_CUDA_EXPERIMENTS="$(CUDA_EXPERIMENTS)" $$t || failed="$$failed $${t##*/}"; done; \
	if [ -n "$$failed" ]; then echo "FAILED:$$failed"; exit 1; fi; echo "all test programs passed"

# --- the lab: models -> experiments -> report -------------------------------------------
# OUT is out/<hw slug> unless given; it is computed after the build, so `report` re-enters
# make. Each experiment is a step whose target is a CSV it writes; the step depends on its
# program, its inputs and the profile, so only stale steps run.
MODELS_DIR := out/models/$(PROFILE)
TARGET     := $(MODELS_DIR)/target.gguf
# the zoo's drafts for speculative decoding, small to large (bin/train --list)
DRAFTS     := $(patsubst %,$(MODELS_DIR)/%.gguf,draft-xs draft-s draft-m)
# the zoo's attention variants (role "attention"), trained alike, that bin/attention_variants compares
ATTN_VARIANTS := $(patsubst %,$(MODELS_DIR)/%.gguf,attn-mha attn-gqa attn-mqa attn-mla attn-gqa-cla)
empty      :=
comma      := ,
RUN        = $(BIN)/$(1) --profile $(PROFILE) --out $(OUT)

# Per experiment: the CSV that is its CPU step's target (one it writes last), its arguments
# beyond --profile and --out, the files it reads, and for a CUDA experiment the file where
# its GPU step says why it did not run (the .skip that the report section reads: see
# templates/README.md, "Not run").
sampling_CSV               = sampling_temperature.csv
sampling_ARGS              = --model $(TARGET)
sampling_INPUTS            = $(TARGET)
speculative_CSV            = speculative_runs.csv
speculative_ARGS           = --model $(TARGET) --drafts $(subst $(empty) $(empty),$(comma),$(DRAFTS))
speculative_INPUTS         = $(TARGET) $(DRAFTS)
kv_cache_CSV               = kv_cache_runs.csv
kv_cache_ARGS              = --model $(TARGET)
kv_cache_INPUTS            = $(TARGET)
kv_cache_CUDA_SKIP         = kv_cache_runs.cuda.skip
attention_variants_CSV     = attention_variants.csv
attention_variants_ARGS    = --models $(MODELS_DIR)
attention_variants_INPUTS  = $(ATTN_VARIANTS) templates/model_presets.csv
long_context_CSV           = long_context_cost.csv
long_context_ARGS          = --model $(TARGET) --all-needles
long_context_INPUTS        = $(TARGET)
attention_kernels_CSV      = attention_kernels.csv
attention_kernels_CUDA_SKIP = attention_kernels.cuda.skip
hardware_budget_CSV        = hardware_budget.csv
hardware_budget_ARGS       = --model $(TARGET)
hardware_budget_INPUTS     = $(TARGET) templates/hardware.csv templates/model_presets.csv
hardware_budget_CUDA_SKIP  = hardware_measured.cuda.skip
quantization_CSV           = quantization.csv
quantization_ARGS          = --model $(TARGET)
quantization_INPUTS        = $(TARGET)
serving_CSV                = serving_runs.csv
serving_ARGS               = --model $(TARGET)
serving_INPUTS             = $(TARGET) templates/hardware.csv templates/model_presets.csv

# On a machine with a GPU (the build has CUDA and `nvidia-smi -L` lists a device) the report
# also runs the CUDA experiments' --backend cuda variants into the same run directory: each is
# a step of its own, whose target is the stamp <name>.cuda.stamp, and re-runs only when stale.
# A GPU run adds its rows to the tables of both backends (same files, same columns, the
# backend a key column) and writes the tables derived from them (hardware_*_cuda.csv).
# Without a GPU none of this exists and `make report` is the CPU pipeline alone.
HAS_GPU    := $(if $(filter 1,$(CUDA)),$(shell nvidia-smi -L >/dev/null 2>&1 && echo 1))
REPORT_CSVS = $(foreach e,$(EXPERIMENTS),$(OUT)/$($(e)_CSV)) \
              $(if $(HAS_GPU),$(foreach e,$(CUDA_EXPERIMENTS),$(OUT)/$(e).cuda.stamp))
# A CUDA step that finds no usable device after all exits 2: that is "not run", not a failure.
# Its reason goes into the experiment's _CUDA_SKIP file, which the report prints in place of
# the GPU part, and the step has no stamp, so the next `make report` tries again.
RUN_CUDA   = rm -f $(OUT)/$($(1)_CUDA_SKIP); rc=0; $(call RUN,$(1)) --backend cuda $(2) || rc=$$?; \
             if [ $$rc -eq 2 ]; then echo "no usable CUDA device (see the make log)" > $(OUT)/$($(1)_CUDA_SKIP); \
             elif [ $$rc -ne 0 ]; then exit $$rc; else rm -f $@ && touch $@; fi

# The build runs under a lock (two `make report` at once never compile the same object), the
# run-directory steps as one transaction under OUT's lock (scripts/report_run.sh): a run
# killed at any moment leaves the previous run directory byte for byte, and two runs into one
# OUT take turns.
report: deps
	@mkdir -p $(BUILD) && flock $(BUILD)/.lock $(MAKE) --no-print-directory all
	@scripts/report_run.sh "$${OUT:-out/$$($(BIN)/hwinfo --slug)}" $(MAKE) --no-print-directory report-run

# Every experiment's step into OUT, without the PDF (the end-to-end test reruns them).
experiments:
	@test -n "$(OUT)" || { echo "usage: make experiments OUT=DIR [PROFILE=quick]"; exit 2; }
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory $(REPORT_CSVS)

models:
	@$(MAKE) --no-print-directory $(BIN)/train
	$(BIN)/train --profile $(PROFILE) --out $(MODELS_DIR)

ifneq ($(OUT),)
.PHONY: report-run
report-run: $(OUT)/report.pdf

# bin/train retrains only models whose key (config, corpus, code version) changed, and leaves
# up-to-date files untouched, so experiments re-run only when their model really changed.
$(MODELS_DIR)/%.gguf: $(BIN)/train FORCE
	$(BIN)/train --profile $(PROFILE) --out $(MODELS_DIR) --model $*

# Rewritten only when the profile differs from the last run's, so switching re-runs all.
# Every file of the run directory is replaced (temp + rename), never written in place: the
# stage of scripts/report_run.sh shares its files' inodes with the previous run's.
$(OUT)/profile.stamp: FORCE
	@mkdir -p $(OUT)
	@echo $(PROFILE) | cmp -s - $@ || { echo $(PROFILE) > $@.tmp.$$$$ && mv $@.tmp.$$$$ $@; }

# The steps of experiment $(1): on the CPU, and (for CUDA experiments) on the GPU.
define EXPERIMENT_STEPS
$(OUT)/$($(1)_CSV): $(BIN)/$(1) $($(1)_INPUTS) $(OUT)/profile.stamp
	$$(call RUN,$(1)) $($(1)_ARGS)
ifneq ($(filter $(1),$(CUDA_EXPERIMENTS)),)
$(OUT)/$(1).cuda.stamp: $(BIN)/$(1) $($(1)_INPUTS) $(OUT)/profile.stamp
	$$(call RUN_CUDA,$(1),$($(1)_ARGS))
endif
endef
$(foreach e,$(EXPERIMENTS),$(eval $(call EXPERIMENT_STEPS,$(e))))

# The Models section reads bin/train's records of the models the experiments used: the zoo
# table, passkey retrieval by depth and context, and the target's training log. Copied (via
# a temp file, so never half-written) once every model of the report is trained.
MODEL_LOGS := $(OUT)/zoo.csv $(OUT)/passkey.csv $(OUT)/train_log_target.csv
COPY_ATOMIC = cp $(1) $@.tmp.$$$$ && mv $@.tmp.$$$$ $@
$(OUT)/zoo.csv $(OUT)/passkey.csv: $(OUT)/%.csv: $(TARGET) $(DRAFTS) $(ATTN_VARIANTS)
	$(call COPY_ATOMIC,$(MODELS_DIR)/$*.csv)
$(OUT)/train_log_target.csv: $(TARGET)
	$(call COPY_ATOMIC,$(MODELS_DIR)/target.csv)

$(OUT)/report.pdf: $(REPORT_CSVS) $(MODEL_LOGS) $(BIN)/render $(wildcard templates/*.tmpl templates/*/*.tmpl)
	$(BIN)/render --out $@ $(OUT)
endif

# Overlay run directories: make compare A=out/<hw1> B=out/<hw2>, or RUNS="out/<hw1> out/<hw2> ..."
# (up to six; one that has no results is named as missing)
RUNS ?= $(A) $(B)
compare: $(BIN)/render
	@test $(words $(RUNS)) -ge 2 || { echo "usage: make compare A=out/<hw1> B=out/<hw2>  (or RUNS=\"DIR DIR ...\")"; exit 2; }
	$(BIN)/render --compare $(RUNS)

# The lab on every partition of a Slurm cluster, then one comparison (scripts/fleet, README):
#   make fleet PARTITIONS="cpu a100 h100" FLEET_DIR=/shared/inferlab [PROFILE=quick]
# FLEET_EXPERIMENTS="a b" runs only those experiments; FLEET_MAKE="CUDA=0" passes variables to
# the jobs' make; FLEET_ARRAY=N instead splits the needle sweep across an N-task job array.
fleet:
	@test -n "$(PARTITIONS)" -a -n "$(FLEET_DIR)" || { echo "usage: make fleet PARTITIONS=\"p1 p2 ...\" FLEET_DIR=DIR [PROFILE=quick]"; exit 2; }
	scripts/fleet --profile $(PROFILE) --experiments "$(FLEET_EXPERIMENTS)" --make "$(FLEET_MAKE)" \
	    $(if $(FLEET_ARRAY),--array $(FLEET_ARRAY)) $(FLEET_DIR) $(PARTITIONS)

# --- fuzzing ----------------------------------------------------------------------------
# One libFuzzer target per parser, tests/fuzz/fuzz_<name>.c, built with clang in build-fuzz/
# (ASan + UBSan + libFuzzer; OpenMP pragmas off, so one thread; libgomp only for omp_* calls). `make fuzz FUZZ_SECONDS=N` runs each for N
# seconds on a seed corpus of real files and of build-fuzz/make_seeds' tiny valid ones
# (scripts/fuzz.sh). What a run finds goes to build-fuzz/artifacts/<name>/; once fixed, the
# input is kept in tests/fixtures/fuzz/<name>/, which test_fuzz_regressions feeds to the normal build.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD   := build-fuzz
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -O1 -g -march=$(MARCH) -fno-omit-frame-pointer -Wno-unknown-pragmas \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                -I/usr/include/$(MULTIARCH)/openblas-openmp $(INCLUDES) $(RENDER_CFLAGS)
FUZZ_LIB     := $(FUZZ_BUILD)/libfuzzed.a
$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_LIB): $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(BASE_SRC) $(KERNEL_SRC) $(ENGINE_SRC) $(RENDER_SRC))
	rm -f $@ && $(AR) rcs $@ $^
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_input.h $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_LIB) -o $@ $(LDLIBS) $(RENDER_LIBS) -lgomp
fuzz: $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_NAMES)) $(BUILD)/tests/fuzz/make_seeds
	scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(BUILD)/tests/fuzz/make_seeds $(FUZZ_NAMES)

# On a machine with an NVIDIA GPU: build, run the CUDA tests and the CUDA measurements,
# and print a summary table last (`make report` there runs the CUDA experiments as well).
gpu-check:
	scripts/gpu_check.sh out/gpu-check

clean:
	rm -rf build build-san build-fuzz $(BIN)
distclean: clean
	rm -rf out

# The dependency files of today's sources only: one left by a source that has since moved or
# gone would name that source as a prerequisite and stop the build.
ALL_SRC := $(BASE_SRC) $(KERNEL_SRC) $(ENGINE_SRC) $(LAB_SRC) $(HELPER_SRC) $(RENDER_SRC) render/main.c \
           $(PROG_SRC) $(wildcard experiments/*/main.c) $(TEST_SRC)
-include $(wildcard $(patsubst %.c,$(BUILD)/%.d,$(ALL_SRC)) $(patsubst %.cu,$(BUILD)/%.d,$(CUDA_SRC) $(EXP_CUDA_SRC)) \
                    $(foreach b,$(VEC_FALLBACK_BITS),$(patsubst %.c,$(BUILD)/vec$(b)/%.d,$(KERNEL_SRC))))
