# mk/build.mk: `make` (all), every program bin/<name> and the libraries under $(BUILD): one
# archive per layer (base, kernels, CUDA kernels, engine, formats, trainer, harness), the renderer's, and the
# experiments' helpers that the tests link. Objects rebuild when their sources, headers (the
# compiler's .d files) or the build's configuration change.
# Reads from the Makefile: BUILD, BIN, CC, CFLAGS, LDFLAGS, LDLIBS, the *_INC include paths
# and INCLUDES, RENDER_CFLAGS, RENDER_LIBS, CUDA_SRC, EXP_CUDA_SRC, NVCC, NVCCFLAGS,
# EXPERIMENTS, TOOLS, FORCE.
# Defines for the others: the source lists (*_SRC, TEST_SRC too), the libraries (*_LIB, LIBS,
# TEST_LIBS, LINK_LIBS), PROGRAMS, CONFIG_STAMP, `obj`, the `all` target, and the pattern that
# compiles every object, tests' included.

# --- sources ---------------------------------------------------------------------------
BASE_SRC   := $(wildcard kernels/base/*.c)
KERNEL_SRC := $(wildcard kernels/*.c kernels/cpu/*.c)
ENGINE_SRC := $(wildcard experiments/engine/*.c)
FORMATS_SRC := $(wildcard experiments/formats/*.c)
TRAINER_SRC := $(wildcard experiments/trainer/*.c)
RENDER_SRC := $(filter-out render/main.c,$(wildcard render/*.c))
PROG_SRC   := $(wildcard experiments/*.c)
TEST_SRC   := $(wildcard tests/test_*.c)
LAB_SRC    := $(wildcard experiments/lab/*.c)
# the directories that build a program: experiments/<name>/main.c
PROGRAM_DIRS := $(patsubst experiments/%/main.c,%,$(wildcard experiments/*/main.c))
HELPER_SRC := $(filter-out %/main.c,$(wildcard $(patsubst %,experiments/%/*.c,$(EXPERIMENTS) $(TOOLS))))

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
BASE_LIB   := $(BUILD)/libbase.a
KERNEL_LIB := $(BUILD)/libkernels.a
ENGINE_LIB := $(BUILD)/libengine.a
FORMATS_LIB := $(BUILD)/libformats.a
TRAINER_LIB := $(BUILD)/libtrainer.a
RENDER_LIB := $(BUILD)/librender.a
CUDA_LIB   := $(if $(CUDA_SRC),$(BUILD)/libkernels_cuda.a)
LAB_LIB    := $(BUILD)/liblab.a
# every experiment's helpers (and, with CUDA, their .cu objects), for the tests alone: a
# program links only its own directory's objects
HELPER_LIB := $(BUILD)/libhelpers.a

PROGRAMS := $(patsubst %,$(BIN)/%,$(EXPERIMENTS) $(TOOLS)) $(patsubst experiments/%.c,$(BIN)/%,$(PROG_SRC)) \
            $(if $(wildcard render/main.c),$(BIN)/render)
# bin/corpus (experiments/corpus/): the validation text as a file, for the real-model fixtures (mk/real.mk)
PROGRAMS += $(BIN)/corpus
# bin/real_models (experiments/real_models/): the real models against llama.cpp, a report step of its own (mk/report.mk)
PROGRAMS += $(BIN)/real_models
# bin/bench (experiments/bench/): llama-bench's command line and output on the engine, not a report step
PROGRAMS += $(BIN)/bench
# Link order is layer order, top first: each library uses only those after it (a program's
# own objects or, for a test, the experiments' helpers, then the harness, the trainer, the
# formats, the engine, the CUDA and CPU kernels, the base).
LIBS      := $(LAB_LIB) $(TRAINER_LIB) $(FORMATS_LIB) $(ENGINE_LIB) $(CUDA_LIB) $(KERNEL_LIB) $(BASE_LIB)
TEST_LIBS := $(HELPER_LIB) $(LIBS)
LINK_LIBS = $(filter %.a,$^)

# meta.csv records the flags the lab was built with
HW_CFLAGS := $(filter-out -I% -M% -MP,$(CFLAGS))

# The build remembers its configuration: when the compilers, their flags or the libraries
# differ from the last build's (CUDA=0/1, SANITIZE, WERROR, CC...), every object rebuilds.
BUILD_CONFIG := $(CC) $(CFLAGS) | $(NVCC) $(NVCCFLAGS) | $(LDFLAGS) $(LDLIBS) $(RENDER_LIBS)
CONFIG_STAMP := $(BUILD)/config.stamp
$(BUILD)/experiments/lab/hw.o: CFLAGS += -DINFERLAB_CFLAGS='"$(HW_CFLAGS)"'

all: $(PROGRAMS)

$(CONFIG_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(BUILD_CONFIG)' | cmp -s - $@ || echo '$(BUILD_CONFIG)' > $@

# --- objects: each layer with its own include path --------------------------------------
$(BUILD)/kernels/%.o: INC := $(KERNEL_INC)
$(BUILD)/kernels/base/%.o: INC := $(BASE_INC)
$(BUILD)/experiments/engine/%.o: INC := $(ENGINE_INC)
$(BUILD)/experiments/formats/%.o: INC := $(FORMATS_INC)
$(BUILD)/experiments/trainer/%.o: INC := $(TRAINER_INC)
$(BUILD)/experiments/lab/%.o: INC := $(LAB_INC)
# a program: its own directory and the layers below (experiments/<name>.c: the layers alone)
$(BUILD)/experiments/%.o: INC := $(LAB_INC)
$(foreach d,$(PROGRAM_DIRS),$(eval $(BUILD)/experiments/$(d)/%.o: INC := $(LAB_INC) -Iexperiments/$(d)))
$(BUILD)/render/%.o: INC := $(RENDER_INC) $(RENDER_CFLAGS)

$(BUILD)/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(or $(INC),$(INCLUDES)) -c $< -o $@

$(BUILD)/%.o: %.cu $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(INC) -c $< -o $@

# --- libraries --------------------------------------------------------------------------
# Each archive is its objects (listed per library), made by the one recipe below.
$(BASE_LIB): $(call obj,$(BASE_SRC))
$(KERNEL_LIB): $(call obj,$(KERNEL_SRC))
$(ENGINE_LIB): $(call obj,$(ENGINE_SRC))
$(FORMATS_LIB): $(call obj,$(FORMATS_SRC))
$(TRAINER_LIB): $(call obj,$(TRAINER_SRC))
$(RENDER_LIB): $(call obj,$(RENDER_SRC))
$(BUILD)/libkernels_cuda.a: $(patsubst %.cu,$(BUILD)/%.o,$(CUDA_SRC))
$(LAB_LIB): $(call obj,$(LAB_SRC))
$(HELPER_LIB): $(call obj,$(HELPER_SRC)) $(patsubst %.cu,$(BUILD)/%.o,$(EXP_CUDA_SRC))
$(BASE_LIB) $(KERNEL_LIB) $(ENGINE_LIB) $(FORMATS_LIB) $(TRAINER_LIB) $(RENDER_LIB) $(BUILD)/libkernels_cuda.a \
$(LAB_LIB) $(HELPER_LIB):
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

# --- programs ---------------------------------------------------------------------------
# The renderer reads CSV and templates only: it links the base, cairo and libharu, nothing else.
$(BIN)/render: $(BUILD)/render/main.o $(RENDER_LIB) $(BASE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) $< $(LINK_LIBS) -o $@ $(RENDER_LIBS) -lm

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

# The dependency files of today's sources only: one left by a source that has since moved or
# gone would name that source as a prerequisite and stop the build. (The kernels built at
# narrower vectors for the tests have theirs included by mk/test.mk.)
ALL_SRC := $(BASE_SRC) $(KERNEL_SRC) $(ENGINE_SRC) $(FORMATS_SRC) $(TRAINER_SRC) $(LAB_SRC) $(HELPER_SRC) $(RENDER_SRC) render/main.c \
           $(PROG_SRC) $(wildcard experiments/*/main.c) $(TEST_SRC)
-include $(wildcard $(patsubst %.c,$(BUILD)/%.d,$(ALL_SRC)) $(patsubst %.cu,$(BUILD)/%.d,$(CUDA_SRC) $(EXP_CUDA_SRC)))
