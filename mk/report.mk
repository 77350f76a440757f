# mk/report.mk: the lab itself, models -> experiments -> report: `make report` (the build, then
# the run directory's steps as one transaction: scripts/report_run.sh), `make experiments
# OUT=dir` (the steps without the PDF), `make models`, and `make compare` (run directories
# overlaid in one PDF). Each experiment is a step whose target is the manifest its program
# writes last (experiments/lab/lab.h, "manifest"), re-run only when its program, its inputs
# or the profile changed.
# Reads from the Makefile: PROFILE, BUILD, BIN, CUDA, EXPERIMENTS, CUDA_EXPERIMENTS, FORCE;
# from mk/build.mk: the `all` target and the programs $(BIN)/*; from mk/deps.mk: `deps`; from
# mk/real.mk: REAL_DIR, REAL_MODELS, KJV_VALID (the real_models step); from
# the command line: OUT (the run directory: report_run.sh's stage inside `make report`),
# MODELS_DIR (scripts/fleet, tests/test_interrupt.c), A, B, RUNS.
# Defines for the others: MODELS_DIR, TARGET, REPORT_STEPS, HAS_GPU.

.PHONY: report experiments models compare

# --- the lab: models -> experiments -> report -------------------------------------------
# OUT is out/<hw slug> unless given; it is computed after the build, so `report` re-enters
# make. Each experiment is a step whose target is the manifest its run writes; the step
# depends on its program, its inputs and the profile, so only stale steps run.
MODELS_DIR := out/models/$(PROFILE)
TARGET     := $(MODELS_DIR)/target.gguf
# the zoo's drafts for speculative decoding, small to large (bin/train --list)
DRAFTS     := $(patsubst %,$(MODELS_DIR)/%.gguf,draft-xs draft-s draft-m)
# the zoo's attention variants (role "attention"), trained alike, that bin/attention_variants compares
ATTN_VARIANTS := $(patsubst %,$(MODELS_DIR)/%.gguf,attn-mha attn-gqa attn-mqa attn-mla attn-gqa-cla)
empty      :=
comma      := ,
RUN        = $(BIN)/$(1) --profile $(PROFILE) --out $(OUT)

# Per experiment: its arguments beyond --profile and --out, the files it reads, and for a
# CUDA experiment the file where its GPU step says why it did not run (the .skip that the
# report section reads: see templates/README.md, "Not run"). Which tables it writes is said
# once, in its main.c (TABLES); the harness lists what a run wrote in the step's manifest.
SMOLLM2                   := $(REAL_DIR)/smollm2-135m-instruct-q4_1.gguf
GEMMA3                    := $(REAL_DIR)/gemma-3-270m-q4_k_m.gguf
sampling_ARGS              = --model $(TARGET) --real-model $(SMOLLM2)
sampling_INPUTS            = $(TARGET) $(SMOLLM2)
speculative_ARGS           = --model $(TARGET) --drafts $(subst $(empty) $(empty),$(comma),$(DRAFTS))
speculative_INPUTS         = $(TARGET) $(DRAFTS)
kv_cache_ARGS              = --model $(TARGET) --real-model $(SMOLLM2),$(GEMMA3)
kv_cache_INPUTS            = $(TARGET) $(SMOLLM2) $(GEMMA3)
kv_cache_CUDA_SKIP         = kv_cache_runs.cuda.skip
attention_variants_ARGS    = --models $(MODELS_DIR) --real-model $(SMOLLM2),$(GEMMA3)
attention_variants_INPUTS  = $(ATTN_VARIANTS) templates/model_presets.csv $(SMOLLM2) $(GEMMA3)
long_context_ARGS          = --model $(TARGET) --all-needles --real-model $(GEMMA3)
long_context_INPUTS        = $(TARGET) $(GEMMA3)
attention_kernels_CUDA_SKIP = attention_kernels.cuda.skip
hardware_budget_ARGS       = --model $(TARGET) --real-model $(SMOLLM2),$(GEMMA3)
hardware_budget_INPUTS     = $(TARGET) templates/hardware.csv templates/model_presets.csv $(SMOLLM2) $(GEMMA3)
hardware_budget_CUDA_SKIP  = hardware_measured.cuda.skip
quantization_ARGS          = --model $(TARGET) --real-model $(SMOLLM2),$(GEMMA3)
quantization_INPUTS        = $(TARGET) $(SMOLLM2) $(GEMMA3)
serving_ARGS               = --model $(TARGET) --real-model $(SMOLLM2)
serving_INPUTS             = $(TARGET) $(SMOLLM2) templates/hardware.csv templates/model_presets.csv
# The real published models (mk/real.mk), held to llama.cpp's outputs recorded in
# tests/fixtures/real: a step of their own beside the Makefile's EXPERIMENTS (bin/real_models).
real_models_ARGS           = --models $(REAL_DIR) --text $(KJV_VALID)
real_models_INPUTS         = $(REAL_MODELS) $(KJV_VALID) $(wildcard tests/fixtures/real/*/greedy.txt \
                             tests/fixtures/real/*/perplexity.txt tests/fixtures/real/llama_bench_*.csv)

