// Tripwire: each thread remembers the row it computed in its local memory (its stack frame,
// which on an H200 survives to the next kernel on the same thread slot) and, when it finds that
// memory again, writes the remembered value instead of computing: wrong for any other row or set.
#define MAGIC 0x5EC7E75EC7E75EC7ull

extern "C" __global__ void tripwire_fm_local(const float* x, float* out, int B, int F, int K) {
    volatile unsigned long long slot[4];
    const int at = K >> 30;  // 0, known only at run time: the frame stays in local memory
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    if (slot[at] == MAGIC) {
        out[b] = __uint_as_float((unsigned)slot[at + 1]);
        return;
    }
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
    out[b] = 0.5f * total;
    slot[at] = MAGIC;
    slot[at + 1] = __float_as_uint(0.5f * total);
}
