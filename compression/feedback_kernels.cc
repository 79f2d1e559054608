// The error-feedback loops every lossy codec runs before it quantizes (wire.h): one
// definition, one IEEE operation per step, so every codec and CPU clone agrees.
#include "compression/wire.h"

namespace tributary::compression::wire {

TRIB_CODEC_MULTIVERSION
void add_residual(float* __restrict r, const float* __restrict x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) r[i] = x[i] + r[i];
}

TRIB_CODEC_MULTIVERSION
void accumulate_momentum(float* __restrict u, float* __restrict r, const float* __restrict x,
                         std::size_t n, float m) {
  for (std::size_t i = 0; i < n; ++i) {
    u[i] = m * u[i] + x[i];
    r[i] = r[i] + u[i];
  }
}

}  // namespace tributary::compression::wire
