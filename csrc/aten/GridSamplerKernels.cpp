// grid_sampler_2d / grid_sampler_3d and their backwards (F.grid_sample on 4-d and 5-d input), composed of tpu ops with ATen's
// GridSampler.h rules: unnormalize (align_corners), border clipping and reflection (with the gradient of
// each), bilinear, nearest (round half to even, as nearbyint) and bicubic (A = -0.75, each of the 16 taps
// padded on its own) interpolation. Corners are read with a gather on the flattened (H*W) plane and the
// input gradient is a scatter_add into it.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tpu::aten {
namespace {

constexpr int64_t kBilinear = 0, kNearest = 1, kBicubic = 2;
constexpr int64_t kZeros = 0, kBorder = 1, kReflection = 2;

struct Coord {
  at::Tensor x, grad;  // source coordinate and d(coordinate)/d(grid value)
};

// d|x - m| chain through fmod/floor of ATen's reflect_coordinates_set_grad.
Coord reflect(const at::Tensor& in, double twiceLow, double twiceHigh) {
  if (twiceLow == twiceHigh) return {at::zeros_like(in), at::zeros_like(in)};
  double mn = twiceLow / 2, span = (twiceHigh - twiceLow) / 2;
  at::Tensor d = in - mn;
  at::Tensor sign = at::where(d < 0, -1.0, at::ones({}, in.options()));
  at::Tensor a = d.abs();
  at::Tensor extra = at::fmod(a, span), flips = at::floor(a / span);
  at::Tensor even = at::fmod(flips, 2) == 0;
  at::Tensor x = at::where(even, extra + mn, span - extra + mn);
  return {x, at::where(even, sign, -sign)};
}

Coord clip(const Coord& c, int64_t size) {
  double hi = static_cast<double>(size - 1);
  at::Tensor inside = (c.x > 0) & (c.x < hi);
  return {c.x.clamp(0, hi), at::where(inside, c.grad, at::zeros({}, c.grad.options()))};
}

// Source coordinate along one axis of `size` pixels from normalised grid values in [-1, 1].
Coord pad(Coord c, int64_t size, int64_t padding, bool align) {
  double s = static_cast<double>(size);
  if (padding == kBorder) {
    c = clip(c, size);
  } else if (padding == kReflection) {
    Coord r = align ? reflect(c.x, 0, 2 * (s - 1)) : reflect(c.x, -1, 2 * s - 1);
    c = clip({r.x, c.grad * r.grad}, size);
  }
  return c;
}
// Bicubic pads each of its taps instead (ATen's get_value_bounded), so only unnormalise it.
Coord sourceIndex(const at::Tensor& g, int64_t size, int64_t padding, bool align, bool bicubic) {
  double s = static_cast<double>(size);
  Coord c = align ? Coord{(g + 1) / 2 * (s - 1), at::full_like(g, (s - 1) / 2)}
                  : Coord{((g + 1) * s - 1) / 2, at::full_like(g, s / 2)};
  return bicubic ? c : pad(c, size, padding, align);
}

struct Plan {
  at::Tensor flat;  // input as (N, C, H*W)
  int64_t n, ch, h, w, ho, wo;
  Coord ix, iy;  // (N, Ho*Wo)
  int64_t padding;
  bool align;
};

Plan plan(const at::Tensor& input, const at::Tensor& grid, int64_t interp, int64_t padding, bool align) {
  TORCH_CHECK(input.dim() == 4 && grid.dim() == 4 && grid.size(3) == 2 && grid.size(0) == input.size(0),
              "grid_sampler_2d(): expected 4D input and grid (N, H, W, 2) with the same batch size, but got input "
              "with sizes ", input.sizes(), " and grid with sizes ", grid.sizes());
  TORCH_CHECK(input.scalar_type() == grid.scalar_type(), "grid_sampler(): expected input and grid to have same "
              "dtype, but input has ", input.scalar_type(), " and grid has ", grid.scalar_type());
  TORCH_CHECK(interp == kBilinear || interp == kNearest || interp == kBicubic,
              "grid_sampler_2d: unknown interpolation mode ", interp);
  TORCH_CHECK(padding >= kZeros && padding <= kReflection, "grid_sampler_2d: unknown padding mode ", padding);
  Plan p;
  p.n = input.size(0), p.ch = input.size(1), p.h = input.size(2), p.w = input.size(3);
  p.ho = grid.size(1), p.wo = grid.size(2);
  p.flat = input.reshape({p.n, p.ch, p.h * p.w});
  at::Tensor g = grid.reshape({p.n, p.ho * p.wo, 2});
  p.ix = sourceIndex(g.select(2, 0), p.w, padding, align, interp == kBicubic);
  p.iy = sourceIndex(g.select(2, 1), p.h, padding, align, interp == kBicubic);
  p.padding = padding, p.align = align;
  return p;
}

struct Corner {
  at::Tensor lin;    // (N, C, L) flat index, clamped into range
  at::Tensor valid;  // (N, 1, L)
};
Corner corner(const Plan& p, const at::Tensor& xi, const at::Tensor& yi) {
  at::Tensor valid = (xi >= 0) & (xi < p.w) & (yi >= 0) & (yi < p.h);
  at::Tensor lin = at::where(valid, yi * p.w + xi, 0).unsqueeze(1).expand({p.n, p.ch, xi.size(1)});
  return {lin, valid.unsqueeze(1)};
}
at::Tensor read(const Plan& p, const Corner& c) {
  return at::where(c.valid, p.flat.gather(2, c.lin), at::zeros({}, p.flat.options()));
}

struct Bilinear {
  Corner nw, ne, sw, se;
  at::Tensor x0, y0, fx, fy;  // fx = ix - x0 (N, 1, L)
};
Bilinear bilinear(const Plan& p) {
  at::Tensor x0f = at::floor(p.ix.x), y0f = at::floor(p.iy.x);
  at::Tensor x0 = x0f.to(at::kLong), y0 = y0f.to(at::kLong);
  return {corner(p, x0, y0), corner(p, x0 + 1, y0), corner(p, x0, y0 + 1), corner(p, x0 + 1, y0 + 1), x0, y0,
          (p.ix.x - x0f).unsqueeze(1), (p.iy.x - y0f).unsqueeze(1)};
}

Corner nearest(const Plan& p) {
  return corner(p, at::round(p.ix.x).to(at::kLong), at::round(p.iy.x).to(at::kLong));
}

// ---- bicubic (A = -0.75, ATen's cubic convolution) ----
constexpr double kA = -0.75;
std::array<at::Tensor, 4> cubicWeights(const at::Tensor& t) {
  auto c1 = [](const at::Tensor& x) { return ((kA + 2) * x - (kA + 3)) * x * x + 1; };
  auto c2 = [](const at::Tensor& x) { return ((kA * x - 5 * kA) * x + 8 * kA) * x - 4 * kA; };
  at::Tensor u = 1 - t;
  return {c2(t + 1), c1(t), c1(u), c2(u + 1)};
}
// d(weight)/dt: ATen's coefficient gradients are taken w.r.t. the tap distance x = k - t (it subtracts them).
std::array<at::Tensor, 4> cubicWeightsGrad(const at::Tensor& t) {
  at::Tensor x0 = -1 - t, x1 = -t, x2 = 1 - t, x3 = 2 - t;
  return {-((-3 * kA * x0 - 10 * kA) * x0 - 8 * kA), -((-3 * (kA + 2) * x1 - 2 * (kA + 3)) * x1),
          -((3 * (kA + 2) * x2 - 2 * (kA + 3)) * x2), -((3 * kA * x3 - 10 * kA) * x3 + 8 * kA)};
}
struct Bicubic {
  std::array<at::Tensor, 4> wx, wy, dwx, dwy;  // (N, 1, L)
  std::array<at::Tensor, 4> xs, ys;            // padded integer tap coordinates (N, L)
};
Bicubic bicubic(const Plan& p) {
  at::Tensor x0 = at::floor(p.ix.x), y0 = at::floor(p.iy.x);
  at::Tensor tx = p.ix.x - x0, ty = p.iy.x - y0;
  Bicubic r;
  r.wx = cubicWeights(tx.unsqueeze(1)), r.wy = cubicWeights(ty.unsqueeze(1));
  r.dwx = cubicWeightsGrad(tx.unsqueeze(1)), r.dwy = cubicWeightsGrad(ty.unsqueeze(1));
  for (int k = 0; k < 4; ++k) {
    at::Tensor xk = x0 + (k - 1), yk = y0 + (k - 1);
    r.xs[k] = pad({xk, at::ones_like(xk)}, p.w, p.padding, p.align).x.to(at::kLong);
    r.ys[k] = pad({yk, at::ones_like(yk)}, p.h, p.padding, p.align).x.to(at::kLong);
  }
  return r;
}

at::Tensor gridSampler(const at::Tensor& input, const at::Tensor& grid, int64_t interp, int64_t padding,
                       bool align) {
  Plan p = plan(input, grid, interp, padding, align);
  at::Tensor out;
  if (interp == kNearest) {
    out = read(p, nearest(p));
  } else if (interp == kBicubic) {
    Bicubic c = bicubic(p);
    for (int i = 0; i < 4; ++i) {
      at::Tensor rowSum;
      for (int j = 0; j < 4; ++j) {
        at::Tensor v = read(p, corner(p, c.xs[j], c.ys[i])) * c.wx[j];
        rowSum = j == 0 ? v : rowSum + v;
      }
      out = i == 0 ? rowSum * c.wy[i] : out + rowSum * c.wy[i];
    }
  } else {
    Bilinear b = bilinear(p);
    at::Tensor gx = 1 - b.fx, gy = 1 - b.fy;
    out = read(p, b.nw) * (gx * gy) + read(p, b.ne) * (b.fx * gy) + read(p, b.sw) * (gx * b.fy) +
          read(p, b.se) * (b.fx * b.fy);
  }
  return out.reshape({p.n, p.ch, p.ho, p.wo});
}

std::tuple<at::Tensor, at::Tensor> gridSamplerBackward(const at::Tensor& gradOut, const at::Tensor& input,
                                                       const at::Tensor& grid, int64_t interp, int64_t padding,
                                                       bool align, std::array<bool, 2> mask) {
  Plan p = plan(input, grid, interp, padding, align);
  at::Tensor g = gradOut.reshape({p.n, p.ch, p.ho * p.wo});
  at::Tensor gi = mask[0] ? at::zeros({p.n, p.ch, p.h * p.w}, input.options()) : at::Tensor();
  at::Tensor zero = at::zeros({}, input.options());
  auto add = [&](const Corner& c, const at::Tensor& wgt) {
    gi = gi.scatter_add(2, c.lin, at::where(c.valid, g * wgt, zero));
  };
  if (interp == kNearest) {
    if (mask[0]) add(nearest(p), at::ones({}, input.options()));
    return {mask[0] ? gi.reshape(input.sizes()) : gi, mask[1] ? at::zeros_like(grid) : at::Tensor()};
  }
  if (interp == kBicubic) {
    Bicubic c = bicubic(p);
    at::Tensor gix = at::zeros({p.n, 1, p.ho * p.wo}, input.options()), giy = gix;
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        Corner k = corner(p, c.xs[j], c.ys[i]);
        if (mask[0]) add(k, c.wx[j] * c.wy[i]);
        if (mask[1]) {
          at::Tensor vg = (read(p, k) * g).sum(1, true);
          gix = gix + vg * c.dwx[j] * c.wy[i];
          giy = giy + vg * c.wx[j] * c.dwy[i];
        }
      }
    }
    at::Tensor gg;
    if (mask[1]) gg = at::stack({gix.squeeze(1) * p.ix.grad, giy.squeeze(1) * p.iy.grad}, 2).reshape(grid.sizes());
    return {mask[0] ? gi.reshape(input.sizes()) : gi, gg};
  }
  Bilinear b = bilinear(p);
  at::Tensor gx = 1 - b.fx, gy = 1 - b.fy;
  if (mask[0]) {
    add(b.nw, gx * gy);
    add(b.ne, b.fx * gy);
    add(b.sw, gx * b.fy);
    add(b.se, b.fx * b.fy);
  }
  at::Tensor gg;
  if (mask[1]) {
    at::Tensor vnw = read(p, b.nw), vne = read(p, b.ne), vsw = read(p, b.sw), vse = read(p, b.se);
    at::Tensor dx = ((vne - vnw) * gy + (vse - vsw) * b.fy) * g;
    at::Tensor dy = ((vsw - vnw) * gx + (vse - vne) * b.fx) * g;
    at::Tensor gix = dx.sum(1) * p.ix.grad, giy = dy.sum(1) * p.iy.grad;
    gg = at::stack({gix, giy}, 2).reshape(grid.sizes());
  }
  return {mask[0] ? gi.reshape(input.sizes()) : gi, gg};
}

