# mk/fuzz.mk: `make fuzz`, one libFuzzer target per parser, tests/fuzz/fuzz_<name>.c, built
# with clang in build-fuzz/ and run for FUZZ_SECONDS each (FUZZ_RUNS=M stops each after M
# executions) by scripts/fuzz.sh, which fails on anything a target finds.
# Reads from the Makefile: MARCH, MULTIARCH, INCLUDES, RENDER_CFLAGS, RENDER_LIBS, LDLIBS,
# BUILD; from mk/build.mk: BASE_SRC, KERNEL_SRC, ENGINE_SRC, FORMATS_SRC, TRAINER_SRC,
# RENDER_SRC; from mk/test.mk: the pattern that links $(BUILD)/tests/fuzz/make_seeds (the seed
# writer, linked like a test).

.PHONY: fuzz

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
$(FUZZ_LIB): $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(BASE_SRC) $(KERNEL_SRC) $(ENGINE_SRC) $(FORMATS_SRC) $(TRAINER_SRC) $(RENDER_SRC))
	rm -f $@ && $(AR) rcs $@ $^
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_input.h $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_LIB) -o $@ $(LDLIBS) $(RENDER_LIBS) -lgomp
fuzz: $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_NAMES)) $(BUILD)/tests/fuzz/make_seeds
	scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(BUILD)/tests/fuzz/make_seeds $(FUZZ_NAMES)
