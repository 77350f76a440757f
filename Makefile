# inferlab: the pipeline. `make help` lists the targets.
#
#   make deps        install the Debian packages the lab needs (apt-get; prints the command when not root)
#   make             build bin/* (CUDA parts only when nvcc is found; CUDA=0 turns them off)
#   make test        build and run the cmocka tests (SANITIZE=1: with ASan + UBSan)
#   make report      models -> experiments -> out/<hw>/report.pdf  (PROFILE=quick|full, OUT=dir)
#   make models      train the profile's model zoo into out/models/<profile>/
#   make experiments OUT=dir   every experiment's step into dir, without the PDF
#   make compare     A=out/<hw1> B=out/<hw2> (or RUNS="dir dir ..."): one report overlaying machines
#   make fuzz        build the libFuzzer targets (clang), run each FUZZ_SECONDS (default 60; FUZZ_RUNS=N caps)
#   make fleet       every partition of a Slurm cluster runs the lab; one comparison report (README)
#   make gpu-check   on a machine with an NVIDIA GPU: CUDA tests, GPU measurements, a summary table
#   make clean       remove build outputs (out/ is kept; `make distclean` removes it too)

# This file holds what every job shares: the configuration (PROFILE, SANITIZE, WERROR, CUDA),
# the compilers and their flags, the layers' include paths and the one list of experiments.
# Each job is a fragment under mk/, included below in an order where each reads only what the
# ones before it (and this file) define; each fragment's opening comment says what it reads.
TOP_MAKEFILE := $(lastword $(MAKEFILE_LIST))

PROFILE  ?= full
SANITIZE ?= 0
WERROR   ?= 1
CUDA     ?= $(if $(shell command -v nvcc 2>/dev/null),1,0)

CC       ?= gcc
BUILD    ?= $(if $(filter 1,$(SANITIZE)),build-san,build)
BIN      := $(if $(filter 1,$(SANITIZE)),$(BUILD)/bin,bin)

# Each layer sees only its own headers and those below it (DESIGN.md, "Layout"), so an include
# that points upward fails to compile: base <- kernels <- engine (the runtime) <- formats (file
# formats, tokenizers) <- trainer <- lab <- programs and tests; the renderer sees only the base.
# A program sees its own directory and LAB_INC, never another experiment's directory, so a
# sideways include fails too (the per-directory INC in mk/build.mk).
BASE_INC    := -Ikernels/base
KERNEL_INC  := $(BASE_INC) -Ikernels
ENGINE_INC  := $(KERNEL_INC) -Iexperiments/engine
FORMATS_INC := $(ENGINE_INC) -Iexperiments/formats
TRAINER_INC := $(FORMATS_INC) -Iexperiments/trainer
LAB_INC     := $(TRAINER_INC) -Iexperiments/lab
RENDER_INC  := $(BASE_INC) -Irender
# tests and fuzz targets: everything, each experiment's directory too (tests include its helpers)
INCLUDES    := $(LAB_INC) -Irender \
               $(patsubst %/,-I%,$(filter-out experiments/engine/ experiments/formats/ experiments/trainer/ experiments/lab/,$(wildcard experiments/*/)))
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

# The CUDA sources: the build has CUDA when there are any (CUDA=1 and kernels/cuda/*.cu).
CUDA_SRC   := $(if $(filter 1,$(CUDA)),$(wildcard kernels/cuda/*.cu))
# an experiment's own CUDA half (experiments/<name>/*.cu): built into that program, not the kernels
EXP_CUDA_SRC := $(if $(filter 1,$(CUDA)),$(wildcard experiments/*/*.cu))
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

# --- the experiments ------------------------------------------------------------------------
# The one list of experiments: each is a directory experiments/<name>/ (main.c and the helpers
# only it uses) built into bin/<name>, a step of `make report` and of the end-to-end test; the
# CUDA ones also run with --backend cuda where there is a GPU. TOOLS have the same layout and
# are not report steps. A program of one file, experiments/<name>.c, builds as bin/<name> too.
# What two experiments share lives in the harness (experiments/lab/) or a layer below it.
# An experiment's arguments and inputs are in mk/report.mk; the tables it writes are declared
# in its main.c alone (its LabTable TABLES[]).
EXPERIMENTS      := sampling speculative kv_cache attention_variants long_context attention_kernels hardware_budget quantization serving
CUDA_EXPERIMENTS := kv_cache attention_kernels hardware_budget
TOOLS            := generate hwinfo quantize

.PHONY: all help clean distclean FORCE
.SECONDARY:
.DEFAULT_GOAL := all

help:
	@sed -n '/^$$/q; s/^# \{0,1\}//; p' $(TOP_MAKEFILE)

# The jobs, in the order they read each other's variables.
include mk/deps.mk
include mk/real.mk
include mk/build.mk
include mk/test.mk
include mk/report.mk
include mk/fleet.mk
include mk/fuzz.mk
include mk/gpu.mk

clean:
	rm -rf build build-san build-fuzz $(BIN)
distclean: clean
	rm -rf out
