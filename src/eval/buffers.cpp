#include "eval/buffers.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include <boost/random/exponential_distribution.hpp>
#include <boost/random/normal_distribution.hpp>

namespace kernelevolve::eval {

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1f;
  std::uint32_t mantissa = h & 0x3ff;
  std::uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0);  // inf / nan
  if (abs >= 0x477ff000u) return sign | 0x7c00;                                    // overflow
  if (abs < 0x33000000u) return sign;                                              // underflow to 0
  int exponent = static_cast<int>(abs >> 23) - 127 + 15;
  std::uint32_t mantissa = (abs & 0x7fffff) | 0x800000;
  if (exponent <= 0) {  // subnormal half
    const int shift = 14 - exponent;
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rem = mantissa & ((1u << shift) - 1);
    const std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | static_cast<std::uint16_t>(half);
  }
  std::uint32_t half = (static_cast<std::uint32_t>(exponent) << 10) | ((mantissa >> 13) & 0x3ff);
  const std::uint32_t rem = mantissa & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // round to nearest even
  return sign | static_cast<std::uint16_t>(half);
}

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<std::uint16_t>(x >> 16);
}

namespace {
template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void store(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
}  // namespace

double ArrayView::get(std::size_t i) const {
  const unsigned char* p = bytes + i * dtype_size(dtype);
  switch (dtype) {
    case DType::f16: return half_to_float(load<std::uint16_t>(p));
    case DType::bf16: return bf16_to_float(load<std::uint16_t>(p));
    case DType::f32: return load<float>(p);
    case DType::f64: return load<double>(p);
    case DType::i8: return load<std::int8_t>(p);
    case DType::u8: return load<std::uint8_t>(p);
    case DType::i32: return load<std::int32_t>(p);
    case DType::i64: return static_cast<double>(load<std::int64_t>(p));
  }
  return 0;
}

void ArrayView::set(std::size_t i, double v) const {
  unsigned char* p = bytes + i * dtype_size(dtype);
  switch (dtype) {
    case DType::f16: store(p, float_to_half(static_cast<float>(v))); break;
    case DType::bf16: store(p, float_to_bf16(static_cast<float>(v))); break;
    case DType::f32: store(p, static_cast<float>(v)); break;
    case DType::f64: store(p, v); break;
    case DType::i8: store(p, static_cast<std::int8_t>(v)); break;
    case DType::u8: store(p, static_cast<std::uint8_t>(v)); break;
    case DType::i32: store(p, static_cast<std::int32_t>(v)); break;
    case DType::i64: store(p, static_cast<std::int64_t>(v)); break;
  }
}

InputDist trial_distribution(const InputDist& spec_dist, int trial) {
  using K = InputDist::Kind;
  if (spec_dist.kind >= K::integers) {
    // Integers keep their range on every trial: an index out of range would fault the reference itself.
    InputDist d = spec_dist;
    switch (trial % 4) {
      case 0: d.kind = K::integers; break;
      case 1: d.kind = K::edges; break;
      case 2: d.kind = K::repeated; break;
      default: d.kind = K::integers, d.sorted = true;
    }
    return d;
  }
  // Spread of the spec's own distribution, reused so other trials stay in a range the problem accepts.
  const double scale =
      spec_dist.kind == K::uniform ? std::max(std::abs(spec_dist.a), std::abs(spec_dist.b)) : std::abs(spec_dist.b);
  const double centre = spec_dist.kind == K::uniform ? (spec_dist.a + spec_dist.b) / 2 : spec_dist.a;
  switch (trial % 4) {
    case 0: return spec_dist;
    case 1: return {K::normal, centre, scale};                           // signed, unbounded
    case 2: return {K::laplace, centre, scale};                          // heavy-tailed
    default: return {K::uniform, centre - scale, centre + scale * 0.5};  // skewed range
  }
}

double integer_draw(const InputDist& dist, std::size_t i, std::size_t n, double u, double u2, const double pool[4]) {
  using K = InputDist::Kind;
  const double width = dist.b - dist.a + 1;  // inclusive range
  auto in_range = [&](double x) { return std::min(dist.b, std::max(dist.a, std::floor(x))); };
  // Sorted draws place element i by its position, (i + u) / n, which never decreases with i: each
  // element is drawn alone, so chunks still fill in parallel.
  const double at = dist.sorted ? (static_cast<double>(i) + u) / static_cast<double>(std::max<std::size_t>(n, 1)) : u;
  switch (dist.kind) {
    case K::edges:  // the bounds themselves, four times in five
      if (at < 0.4) return dist.a;
      if (at >= 0.6) return dist.b;
      return in_range(dist.a + width * (dist.sorted ? (at - 0.4) / 0.2 : u2));
    case K::repeated:  // a few distinct values, many times each
      return pool[std::min<std::size_t>(3, static_cast<std::size_t>(at * 4))];
    default: return in_range(dist.a + width * at);
  }
}

namespace {

// xoshiro256++ seeded from the caller's engine: several times faster than drawing every element
// from mt19937_64 through the standard distributions, which dominated evaluation of large inputs.
class FastRandom {
 public:
  // A uniform random bit generator, so Boost's distributions can draw from it.
  using result_type = std::uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type{0}; }
  result_type operator()() { return next(); }

