// Mapping of a linear CTA index to an output tile. Host- and device-callable, so the CPU tests
// check that every tile is visited exactly once.
#pragma once

#include "core/host_device.hpp"

namespace tessera::gemm_impl {

// Groups of kGroupM tile-rows are walked column by column, so that CTAs running at the same
// time share A rows and B columns in L2 (the "grouped" / swizzled raster order).
constexpr int kRasterGroupM = 8;

TESSERA_HD void grouped_raster(int bid, int tiles_m, int tiles_n, int& tile_m, int& tile_n) {
  const int per_group = kRasterGroupM * tiles_n;
  const int group = bid / per_group;
  const int first_m = group * kRasterGroupM;
  const int rows_left = tiles_m - first_m;
  const int group_m = rows_left < kRasterGroupM ? rows_left : kRasterGroupM;
  const int in_group = bid - group * per_group;
  tile_m = first_m + in_group % group_m;
  tile_n = in_group / group_m;
}

}  // namespace tessera::gemm_impl
