#pragma once
// e^x in each lane, written once for every vector width, so that AVX2's 8 lanes and
// AVX-512's 16 give the same bits. Within 2 ulp of the exact value for x in [-87, 88];
// 0 below -87.33 (where e^x would be subnormal), +inf above 88.72. The exponent is split
// off as x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so n ln2 is exact), e^r comes
// from the Cephes degree-7 polynomial, and 2^n is built in the exponent bits.
//
// O is the width's operations: V and I (float and int32 vectors), set1, min, max, add, mul,
// fmadd(a, b, c) = a b + c, fnmadd(a, b, c) = c - a b, round (to nearest even), to_int
// (rounding as round does), half (arithmetic shift right by 1), sub (int), pow2(k) (2^k
// for k in [-126, 127], as bits) and outside(x, lo, hi, y) (0 where x < lo, +inf where
// x > hi, else y). Internal linkage: each kernel file compiles its own copy for its
// instruction set.
namespace epq {
namespace {

template <typename O>
typename O::V exp_lanes(typename O::V x) {
  using V = typename O::V;
  using I = typename O::I;
  const float lo = -87.33654f, hi = 88.72283f;
  const V clamped = O::min(O::max(x, O::set1(lo)), O::set1(hi));
  const V n = O::round(O::mul(clamped, O::set1(1.44269504088896341f)));
  V r = O::fnmadd(n, O::set1(0.693359375f), clamped);
  r = O::fnmadd(n, O::set1(-2.12194440e-4f), r);
  V p = O::set1(1.9875691500e-4f);
  p = O::fmadd(p, r, O::set1(1.3981999507e-3f));
  p = O::fmadd(p, r, O::set1(8.3334519073e-3f));
  p = O::fmadd(p, r, O::set1(4.1665795894e-2f));
  p = O::fmadd(p, r, O::set1(1.6666665459e-1f));
  p = O::fmadd(p, r, O::set1(5.0000001201e-1f));
  p = O::fmadd(p, O::mul(r, r), O::add(r, O::set1(1.0f)));
  // n is in [-126, 128]: 2^n in two steps, so that n = 128 fits.
  const I n_int = O::to_int(n);
  const I half_n = O::half(n_int);
  const V y = O::mul(O::mul(p, O::pow2(half_n)), O::pow2(O::sub(n_int, half_n)));
  return O::outside(x, lo, hi, y);
}

}  // namespace
}  // namespace epq