  explicit FastRandom(std::mt19937_64& seed_source) {
    for (auto& word : s_) word = seed_source();
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[0] + s_[3], 23) + s_[0];
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace

namespace {

// Elements [begin, end) from their own generator: chunks are independent, so they fill in parallel and
// the result does not depend on how many threads there are. Normal and exponential draws use Boost's
// ziggurat samplers (about 4x faster than Box-Muller here): at GPU shapes, drawing fresh inputs for every
// trial was the largest host cost of an evaluation.
template <class Store>
void fill_chunk_as(const InputDist& dist, FastRandom& random, std::size_t begin, std::size_t end, std::size_t n,
                   const double pool[4], Store store) {
  const double scale = dist.b > 0 ? dist.b : 1.0;
  switch (dist.kind) {
    case InputDist::Kind::uniform: {
      const double width = dist.b - dist.a;
      for (std::size_t i = begin; i < end; ++i) store(i, dist.a + width * random.unit());
      break;
    }
    case InputDist::Kind::normal: {
      boost::random::normal_distribution<double> normal(dist.a, scale);
      for (std::size_t i = begin; i < end; ++i) store(i, normal(random));
      break;
    }
    case InputDist::Kind::laplace: {  // standard deviation `scale`: exponential magnitude, random sign
      boost::random::exponential_distribution<double> exponential(std::sqrt(2.0) / scale);
      for (std::size_t i = begin; i < end; ++i) {
        const double magnitude = exponential(random);
        store(i, dist.a + ((random() >> 63) ? magnitude : -magnitude));  // the top bit: xoshiro+'s low bits are weak
      }
      break;
    }
    default:
      for (std::size_t i = begin; i < end; ++i) {
        const double u = random.unit();
        store(i, integer_draw(dist, i, n, u, random.unit(), pool));
      }
  }
}

void fill_chunk(const ArrayView& array, const InputDist& dist, std::mt19937_64& seed_source, std::size_t begin,
                std::size_t end, const double pool[4]) {
  FastRandom random(seed_source);
  if (array.dtype == DType::f32) {  // the common case, without a per-element switch on the type
    float* out = reinterpret_cast<float*>(array.bytes);
    fill_chunk_as(dist, random, begin, end, array.count, pool,
                  [out](std::size_t i, double v) { out[i] = static_cast<float>(v); });
    return;
  }
  const bool integral = !is_float(array.dtype);
  fill_chunk_as(dist, random, begin, end, array.count, pool, [&](std::size_t i, double v) {
    if (integral) {
      v = std::round(v);
      if (array.dtype == DType::u8) v = std::fmod(std::abs(v), 256.0);
      if (array.dtype == DType::i8) v = std::max(-128.0, std::min(127.0, v));
    }
    array.set(i, v);
  });
}

constexpr std::size_t kChunk = 1u << 18;

// Runs f(chunk_index) for every chunk of n elements, on up to hardware_concurrency threads.
template <class F>
void for_chunks(std::size_t n, F f) {
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
  const std::size_t threads =
      std::min<std::size_t>(chunks, std::max(1u, std::min(16u, std::thread::hardware_concurrency())));
  if (threads <= 1) {
    for (std::size_t c = 0; c < chunks; ++c) f(c);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (std::size_t c = next++; c < chunks; c = next++) f(c);
    });
  }
  for (auto& t : pool) t.join();
}

}  // namespace

