// Seed for softmax_cross_entropy_backward: the logits' gradient of a classifier's loss,
// L = mean over the batch of -log softmax(logits[b])[targets[b]] (F.cross_entropy, nn.CrossEntropyLoss's default
// reduction), given grad_out = dL/dloss (one float: the loss is a scalar). With p = softmax(logits[b]):
//   grad_logits[b, c] = grad_out / batch_size * (p[c] - (c == targets[b]))
// targets are int64 class indices in [0, num_classes).
//
// STORE: 0 computes exp(logits - max) twice, for the row's sum and again for the gradient; 1 keeps the
//        exponentials in grad_logits after the first and scales them in place.
// ACC:   independent partial sums for each row's sum of exponentials (1: one dependent chain).
#include <math.h>
#include <stdint.h>

#ifndef STORE
#define STORE 0
#endif
#ifndef ACC
#define ACC 1
#endif

void softmax_cross_entropy_backward(const float* logits, const int64_t* targets, const float* grad_out,
                                    float* grad_logits, int64_t batch_size, int64_t num_classes) {
  const int64_t C = num_classes;
  const float scale = grad_out[0] / (float)batch_size;
  for (int64_t b = 0; b < batch_size; ++b) {
    const float* z = logits + b * C;
    float* g = grad_logits + b * C;
    float max = z[0];
    for (int64_t c = 1; c < C; ++c) max = fmaxf(max, z[c]);
    float part[ACC];
    for (int k = 0; k < ACC; ++k) part[k] = 0.0f;
    int64_t c = 0;
    for (; c + ACC <= C; c += ACC)
      for (int k = 0; k < ACC; ++k) {
        const float e = expf(z[c + k] - max);
        if (STORE) g[c + k] = e;
        part[k] += e;
      }
    float sum = 0.0f;
    for (int k = 0; k < ACC; ++k) sum += part[k];
    for (; c < C; ++c) {
      const float e = expf(z[c] - max);
      if (STORE) g[c] = e;
      sum += e;
    }
    const float factor = scale / sum;
    for (c = 0; c < C; ++c) g[c] = factor * (STORE ? g[c] : expf(z[c] - max));
    g[targets[b]] -= scale;
  }
}