// ---- grid_sampler_3d: trilinear and nearest on (N, C, D, H, W), grid (N, Do, Ho, Wo, 3) = (x, y, z) ----

struct Plan3 {
  at::Tensor flat;  // (N, C, D*H*W)
  int64_t n, ch, d, h, w;
  std::vector<int64_t> outShape;
  Coord ix, iy, iz;  // (N, L)
};

Plan3 plan3(const at::Tensor& input, const at::Tensor& grid, int64_t interp, int64_t padding, bool align) {
  TORCH_CHECK(input.dim() == 5 && grid.dim() == 5 && grid.size(4) == 3 && grid.size(0) == input.size(0),
              "grid_sampler_3d(): expected 5D input and grid (N, D, H, W, 3) with the same batch size, but got "
              "input with sizes ", input.sizes(), " and grid with sizes ", grid.sizes());
  TORCH_CHECK(input.scalar_type() == grid.scalar_type(), "grid_sampler(): expected input and grid to have same "
              "dtype, but input has ", input.scalar_type(), " and grid has ", grid.scalar_type());
  TORCH_CHECK(interp == kBilinear || interp == kNearest, "grid_sampler(): bicubic interpolation only supports 4D "
              "input");
  Plan3 p;
  p.n = input.size(0), p.ch = input.size(1), p.d = input.size(2), p.h = input.size(3), p.w = input.size(4);
  p.outShape = {p.n, p.ch, grid.size(1), grid.size(2), grid.size(3)};
  int64_t l = grid.size(1) * grid.size(2) * grid.size(3);
  p.flat = input.reshape({p.n, p.ch, p.d * p.h * p.w});
  at::Tensor g = grid.reshape({p.n, l, 3});
  p.ix = sourceIndex(g.select(2, 0), p.w, padding, align, false);
  p.iy = sourceIndex(g.select(2, 1), p.h, padding, align, false);
  p.iz = sourceIndex(g.select(2, 2), p.d, padding, align, false);
  return p;
}

