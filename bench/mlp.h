/* mlp.h — a small multi-layer perceptron in plain C (ReLU hidden layers, softmax cross-entropy, SGD)
 * on deterministic generated data; header-only (static inline) so the trainer and its tests run the
 * same model. Depends on libc only; C11 and C++17. Used by bench/ddp_train.c and test/test_ddp.cc. */
#ifndef RINGO_BENCH_MLP_H_
#define RINGO_BENCH_MLP_H_

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MLP_MAX_LAYERS 8

/* Layer l maps dims[l] inputs to dims[l+1] outputs: y = x W_l + b_l with W_l stored [in][out], so
 * every inner loop is a contiguous axpy the compiler vectorises without reassociating sums. The
 * parameters in forward order are W_0, b_0, W_1, b_1, ...: parameter 2l is W_l, 2l+1 is b_l. */
typedef struct {
  int nlayers;
  int dims[MLP_MAX_LAYERS + 1];
  int max_batch;
  float* w[MLP_MAX_LAYERS];
  float* b[MLP_MAX_LAYERS];
  float* gw[MLP_MAX_LAYERS];
  float* gb[MLP_MAX_LAYERS];
  float* block[2];               /* contiguous layout: all parameters, all gradients */
  float* act[MLP_MAX_LAYERS + 1]; /* act[0] the input, act[l+1] layer l's output (ReLU'd if hidden) */
  float* delta[2];               /* backward scratch: d loss / d (layer output), ping-pong */
} mlp_t;

/* Called by mlp_backward as soon as layer l's gradients (gw[l], gb[l]) are final. */
typedef void (*mlp_ready_fn)(void* ctx, int layer);