void fill_random(const ArrayView& array, const InputDist& dist, std::uint64_t seed) {
  const std::size_t chunks = (array.count + kChunk - 1) / kChunk;
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> seeds(chunks);
  for (auto& chunk_seed : seeds) chunk_seed = rng();
  // The repeated family's values, shared by every chunk, ascending so a sorted draw stays sorted.
  double pool[4];
  for (double& value : pool)
    value = std::min(dist.b, std::floor(dist.a + (dist.b - dist.a + 1) * (rng() >> 11) * 0x1.0p-53));
  std::sort(pool, pool + 4);
  for_chunks(array.count, [&](std::size_t c) {
    std::mt19937_64 chunk_rng(seeds[c]);
    fill_chunk(array, dist, chunk_rng, c * kChunk, std::min(array.count, (c + 1) * kChunk), pool);
  });
}

void poison(HostArray& array) {
  if (array.dtype == DType::f32) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t i = 0; i < array.count; ++i) std::memcpy(array.bytes.data() + 4 * i, &nan, 4);
  } else if (is_float(array.dtype)) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::size_t i = 0; i < array.count; ++i) array.set(i, nan);
  } else {
    std::memset(array.bytes.data(), 0x5b, array.bytes.size());
  }
}

namespace {

inline double excess_of(double g, double e, const Tolerance& tol) {
  if (std::isnan(e)) return std::isnan(g) ? 0.0 : std::numeric_limits<double>::infinity();
  if (std::isnan(g)) return std::numeric_limits<double>::infinity();
  if (std::isinf(e) || std::isinf(g)) return g == e ? 0.0 : std::numeric_limits<double>::infinity();
  return std::abs(g - e) - (tol.atol + tol.rtol * std::abs(e));
}

void compare_range(const ArrayView& got, const ArrayView& expected, const Tolerance& tol, std::size_t begin,
                   std::size_t end, CompareResult& r) {
  auto visit = [&](std::size_t i, double g, double e) {
    const double excess = excess_of(g, e, tol);
    if (excess > r.excess) {
      r.excess = excess;
      r.worst_index = static_cast<std::int64_t>(i);
      r.got = g;
      r.expected = e;
    }
    if (excess > 0) r.pass = false;
  };
  if (got.dtype == DType::f32 && expected.dtype == DType::f32) {
    const auto* g = reinterpret_cast<const float*>(got.bytes);
    const auto* e = reinterpret_cast<const float*>(expected.bytes);
    for (std::size_t i = begin; i < end; ++i) visit(i, g[i], e[i]);
  } else {
    for (std::size_t i = begin; i < end; ++i) visit(i, got.get(i), expected.get(i));
  }
}

}  // namespace

CompareResult compare(const HostArray& got, const HostArray& expected, const Tolerance& tol) {
  CompareResult result = compare(got.view(), expected.view(), std::min(got.count, expected.count), tol);
  if (got.count != expected.count) result.pass = false;
  return result;
}

CompareResult compare(const ArrayView& got, const ArrayView& expected, std::size_t n, const Tolerance& tol) {
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<CompareResult> parts(chunks);
  for_chunks(n, [&](std::size_t c) {
    compare_range(got, expected, tol, c * kChunk, std::min(n, (c + 1) * kChunk), parts[c]);
  });
  CompareResult result;
  for (const auto& part : parts) {  // in index order: ties keep the first element
    if (!part.pass) result.pass = false;
    if (part.excess > result.excess) {
      result.excess = part.excess;
      result.worst_index = part.worst_index;
      result.got = part.got;
      result.expected = part.expected;
    }
  }
  return result;
}

}  // namespace kernelevolve::eval