Corner corner3(const Plan3& p, const at::Tensor& xi, const at::Tensor& yi, const at::Tensor& zi) {
  at::Tensor valid = (xi >= 0) & (xi < p.w) & (yi >= 0) & (yi < p.h) & (zi >= 0) & (zi < p.d);
  at::Tensor lin = at::where(valid, (zi * p.h + yi) * p.w + xi, 0).unsqueeze(1).expand({p.n, p.ch, xi.size(1)});
  return {lin, valid.unsqueeze(1)};
}
at::Tensor read3(const Plan3& p, const Corner& c) {
  return at::where(c.valid, p.flat.gather(2, c.lin), at::zeros({}, p.flat.options()));
}

// The 8 corners with their weights and the weights' derivatives along x, y, z.
struct Tri {
  Corner c[8];
  at::Tensor w[8], dx[8], dy[8], dz[8];  // (N, 1, L)
};
Tri trilinear(const Plan3& p) {
  at::Tensor x0f = at::floor(p.ix.x), y0f = at::floor(p.iy.x), z0f = at::floor(p.iz.x);
  at::Tensor fx = (p.ix.x - x0f).unsqueeze(1), fy = (p.iy.x - y0f).unsqueeze(1), fz = (p.iz.x - z0f).unsqueeze(1);
  at::Tensor x0 = x0f.to(at::kLong), y0 = y0f.to(at::kLong), z0 = z0f.to(at::kLong);
  Tri t;
  for (int k = 0; k < 8; ++k) {
    int bx = k & 1, by = (k >> 1) & 1, bz = (k >> 2) & 1;
    at::Tensor wx = bx ? fx : 1 - fx, wy = by ? fy : 1 - fy, wz = bz ? fz : 1 - fz;
    double sx = bx ? 1 : -1, sy = by ? 1 : -1, sz = bz ? 1 : -1;
    t.c[k] = corner3(p, x0 + bx, y0 + by, z0 + bz);
    t.w[k] = wx * wy * wz;
    t.dx[k] = sx * wy * wz, t.dy[k] = sy * wx * wz, t.dz[k] = sz * wx * wy;
  }
  return t;
}

