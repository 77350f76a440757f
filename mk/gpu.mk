# mk/gpu.mk: `make gpu-check`, the one thing to run on a machine with an NVIDIA GPU:
# scripts/gpu_check.sh builds with CUDA=1, runs the CUDA tests and the GPU measurements into
# out/gpu-check, and prints a summary table last (exit 2: no GPU or no nvcc).
# Reads nothing from the other fragments (the script runs its own make). On such a machine
# `make report` runs the CUDA experiments as well (mk/report.mk, HAS_GPU).

.PHONY: gpu-check

# On a machine with an NVIDIA GPU: build, run the CUDA tests and the CUDA measurements,
# and print a summary table last (`make report` there runs the CUDA experiments as well).
gpu-check:
	scripts/gpu_check.sh out/gpu-check
