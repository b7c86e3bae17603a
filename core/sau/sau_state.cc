#include "core/sau/sau_state.h"

namespace streamlearn::sau {

SauState::SauState(const SauSpec& spec)
    : R(static_cast<size_t>(spec.r) * spec.d_v, 0.0),
      R_c(R.size(), 0.0),
      s(spec.r, 0.0),
      s_c(spec.r, 0.0),
      H(static_cast<size_t>(spec.r) * spec.r_v, 0.0),
      H_c(H.size(), 0.0),
      whitening(spec.r, spec.beta_mu, spec.beta_sigma, spec.whiten_eps / spec.r),
      eprocess(spec),
      floor(spec.beta_floor),
      regulator(spec),
      window(spec.exact_window, spec.d, spec.d_v) {}

void SauState::AssignAllButSums(const SauState& src) {
  // A member added to SauState is added here too (the size check below is there to say so);
  // SauIngestFrom.BitIdenticalToCopyThenIngest fails when one is missed.
  static_assert(sizeof(void*) != 8 || sizeof(SauState) == kSauStateBytes,
                "SauState changed: copy the new member in AssignAllButSums, then update "
                "kSauStateBytes");
  events = src.events;
  R.resize(src.R.size());
  R_c.resize(src.R_c.size());
  s.resize(src.s.size());
  s_c.resize(src.s_c.size());
  H.resize(src.H.size());
  H_c.resize(src.H_c.size());
  whitening = src.whitening;
  eprocess = src.eprocess;
  rj = src.rj;
  floor = src.floor;
  median_den = src.median_den;
  lambda_star = src.lambda_star;
  clipped = src.clipped;
  features = src.features;
  max_exponent = src.max_exponent;
  den_below_floor = src.den_below_floor;
  den_min = src.den_min;
  regulator = src.regulator;
  window = src.window;
}

size_t SauState::Bytes() const {
  return (R.size() + R_c.size() + s.size() + s_c.size() + H.size() + H_c.size()) *
             sizeof(double) +
         whitening.Bytes() + eprocess.Bytes() + window.Bytes() + sizeof(SauState);
}

void SauState::Hash(Sha256& h) const {
  h.Update("streamlearn.sau.state.v1");
  h.U64(events);
  h.F64s(R);
  h.F64s(R_c);
  h.F64s(s);
  h.F64s(s_c);
  h.F64s(H);
  h.F64s(H_c);
  whitening.Hash(h);
  eprocess.Hash(h);
  h.U64(rj.bits());
  h.F64(floor.floor());
  h.U64(floor.since_trigger());
  h.F64(median_den.value());
  h.F64(lambda_star);
  h.U64(clipped);
  h.U64(features);
  h.F64(max_exponent);
  h.U64(den_below_floor);
  h.F64(den_min);
  regulator.Hash(h);
  window.Hash(h);
}

}  // namespace streamlearn::sau
