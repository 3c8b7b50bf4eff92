// Small host<->device copy latency, three ways, one process or several at once: the probe
// behind BENCHMARKS.md "the ~200 us per small CUDA step explained" (2026-11-26, H100).
// Build and run (two processes sharing one GPU, then the same under MPS):
//   /usr/local/cuda/bin/nvcc -O2 -gencode=arch=compute_90,code=sm_90 -cudart static \
//       -o cuda-copy-latency usertools/cuda-copy-latency.cu
//   ./cuda-copy-latency 1000 & ./cuda-copy-latency 1000; wait
//   nvidia-cuda-mps-control -d; (same two lines); echo quit | nvidia-cuda-mps-control
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
__global__ void copy_k(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n16) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += gridDim.x * blockDim.x) dst[i] = src[i];
}
int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 2000;
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *d, *h; cudaMalloc(&d, 1 << 20); cudaHostAlloc(&h, 1 << 20, 0);
  void* hd; cudaHostGetDevicePointer(&hd, h, 0);
  auto bench = [&](const char* what, size_t n, auto f) {
    for (int i = 0; i < 50; ++i) { f(n); cudaStreamSynchronize(s); }
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) { f(n); cudaStreamSynchronize(s); }
    printf("%7zu B %-26s %8.2f us\n", n, what, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters);
  };
  for (size_t n = 1024; n <= 65536; n *= 4) {
    bench("H2D cudaMemcpyAsync", n, [&](size_t k) { cudaMemcpyAsync(d, h, k, cudaMemcpyDefault, s); });
    bench("H2D kernel (mapped pinned)", n, [&](size_t k) { copy_k<<<(unsigned)((k / 16 + 255) / 256), 256, 0, s>>>((uint4*)d, (const uint4*)hd, k / 16); });
    bench("H2D cudaMemcpyAsync D2D-kind", n, [&](size_t k) { cudaMemcpyAsync(d, hd, k, cudaMemcpyDeviceToDevice, s); });
    bench("D2H cudaMemcpyAsync", n, [&](size_t k) { cudaMemcpyAsync(h, d, k, cudaMemcpyDefault, s); });
  }
  printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
