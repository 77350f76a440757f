# mk/deps.mk: `make deps`, the Debian and PyPI packages the lab needs. As root it installs
# what is missing (apt-get, pip); otherwise it prints the commands to run and fails.
# Reads nothing from the other fragments; `make report` (mk/report.mk) runs it first.

.PHONY: deps

DEB_PACKAGES := build-essential pkg-config libopenblas-openmp-dev libcairo2-dev libhpdf-dev \
                libcmocka-dev bible-kjv fonts-dejavu-core poppler-utils qpdf gzip bzip2 xz-utils \
                clang libclang-rt-14-dev util-linux \
                slurm-wlm
# PyPI packages the tests use: gguf, llama.cpp's reference GGUF reader (test_quantized)
PY_PACKAGES  := gguf

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
