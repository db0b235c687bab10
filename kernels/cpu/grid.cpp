// Grid-graph contraction (a graph minor with its lifting map) with union-find.
//
// Two-pass parallel scheme: the volume is cut into one slab of whole planes per thread;
// each thread unions the edges inside its slab (roots are always the smallest index, so
// slabs never touch each other's parents), then the edges between slabs are unioned
// serially. Because every root is the smallest voxel of its region, numbering the roots in
// index order numbers the regions by first voxel in raster order, like the reference.
// Region adjacency is found by scanning the grid twice per slab, merging runs of one
// region pair on the fly: the first scan counts runs per smaller region, the second drops
// them straight into per-region buckets, which are then sorted and merged (linear memory
// traffic, no global sort). Outputs are written into caller-allocated buffers.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

#include "kernels.h"

namespace pwk {
namespace {

using Index = int32_t;

inline Index find(Index* parent, Index x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

inline Index find_readonly(const Index* parent, Index x) {
  while (parent[x] != x) x = parent[x];
  return x;
}

inline void unite(Index* parent, Index a, Index b) {
  a = find(parent, a);
  b = find(parent, b);
  if (a < b)
    parent[b] = a;
  else if (b < a)
    parent[a] = b;
}

struct Grid {
  int64_t d, h, w;
  const float* wz;  // weight of the edge to the +1 neighbour along each axis
  const float* wy;
  const float* wx;
  int64_t plane() const { return h * w; }
};

// A run of grid edges between regions lo < hi (the bucket of lo stores hi).
struct Run {
  Index hi;
  int32_t count;
  double weight;
};

struct RegionStats {
  int64_t count;
  double sum, sq_sum;
};

// Unions every contracted edge whose both ends lie in planes [z0, z1).
void union_slab(const Grid& g, float thr, int64_t z0, int64_t z1, Index* parent) {
  for (int64_t z = z0; z < z1; ++z)
    for (int64_t y = 0; y < g.h; ++y) {
      const int64_t base = (z * g.h + y) * g.w;
      for (int64_t x = 0; x < g.w; ++x) {
        const int64_t i = base + x;
        if (x + 1 < g.w && g.wx[i] < thr) unite(parent, i, i + 1);
        if (y + 1 < g.h && g.wy[i] < thr) unite(parent, i, i + g.w);
        if (z + 1 < z1 && g.wz[i] < thr) unite(parent, i, i + g.plane());
      }
    }
}

// Calls emit(lo, run) for every run of grid edges leaving planes [z0, z1) in the +
// direction between two regions; per axis, consecutive edges between the same pair of
// regions (a stretch of shared boundary) form one run.
template <typename Emit>
void for_each_run(const Grid& g, const int64_t* labels, int64_t z0, int64_t z1, Emit&& emit) {
  int64_t lo[3] = {-1, -1, -1};
  Run run[3] = {};
  auto visit = [&](int axis, int64_t la, int64_t lb, float wt) {
    if (la == lb) return;
    const int64_t a = std::min(la, lb), b = std::max(la, lb);
    if (a == lo[axis] && b == run[axis].hi) {
      ++run[axis].count;
      run[axis].weight += wt;
      return;
    }
    if (lo[axis] >= 0) emit(lo[axis], run[axis]);
    lo[axis] = a;
    run[axis] = {static_cast<Index>(b), 1, wt};
  };
  for (int64_t z = z0; z < z1; ++z)
    for (int64_t y = 0; y < g.h; ++y) {
      const int64_t base = (z * g.h + y) * g.w;
      for (int64_t x = 0; x < g.w; ++x) {
        const int64_t i = base + x;
        if (x + 1 < g.w) visit(2, labels[i], labels[i + 1], g.wx[i]);
        if (y + 1 < g.h) visit(1, labels[i], labels[i + g.w], g.wy[i]);
        if (z + 1 < g.d) visit(0, labels[i], labels[i + g.plane()], g.wz[i]);
      }
    }
  for (int axis = 0; axis < 3; ++axis)
    if (lo[axis] >= 0) emit(lo[axis], run[axis]);
}

// Sorts one bucket and merges runs with the same neighbour; returns the unique count.
// Ties are ordered by weight and count so the sums do not depend on thread timing.
int64_t merge_bucket(Run* first, Run* last) {
  std::sort(first, last, [](const Run& p, const Run& q) {
    if (p.hi != q.hi) return p.hi < q.hi;
    if (p.weight != q.weight) return p.weight < q.weight;
    return p.count < q.count;
  });
  Run* keep = first;
  for (Run* p = first; p < last; ++p) {
    if (keep != first && p->hi == (keep - 1)->hi) {
      (keep - 1)->count += p->count;
      (keep - 1)->weight += p->weight;
    } else {
      *keep++ = *p;
    }
  }
  return keep - first;
}

// Labels every voxel with its root, then renumbers roots 0..R-1 in index order; returns R.
int64_t number_regions(std::vector<Index>& parent, int64_t* labels, int threads) {
  const int64_t n = static_cast<int64_t>(parent.size());
  std::vector<int64_t> roots_before(threads + 1, 0);
  int64_t regions = 0;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    int64_t count = 0;
    for (int64_t i = lo; i < hi; ++i) {
      labels[i] = find_readonly(parent.data(), i);
      count += labels[i] == i;
    }
    roots_before[t + 1] = count;
#pragma omp barrier
#pragma omp single
    {
      for (int k = 0; k < nt; ++k) roots_before[k + 1] += roots_before[k];
      regions = roots_before[nt];
    }
    int64_t next = roots_before[t];
    for (int64_t i = lo; i < hi; ++i)
      if (labels[i] == i) parent[i] = static_cast<Index>(next++);
#pragma omp barrier
    for (int64_t i = lo; i < hi; ++i) labels[i] = parent[labels[i]];
  }
  return regions;
}

}  // namespace

void grid_contract(const float* image, const float* weights, int64_t d, int64_t h, int64_t w,
                   float threshold, int64_t* labels, const GridAllocator& allocate, int threads) {
  const int64_t n = d * h * w;
  if (n >= (int64_t{1} << 31)) throw std::invalid_argument("grid has 2^31 or more voxels");
  threads = team_size(threads, n, int64_t{1} << 16);
  // A 2-D grid (d == 1) is cut into slabs of rows instead: the same memory seen as (h, 1, w).
  Grid g{d, h, w, weights, weights + n, weights + 2 * n};
  if (d == 1 && h > 1) g = Grid{h, 1, w, weights + n, weights, weights + 2 * n};
  const int slabs = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, g.d)));
  std::vector<int64_t> bound(slabs + 1);
  for (int s = 0; s <= slabs; ++s) bound[s] = g.d * s / slabs;

  std::vector<Index> parent(n);