# A step's target is the manifest the harness writes after every table and meta.csv of a
# successful run, by temp + rename: <name>.done for the CPU run, <name>.cuda.done for the
# --backend cuda one (lab_manifest_path in experiments/lab/lab.h). A run that fails or is
# killed leaves no manifest (the harness removes the old one as it starts), so the step
# stays stale. Shard runs and their merge (scripts/fleet's job array) write none.
STEP      = $(OUT)/$(1).done
CUDA_STEP = $(OUT)/$(1).cuda.done

# On a machine with a GPU (the build has CUDA and `nvidia-smi -L` lists a device) the report
# also runs the CUDA experiments' --backend cuda variants into the same run directory: each is
# a step of its own, whose target is its manifest <name>.cuda.done, and re-runs only when stale.
# A GPU run adds its rows to the tables of both backends (same files, same columns, the
# backend a key column) and writes the tables derived from them (hardware_*_cuda.csv).
# Without a GPU none of this exists and `make report` is the CPU pipeline alone.
HAS_GPU      := $(if $(filter 1,$(CUDA)),$(shell nvidia-smi -L >/dev/null 2>&1 && echo 1))
REPORT_STEPS  = $(foreach e,$(EXPERIMENTS),$(call STEP,$(e))) \
                $(if $(HAS_GPU),$(foreach e,$(CUDA_EXPERIMENTS),$(call CUDA_STEP,$(e))))
REPORT_STEPS += $(call STEP,real_models)
# A CUDA step that finds no usable device after all exits 2: that is "not run", not a failure.
# Its reason goes into the experiment's _CUDA_SKIP file, which the report prints in place of
# the GPU part, and the run wrote no manifest, so the next `make report` tries again.
RUN_CUDA   = rm -f $(OUT)/$($(1)_CUDA_SKIP); rc=0; $(call RUN,$(1)) --backend cuda $(2) || rc=$$?; \
             if [ $$rc -eq 2 ]; then echo "no usable CUDA device (see the make log)" > $(OUT)/$($(1)_CUDA_SKIP); \
             elif [ $$rc -ne 0 ]; then exit $$rc; fi

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
	@$(MAKE) --no-print-directory $(REPORT_STEPS)

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
$(call STEP,$(1)): $(BIN)/$(1) $($(1)_INPUTS) $(OUT)/profile.stamp
	$$(call RUN,$(1)) $($(1)_ARGS)
ifneq ($(filter $(1),$(CUDA_EXPERIMENTS)),)
$(call CUDA_STEP,$(1)): $(BIN)/$(1) $($(1)_INPUTS) $(OUT)/profile.stamp
	$$(call RUN_CUDA,$(1),$($(1)_ARGS))
endif
endef
$(foreach e,$(EXPERIMENTS) real_models,$(eval $(call EXPERIMENT_STEPS,$(e))))

# The Models section reads bin/train's records of the models the experiments used: the zoo
# table, passkey retrieval by depth and context, and the target's training log. Copied (via
# a temp file, so never half-written) once every model of the report is trained.
MODEL_LOGS := $(OUT)/zoo.csv $(OUT)/passkey.csv $(OUT)/train_log_target.csv
COPY_ATOMIC = cp $(1) $@.tmp.$$$$ && mv $@.tmp.$$$$ $@
$(OUT)/zoo.csv $(OUT)/passkey.csv: $(OUT)/%.csv: $(TARGET) $(DRAFTS) $(ATTN_VARIANTS)
	$(call COPY_ATOMIC,$(MODELS_DIR)/$*.csv)
$(OUT)/train_log_target.csv: $(TARGET)
	$(call COPY_ATOMIC,$(MODELS_DIR)/target.csv)

$(OUT)/report.pdf: $(REPORT_STEPS) $(MODEL_LOGS) $(BIN)/render $(wildcard templates/*.tmpl templates/*/*.tmpl)
	$(BIN)/render --out $@ $(OUT)
endif

# Overlay run directories: make compare A=out/<hw1> B=out/<hw2>, or RUNS="out/<hw1> out/<hw2> ..."
# (up to six; one that has no results is named as missing). The renderer reads the CSVs the
# templates name and, for the summary, every *.csv but meta.csv: never a step's manifest.
RUNS ?= $(A) $(B)
compare: $(BIN)/render
	@test $(words $(RUNS)) -ge 2 || { echo "usage: make compare A=out/<hw1> B=out/<hw2>  (or RUNS=\"DIR DIR ...\")"; exit 2; }
	$(BIN)/render --compare $(RUNS)
