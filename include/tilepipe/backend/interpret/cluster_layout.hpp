// How a simulated cluster numbers its warpgroups: the interpreter simulates a thread-block
// cluster as one CTA state, and CTA rank r's warpgroup w is warpgroup r * wgs_per_cta + w
// of the cluster, so that one scheduler, one set of barriers and one race detector see
// every cross-CTA arrival and multicast.
#pragma once

namespace tilepipe::interpret {

struct cluster_layout {
  int ctas = 1;
  int wgs_per_cta = 1;

  int warpgroups() const { return ctas * wgs_per_cta; }
  /// The cluster rank of the CTA warpgroup wg belongs to, and its index within that CTA.
  int rank_of(int wg) const { return wg / wgs_per_cta; }
  int local_wg(int wg) const { return wg % wgs_per_cta; }
};

}  // namespace tilepipe::interpret
