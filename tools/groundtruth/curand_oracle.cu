// curand oracle: what curand itself returns for a list of Philox4x32-10 states.
//
// Input (stdin), one state per line, all decimal uint64 except n and skip_times:
//   seed subsequence offset n skip skip_times
// For each state the kernel calls curand_init(seed, subsequence, offset), then
// skipahead(skip) skip_times times, then records n words of curand() from one copy of the
// state and n values of curand_uniform() from another copy (so the float conversion is
// curand's own, not a re-implementation). Output (stdout), one line per state:
//   <index> w:<hex words, comma separated> u:<hex float32 bit patterns, comma separated>
//
// Build: nvcc -O2 -arch=sm_90 -o curand_oracle curand_oracle.cu
#include <cuda_runtime.h>
#include <curand_kernel.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

constexpr int kMaxDraws = 32;

struct State {
  unsigned long long seed, subsequence, offset, skip;
  int n, skip_times;
};

__global__ void draw_kernel(const State* states, int count, unsigned int* words,
                            unsigned int* uniform_bits) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const State s = states[i];
  curandStatePhilox4_32_10_t a, b;
  curand_init(s.seed, s.subsequence, s.offset, &a);
  for (int t = 0; t < s.skip_times; ++t) skipahead(s.skip, &a);
  b = a;
  for (int j = 0; j < s.n; ++j) {
    words[i * kMaxDraws + j] = curand(&a);
    uniform_bits[i * kMaxDraws + j] = __float_as_uint(curand_uniform(&b));
  }
}

static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

int main() {
  std::vector<State> states;
  State s{};
  while (scanf("%llu %llu %llu %d %llu %d", &s.seed, &s.subsequence, &s.offset, &s.n, &s.skip,
               &s.skip_times) == 6) {
    if (s.n < 1 || s.n > kMaxDraws) {
      fprintf(stderr, "n must be in 1..%d\n", kMaxDraws);
      return 1;
    }
    states.push_back(s);
  }
  const int count = static_cast<int>(states.size());
  State* d_states;
  unsigned int *d_words, *d_uniforms;
  const size_t out_bytes = sizeof(unsigned int) * kMaxDraws * (count > 0 ? count : 1);
  check(cudaMalloc(&d_states, sizeof(State) * (count > 0 ? count : 1)), "malloc");
  check(cudaMalloc(&d_words, out_bytes), "malloc");
  check(cudaMalloc(&d_uniforms, out_bytes), "malloc");
  check(cudaMemcpy(d_states, states.data(), sizeof(State) * count, cudaMemcpyHostToDevice),
        "copy");
  draw_kernel<<<(count + 127) / 128, 128>>>(d_states, count, d_words, d_uniforms);
  check(cudaDeviceSynchronize(), "kernel");
  std::vector<unsigned int> words(kMaxDraws * count), uniforms(kMaxDraws * count);
  check(cudaMemcpy(words.data(), d_words, sizeof(unsigned int) * words.size(),
                   cudaMemcpyDeviceToHost),
        "copy back");
  check(cudaMemcpy(uniforms.data(), d_uniforms, sizeof(unsigned int) * uniforms.size(),
                   cudaMemcpyDeviceToHost),
        "copy back");
  for (int i = 0; i < count; ++i) {
    printf("%d w:", i);
    for (int j = 0; j < states[i].n; ++j) printf(j ? ",%08x" : "%08x", words[i * kMaxDraws + j]);
    printf(" u:");
    for (int j = 0; j < states[i].n; ++j)
      printf(j ? ",%08x" : "%08x", uniforms[i * kMaxDraws + j]);
    printf("\n");
  }
  return 0;
}
