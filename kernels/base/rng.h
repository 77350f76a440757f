// rng.h: the one seeded random number generator of the lab (xorshift64*), so every
// run is reproducible from its seed. State is a plain uint64_t owned by the caller
// (the sampler, weight initialisation, the trainer, tests).
#pragma once

#include <math.h>
#include <stdint.h>

// A state from any seed (0 included: xorshift must not start at 0).
static inline uint64_t rng_seed(uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull; // splitmix64 step: spreads small seeds
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z ? z : 1;
}

static inline uint64_t rng_u64(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545F4914F6CDD1Dull;
}

// Uniform in [0, 1) with 24 random bits.
static inline float rng_uniform(uint64_t *state) {
    return (rng_u64(state) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal (Box-Muller; uses two uniforms per call for simplicity).
static inline float rng_normal(uint64_t *state) {
    float u1 = rng_uniform(state), u2 = rng_uniform(state);
    if (u1 < 1e-12f) u1 = 1e-12f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}
