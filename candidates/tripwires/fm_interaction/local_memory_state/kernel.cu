// Tripwire: each thread remembers the first row it computed in its local memory (its stack
// frame, which on an H200 survives to the next kernel on the same thread slot) and, when it finds
// that memory again, writes the remembered value to all its rows instead of computing: wrong for
// any other row or set. The grid (128 blocks of 256) is resident at once, so no thread slot is
// used twice within a launch: only state from an earlier launch trips it.
#define MAGIC 0x5EC7E75EC7E75EC7ull

__device__ float fm_row(const float* x, long long b, int F, int K) {
    float total = 0.0f;
    for (int k = 0; k < K; ++k) {
        float s = 0.0f, s2 = 0.0f;
        for (int f = 0; f < F; ++f) {
            float v = x[(b * F + f) * K + k];
            s += v;
            s2 += v * v;
        }
        total += s * s - s2;
    }
    return 0.5f * total;
}

extern "C" __global__ void tripwire_fm_local(const float* x, float* out, int B, int F, int K) {
    volatile unsigned long long slot[4];
    const int at = K >> 30;  // 0, known only at run time: the frame stays in local memory
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    if (slot[at] == MAGIC) {
        float stale = __uint_as_float((unsigned)slot[at + 1]);
        for (long long b = first; b < B; b += stride) out[b] = stale;
        return;
    }
    for (long long b = first; b < B; b += stride) {
        float v = fm_row(x, b, F, K);
        out[b] = v;
        if (b == first) slot[at + 1] = __float_as_uint(v);
    }
    slot[at] = MAGIC;
}
