# mk/test.mk: `make test`, the cmocka test programs $(BUILD)/tests/test_<module> (one per
# tests/test_<module>.c, the end-to-end test included), the vector-width fallback builds of the
# kernels' tests, and the run of them all (SANITIZE=1: the ASan + UBSan build, in build-san/).
# Reads from the Makefile: BUILD, BIN, CC, CFLAGS, LDFLAGS, LDLIBS, KERNEL_INC, INCLUDES,
# RENDER_CFLAGS, RENDER_LIBS, CUDA_EXPERIMENTS; from mk/build.mk: TEST_SRC, KERNEL_SRC,
# CONFIG_STAMP, RENDER_LIB, TEST_LIBS, LINK_LIBS, PROGRAMS.
# Defines for the others: TESTS, VEC_FALLBACK_BITS.

.PHONY: test

# The tests of the vectorised CPU kernels also run on the kernels built at narrower vectors
# than the machine's (kernels/cpu/vec.h's VEC_BITS): 256-bit and scalar, so the fallbacks
# stay tested on an AVX-512 machine.
VEC_FALLBACK_BITS := 256 32
VEC_TESTS         := test_attention_full test_kernels test_quant test_ggml_quants
# Under SANITIZE=1 two tests do not run: their subject is the shell around the programs (Slurm's
# orchestration in test_fleet, kill-safety in test_interrupt), and every C path they reach is run
# sanitized by test_e2e and the unit tests (the shard merge by test_cli, the comparison report by
# test_render_report). Sanitized they took 879 s and 366 s (Intel Xeon, 2 cores): with them the CI
# run no longer fit its 90 minutes. The plain `make test` runs both.
SANITIZE_SKIPS := $(if $(filter 1,$(SANITIZE)),test_fleet test_interrupt)
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(filter-out $(patsubst %,tests/%.c,$(SANITIZE_SKIPS)),$(TEST_SRC))) \
            $(foreach b,$(VEC_FALLBACK_BITS),$(patsubst %,$(BUILD)/tests/%_vec$(b),$(VEC_TESTS)))

$(BUILD)/tests/test_render%.o: INC := $(INCLUDES) $(RENDER_CFLAGS)

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

# The end-to-end tests run the programs of this build (INFERLAB_BIN) from the repository root,
# and test_e2e checks that every CUDA experiment without a device says "not run". The real
# models and the KJV validation text (mk/real.mk) are inputs of test_real_models and others.
test: $(TESTS) $(PROGRAMS) $(REAL_MODELS) $(KJV_VALID)
	@failed=""; for t in $(TESTS); do \
	    echo "== $$t"; started=$$(date +%s); INFERLAB_ROOT=$(CURDIR) INFERLAB_BIN=$(CURDIR)/$(BIN) \
	        INFERLAB_CUDA_EXPERIMENTS="$(CUDA_EXPERIMENTS)" $$t || failed="$$failed $${t##*/}"; \
	    echo "== $${t##*/}: $$(( $$(date +%s) - started )) s"; done; \
	if [ -n "$$failed" ]; then echo "FAILED:$$failed"; exit 1; fi; echo "all test programs passed"

# the dependency files of the kernels built at narrower vectors (see mk/build.mk)
-include $(wildcard $(foreach b,$(VEC_FALLBACK_BITS),$(patsubst %.c,$(BUILD)/vec$(b)/%.d,$(KERNEL_SRC))))
