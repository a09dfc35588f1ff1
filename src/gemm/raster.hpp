// Mapping of a linear CTA index to an output tile. Host- and device-callable, so the CPU tests
// check that every tile is visited exactly once.
#pragma once

#include "core/fast_div.hpp"
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

// One launch's grouped raster over `batches` of tiles_m x tiles_n tiles, its divisors made on the host:
// the persistent GEMM maps every work item's tile through it between one tile's epilogue and the next
// tile's mainloop, where divisions by run-time values cost hundreds of cycles.
struct Raster {
  int tiles_m = 1;
  FastDiv per_batch;   // tiles_m * tiles_n
  FastDiv per_group;   // kRasterGroupM * tiles_n
  FastDiv last_group;  // the tile rows of the last group (tiles_m % kRasterGroupM, or kRasterGroupM)
};
inline Raster make_raster(int tiles_m, int tiles_n) {
  Raster r;
  r.tiles_m = tiles_m;
  r.per_batch = FastDiv(tiles_m * tiles_n);
  r.per_group = FastDiv(kRasterGroupM * tiles_n);
  r.last_group = FastDiv(tiles_m % kRasterGroupM ? tiles_m % kRasterGroupM : kRasterGroupM);
  return r;
}

// grouped_raster(bid, tiles_m, tiles_n, ...) by the raster's divisors (bid within one batch).
TESSERA_HD void grouped_raster(int bid, const Raster& r, int& tile_m, int& tile_n) {
  const int group = r.per_group.div(bid);
  const int first_m = group * kRasterGroupM;
  const unsigned in_group = unsigned(bid - group * r.per_group.d);
  if (r.tiles_m - first_m < kRasterGroupM) {  // the last group, shorter
    const int col = r.last_group.div(int(in_group));
    tile_m = first_m + int(in_group) - col * r.last_group.d;
    tile_n = col;
  } else {
    tile_m = first_m + int(in_group % kRasterGroupM);
    tile_n = int(in_group / kRasterGroupM);
  }
}

}  // namespace tessera::gemm_impl