#pragma omp parallel for schedule(static) num_threads(slabs)
  for (int s = 0; s < slabs; ++s) {
    for (int64_t i = bound[s] * g.plane(); i < bound[s + 1] * g.plane(); ++i) parent[i] = i;
    union_slab(g, threshold, bound[s], bound[s + 1], parent.data());
  }
  for (int s = 1; s < slabs; ++s) {
    const int64_t start = (bound[s] - 1) * g.plane();
    for (int64_t i = start; i < start + g.plane(); ++i)
      if (g.wz[i] < threshold) unite(parent.data(), i, i + g.plane());
  }
  const int64_t regions = number_regions(parent, labels, threads);
  std::vector<Index>().swap(parent);

  std::vector<int64_t> start(regions + 1, 0);
#pragma omp parallel for schedule(static) num_threads(slabs)
  for (int s = 0; s < slabs; ++s)
    for_each_run(g, labels, bound[s], bound[s + 1], [&](int64_t lo, const Run&) {
      std::atomic_ref<int64_t>(start[lo + 1]).fetch_add(1, std::memory_order_relaxed);
    });
  for (int64_t r = 0; r < regions; ++r) start[r + 1] += start[r];
  std::vector<Run> bucket(start[regions]);
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
#pragma omp parallel for schedule(static) num_threads(slabs)
    for (int s = 0; s < slabs; ++s)
      for_each_run(g, labels, bound[s], bound[s + 1], [&](int64_t lo, const Run& run) {
        bucket[std::atomic_ref<int64_t>(fill[lo]).fetch_add(1, std::memory_order_relaxed)] = run;
      });
  }
  std::vector<int64_t> unique(regions + 1, 0);
#pragma omp parallel for schedule(dynamic, 4096) num_threads(threads)
  for (int64_t r = 0; r < regions; ++r)
    unique[r + 1] = merge_bucket(bucket.data() + start[r], bucket.data() + start[r + 1]);
  for (int64_t r = 0; r < regions; ++r) unique[r + 1] += unique[r];

  const GridBuffers out = allocate(regions, unique[regions]);
#pragma omp parallel for schedule(dynamic, 4096) num_threads(threads)
  for (int64_t r = 0; r < regions; ++r)
    for (int64_t k = 0; k < unique[r + 1] - unique[r]; ++k) {
      const Run& run = bucket[start[r] + k];
      const int64_t e = unique[r] + k;
      out.edges[2 * e] = r;
      out.edges[2 * e + 1] = run.hi;
      out.edge_count[e] = run.count;
      out.edge_weight_sum[e] = run.weight;
    }
  std::vector<Run>().swap(bucket);

  std::vector<RegionStats> stats(regions, RegionStats{0, 0.0, 0.0});
  for (int64_t i = 0; i < n; ++i) {
    RegionStats& s = stats[labels[i]];
    const double v = image[i];
    ++s.count;
    s.sum += v;
    s.sq_sum += v * v;
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < regions; ++r) {
    out.region_count[r] = stats[r].count;
    out.region_sum[r] = stats[r].sum;
    out.region_sq_sum[r] = stats[r].sq_sum;
  }
}

}  // namespace pwk
