// A tiny HIP source of our own, compiled by .ci/hip-fixture.sh into real AMDGPU code objects and offload bundles:
// the fixtures that the code-object reader's tests read. extern "C" keeps the kernel symbols plain
// (saxpy, sum_f32, fill_u32; each with its "<name>.kd" kernel descriptor).
#include <hip/hip_runtime.h>

extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// One partial sum per block through LDS, then one atomic add per block.
extern "C" __global__ void sum_f32(int n, const float* x, float* out) {
  __shared__ float part[256];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  part[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) part[t] += part[t + s];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, part[0]);
}

extern "C" __global__ void fill_u32(int n, unsigned v, unsigned* p) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}