static inline uint64_t mlp_mix(uint64_t x) { /* splitmix64's finaliser: a good 64-bit hash */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* A uniform float in [-1, 1) determined by (seed, a, b) alone. */
static inline float mlp_uniform(uint64_t seed, uint64_t a, uint64_t b) {
  const uint64_t h = mlp_mix(seed ^ mlp_mix(a * 0x100000001b3ull ^ mlp_mix(b)));
  return (float)((double)(h >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static inline size_t mlp_wcount(const mlp_t* m, int l) { return (size_t)m->dims[l] * (size_t)m->dims[l + 1]; }
static inline size_t mlp_bcount(const mlp_t* m, int l) { return (size_t)m->dims[l + 1]; }

static inline size_t mlp_total_params(const mlp_t* m) {
  size_t n = 0;
  for (int l = 0; l < m->nlayers; l++) n += mlp_wcount(m, l) + mlp_bcount(m, l);
  return n;
}

static inline void mlp_free(mlp_t* m) {
  for (int l = 0; l < m->nlayers && !m->block[0]; l++) free(m->w[l]), free(m->b[l]);
  for (int l = 0; l < m->nlayers && !m->block[1]; l++) free(m->gw[l]), free(m->gb[l]);
  free(m->block[0]);
  free(m->block[1]);
  for (int l = 0; l <= m->nlayers; l++) free(m->act[l]);
  free(m->delta[0]);
  free(m->delta[1]);
  memset(m, 0, sizeof *m);
}

/* Allocates one set of tensors: one block in forward order when contiguous, else one malloc each
 * (the two layouts exercise DDP's in-place and staging paths). */
static inline int mlp_alloc_set(mlp_t* m, int which, int contiguous, float** w, float** b) {
  if (contiguous) {
    float* p = (float*)calloc(mlp_total_params(m), sizeof(float));
    if (!p) return -1;
    m->block[which] = p;
    for (int l = 0; l < m->nlayers; l++) w[l] = p, p += mlp_wcount(m, l), b[l] = p, p += mlp_bcount(m, l);
    return 0;
  }
  for (int l = 0; l < m->nlayers; l++) {
    w[l] = (float*)calloc(mlp_wcount(m, l), sizeof(float));
    b[l] = (float*)calloc(mlp_bcount(m, l), sizeof(float));
    if (!w[l] || !b[l]) return -1;
  }
  return 0;
}

/* dims[0..nlayers]: input width, hidden widths, classes. Weights uniform in +-1/sqrt(fan-in) from
 * seed, biases zero. Returns 0, or -1 (bad shape, out of memory; m is then freed). */
static inline int mlp_create(mlp_t* m, const int* dims, int nlayers, int max_batch, uint64_t seed, int contiguous) {
  memset(m, 0, sizeof *m);
  if (nlayers < 1 || nlayers > MLP_MAX_LAYERS || max_batch < 1) return -1;
  m->nlayers = nlayers;
  m->max_batch = max_batch;
  int widest = 0;
  for (int l = 0; l <= nlayers; l++) {
    if (dims[l] < 1) return -1;
    m->dims[l] = dims[l];
    widest = dims[l] > widest ? dims[l] : widest;
  }
  int bad = mlp_alloc_set(m, 0, contiguous, m->w, m->b) || mlp_alloc_set(m, 1, contiguous, m->gw, m->gb);
  for (int l = 0; l <= nlayers; l++) bad |= !(m->act[l] = (float*)calloc((size_t)max_batch * (size_t)dims[l], sizeof(float)));
  for (int k = 0; k < 2; k++) bad |= !(m->delta[k] = (float*)calloc((size_t)max_batch * (size_t)widest, sizeof(float)));
  if (bad) {
    mlp_free(m);
    return -1;
  }
  for (int l = 0; l < nlayers; l++) {
    const float scale = 1.0f / sqrtf((float)dims[l]);
    for (size_t i = 0; i < mlp_wcount(m, l); i++) m->w[l][i] = scale * mlp_uniform(seed, (uint64_t)l, i);
  }
  return 0;
}

/* ---- data: sample `index` of the endless stream is a pure function of (seed, index) ----
 * x is uniform in [-1, 1)^in; its label is the argmax of a fixed random linear "teacher" x T. */
static inline void mlp_sample(uint64_t seed, int in, int classes, uint64_t index, float* x, int* label) {
  for (int j = 0; j < in; j++) x[j] = mlp_uniform(seed, 1000003u + index, (uint64_t)j);
  int best = 0;
  double best_v = -INFINITY;
  for (int k = 0; k < classes; k++) {
    double v = 0;
    for (int j = 0; j < in; j++) v += (double)x[j] * mlp_uniform(seed ^ 0x7eac4e7ull, (uint64_t)k, (uint64_t)j);
    if (v > best_v) best_v = v, best = k;
  }
  *label = best;
}

/* Samples first .. first+n-1 into act[0] and labels[0..n). */
static inline void mlp_load_batch(mlp_t* m, uint64_t seed, uint64_t first, int n, int* labels) {
  const int in = m->dims[0];
  for (int i = 0; i < n; i++) mlp_sample(seed, in, m->dims[m->nlayers], first + (uint64_t)i, m->act[0] + (size_t)i * (size_t)in, &labels[i]);
}

/* Forward over the n samples in act[0]; the logits end in act[nlayers]. */
static inline void mlp_forward(mlp_t* m, int n) {
  for (int l = 0; l < m->nlayers; l++) {
    const int in = m->dims[l], out = m->dims[l + 1], relu = l + 1 < m->nlayers;
    for (int i = 0; i < n; i++) {
      const float* x = m->act[l] + (size_t)i * (size_t)in;
      float* y = m->act[l + 1] + (size_t)i * (size_t)out;
      memcpy(y, m->b[l], sizeof(float) * (size_t)out);
      for (int j = 0; j < in; j++) {
        const float xj = x[j];
        const float* wr = m->w[l] + (size_t)j * (size_t)out;
        for (int o = 0; o < out; o++) y[o] += xj * wr[o];
      }
      if (relu)
        for (int o = 0; o < out; o++) y[o] = y[o] > 0.0f ? y[o] : 0.0f;
    }
  }
}

/* Mean softmax cross-entropy of the n samples against labels; writes d(scale * mean loss)/d logits
 * into delta[0]. Returns the mean loss (not scaled). */
static inline double mlp_loss(mlp_t* m, const int* labels, int n, float scale) {
  const int c = m->dims[m->nlayers];
  double total = 0;
  for (int i = 0; i < n; i++) {
    const float* z = m->act[m->nlayers] + (size_t)i * (size_t)c;
    float* d = m->delta[0] + (size_t)i * (size_t)c;
    double zmax = z[0], sum = 0;
    for (int k = 1; k < c; k++) zmax = z[k] > zmax ? z[k] : zmax;
    for (int k = 0; k < c; k++) sum += exp((double)z[k] - zmax);
    for (int k = 0; k < c; k++) {
      const double p = exp((double)z[k] - zmax) / sum;
      d[k] = (float)((p - (k == labels[i] ? 1.0 : 0.0)) * (double)scale / (double)n);
    }
    total += log(sum) + zmax - (double)z[labels[i]];
  }
  return total / (double)n;
}

/* Backward from delta[0] (set by mlp_loss), last layer first, ADDING into gw/gb (zero them first;
 * accumulation over micro-steps just skips the zeroing). ready(ctx, l) runs as soon as layer l's
 * gradients are final, before layer l's input gradient is computed: the hook DDP overlaps with. */
static inline void mlp_backward(mlp_t* m, int n, mlp_ready_fn ready, void* ctx) {
  int cur = 0;
  for (int l = m->nlayers - 1; l >= 0; l--) {
    const int in = m->dims[l], out = m->dims[l + 1];
    for (int i = 0; i < n; i++) {
      const float* d = m->delta[cur] + (size_t)i * (size_t)out;
      const float* x = m->act[l] + (size_t)i * (size_t)in;
      for (int o = 0; o < out; o++) m->gb[l][o] += d[o];
      for (int j = 0; j < in; j++) {
        const float xj = x[j];
        float* g = m->gw[l] + (size_t)j * (size_t)out;
        for (int o = 0; o < out; o++) g[o] += xj * d[o];
      }
    }
    if (ready) ready(ctx, l);
    if (l == 0) break;
    for (int i = 0; i < n; i++) { /* input gradient through W_l, then the ReLU of layer l-1 */
      const float* d = m->delta[cur] + (size_t)i * (size_t)out;
      const float* x = m->act[l] + (size_t)i * (size_t)in;
      float* dx = m->delta[cur ^ 1] + (size_t)i * (size_t)in;
      for (int j = 0; j < in; j++) {
        const float* wr = m->w[l] + (size_t)j * (size_t)out;
        float s = 0.0f;
        for (int o = 0; o < out; o++) s += wr[o] * d[o];
        dx[j] = x[j] > 0.0f ? s : 0.0f;
      }
    }
    cur ^= 1;
  }
}

static inline void mlp_zero_grad(mlp_t* m) {
  for (int l = 0; l < m->nlayers; l++) {
    memset(m->gw[l], 0, sizeof(float) * mlp_wcount(m, l));
    memset(m->gb[l], 0, sizeof(float) * mlp_bcount(m, l));
  }
}

static inline void mlp_sgd(mlp_t* m, float lr) {
  for (int l = 0; l < m->nlayers; l++) {
    for (size_t i = 0; i < mlp_wcount(m, l); i++) m->w[l][i] -= lr * m->gw[l][i];
    for (size_t i = 0; i < mlp_bcount(m, l); i++) m->b[l][i] -= lr * m->gb[l][i];
  }
}

#endif /* RINGO_BENCH_MLP_H_ */
