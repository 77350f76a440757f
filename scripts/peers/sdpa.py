#!/usr/bin/env python3
# sdpa.py: PyTorch's scaled_dot_product_attention on the CPU at the shapes bin/attention_kernels
# measures (fp32, B = 1, H = 4, D = 64), the peer of our flash kernel. Not in CI:
#   pip install torch && python3 scripts/peers/sdpa.py --threads 2 [--t 1024 4096 16384]
# Prints one CSV row per (T, causal): median ms over --reps runs after one warm-up, and GFLOP/s
# counted as bin/attention_kernels counts them (4 T^2 D per head, half of it under a mask).
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--t", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    print("peer,torch,threads,seq_len,causal,ms,gflop_s")
    for T in a.t:
        q, k, v = (torch.randn(1, a.heads, T, a.dim) for _ in range(3))
        for causal in (False, True):
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                times = []
                for _ in range(a.reps):
                    t0 = time.perf_counter()
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    times.append(time.perf_counter() - t0)
            ms = 1e3 * statistics.median(times)
            flops = 4.0 * T * T * a.dim * a.heads * (0.5 if causal else 1.0)
            print(f"sdpa,{torch.__version__},{a.threads},{T},{int(causal)},{ms:.3f},{flops / ms / 1e6:.1f}")


if __name__ == "__main__":
    main()