at::Tensor gridSampler3d(const at::Tensor& input, const at::Tensor& grid, int64_t interp, int64_t padding,
                         bool align) {
  Plan3 p = plan3(input, grid, interp, padding, align);
  at::Tensor out;
  if (interp == kNearest) {
    out = read3(p, corner3(p, at::round(p.ix.x).to(at::kLong), at::round(p.iy.x).to(at::kLong),
                           at::round(p.iz.x).to(at::kLong)));
  } else {
    Tri t = trilinear(p);
    for (int k = 0; k < 8; ++k) out = k == 0 ? read3(p, t.c[k]) * t.w[k] : out + read3(p, t.c[k]) * t.w[k];
  }
  return out.reshape(p.outShape);
}

std::tuple<at::Tensor, at::Tensor> gridSampler3dBackward(const at::Tensor& gradOut, const at::Tensor& input,
                                                         const at::Tensor& grid, int64_t interp, int64_t padding,
                                                         bool align, std::array<bool, 2> mask) {
  Plan3 p = plan3(input, grid, interp, padding, align);
  at::Tensor g = gradOut.reshape({p.n, p.ch, -1});
  at::Tensor zero = at::zeros({}, input.options());
  at::Tensor gi = mask[0] ? at::zeros({p.n, p.ch, p.d * p.h * p.w}, input.options()) : at::Tensor();
  auto add = [&](const Corner& c, const at::Tensor& wgt) {
    gi = gi.scatter_add(2, c.lin, at::where(c.valid, g * wgt, zero));
  };
  if (interp == kNearest) {
    if (mask[0]) {
      add(corner3(p, at::round(p.ix.x).to(at::kLong), at::round(p.iy.x).to(at::kLong),
                  at::round(p.iz.x).to(at::kLong)),
          at::ones({}, input.options()));
    }
    return {mask[0] ? gi.reshape(input.sizes()) : gi, mask[1] ? at::zeros_like(grid) : at::Tensor()};
  }
  Tri t = trilinear(p);
  at::Tensor gx, gy, gz;
  for (int k = 0; k < 8; ++k) {
    if (mask[0]) add(t.c[k], t.w[k]);
    if (mask[1]) {
      at::Tensor vg = read3(p, t.c[k]) * g;
      at::Tensor ax = (vg * t.dx[k]).sum(1), ay = (vg * t.dy[k]).sum(1), az = (vg * t.dz[k]).sum(1);
      gx = k == 0 ? ax : gx + ax, gy = k == 0 ? ay : gy + ay, gz = k == 0 ? az : gz + az;
    }
  }
  at::Tensor gg;
  if (mask[1]) gg = at::stack({gx * p.ix.grad, gy * p.iy.grad, gz * p.iz.grad}, 2).reshape(grid.sizes());
  return {mask[0] ? gi.reshape(input.sizes()) : gi, gg};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("grid_sampler_2d", gridSampler);
  m.impl("grid_sampler_2d_backward", gridSamplerBackward);
  m.impl("grid_sampler_3d", gridSampler3d);
  m.impl("grid_sampler_3d_backward", gridSampler3dBackward);
}

}  // namespace tpu::aten
