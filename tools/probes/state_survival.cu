// Does a kernel's local or shared memory survive to its next launch, with other kernels in
// between (as the harness runs its canary fills, L2 flush and comparisons between timed runs)?
// Each of `writer`'s threads stores a tag in a local array and in shared memory; `between`
// launches run; then `reader` (same frame layout, no stores first) counts the threads that find
// their tag. A count above 0 means state can outlive a launch there.
//   nvcc -O3 -arch=sm_90 -o state_survival tools/probes/state_survival.cu && ./state_survival
#include <cstdio>
#include <cuda_runtime.h>

constexpr int WORDS = 64;      // local words per thread
constexpr int SMEM_WORDS = 8192; // 32 KiB of shared memory per block
constexpr int BLOCK = 256;

// The same tag for word k everywhere: which thread slot gets which frame does not matter.
__device__ unsigned tag(unsigned space, unsigned k) { return 0x5EED0000u ^ (space << 24) ^ k; }

// `pick` is 0 at run time; the indexing through it keeps the array in local memory.
__global__ void writer(int pick, unsigned* sink) {
    volatile unsigned frame[WORDS];
    __shared__ volatile unsigned smem[SMEM_WORDS];
    for (int k = 0; k < WORDS; ++k) frame[(k + pick) % WORDS] = tag(0, k);
    for (int k = threadIdx.x; k < SMEM_WORDS; k += BLOCK) smem[k] = tag(1, k);
    __syncthreads();
    if (pick == 12345) sink[0] = frame[pick % WORDS] + smem[pick % SMEM_WORDS];
}

__global__ void reader(int pick, unsigned* local_hits, unsigned* shared_hits) {
    volatile unsigned frame[WORDS];
    __shared__ volatile unsigned smem[SMEM_WORDS];
    unsigned found = 0;
    for (int k = 0; k < WORDS; ++k) found += frame[(k + pick) % WORDS] == tag(0, k);
    if (found == WORDS) atomicAdd(local_hits, 1u);
    unsigned sfound = 0;
    for (int k = threadIdx.x; k < SMEM_WORDS; k += BLOCK) sfound += smem[k] == tag(1, k);
    atomicAdd(shared_hits, sfound);
}

__global__ void between(float* buf, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        buf[i] = v + buf[i] * 0.5f;
}

int main() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const int grid = sms * 8;  // 8 blocks of 256 threads per SM: every thread slot
    unsigned *sink, *hits;
    float* buf;
    const size_t n = size_t(1) << 26;
    cudaMalloc(&sink, 4);
    cudaMalloc(&hits, 8);
    cudaMalloc(&buf, n * 4);
    cudaMemset(buf, 0, n * 4);
    const char* cases[] = {"nothing between", "a memset between", "a kernel between", "both between"};
    for (int c = 0; c < 4; ++c) {
        cudaMemset(hits, 0, 8);
        writer<<<grid, BLOCK>>>(0, sink);
        if (c & 1) cudaMemset(buf, 0x7f, n * 4);  // the L2 flush and canary fills are memsets
        if (c & 2) between<<<sms * 4, 256>>>(buf, n, 1.0f);
        reader<<<grid, BLOCK>>>(0, hits, hits + 1);
        unsigned h[2];
        cudaMemcpy(h, hits, 8, cudaMemcpyDeviceToHost);
        printf("%-18s local: %u of %d threads found all %d words; shared: %u of %d words found\n",
               cases[c], h[0], grid * BLOCK, WORDS, h[1], grid * SMEM_WORDS);
    }
    cudaError_t e = cudaDeviceSynchronize();
    printf("status: %s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
