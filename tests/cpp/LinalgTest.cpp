// The LU lowering on complex values runs on the plugin alone (no torch): pivots are chosen by |re| + |im| (BLAS's
// cabs1, as LAPACK's izamax), P A = L U holds, and an adjoint solve solves A^H x = b.
#include <complex>

#include "TestPlugin.h"
#include "csrc/hlo/Builder.h"
#include "csrc/lowering/Linalg.h"

using namespace tpu;
using hlo::DType;
using C = std::complex<double>;

namespace {

// Row 0 has the larger modulus in column 0 (1.5 > |0.9 + 0.9i| = 1.27), row 1 the larger |re| + |im| (1.8).
const std::vector<C> kA = {C(1.5, 0.0), C(1.0, 0.0), C(0.9, 0.9), C(2.0, -1.0)};

C at(const std::vector<C>& m, int i, int j) { return m[i * 2 + j]; }

}  // namespace

TEST(Linalg, ComplexLuPivotsOnCabs1AndReconstructs) {
  hlo::Builder b;
  auto a = b.parameter(hlo::Type{DType::C128, {2, 2}});
  auto r = lowering::luFactor(b, a);
  std::vector<hlo::Value> outs{r.lu, r.pivots, r.info};
  b.ret(outs);
  auto& client = testRuntime().client();
  auto exe = client.compile(b.module(), pjrt::CompileOptions{});
  auto buf = client.bufferFromHost(kA.data(), pjrt::ElementType::C128, {2, 2}, 0);
  auto res = exe->execute({buf->raw()}, client.devices()[0]);
  auto lu = toHost<C>(*res[0], 4);
  auto piv = toHost<int32_t>(*res[1], 2);
  auto info = toHost<int32_t>(*res[2], 1);
  EXPECT_EQ(piv[0], 2);  // |z| would keep row 0 (pivot 1)
  EXPECT_EQ(piv[1], 2);
  EXPECT_EQ(info[0], 0);
  // P A = L U with rows swapped: L = [[1, 0], [l, 1]], U = [[u00, u01], [0, u11]].
  C l = at(lu, 1, 0), u00 = at(lu, 0, 0), u01 = at(lu, 0, 1), u11 = at(lu, 1, 1);
  EXPECT_LT(std::abs(u00 - at(kA, 1, 0)), 1e-14);
  EXPECT_LT(std::abs(u01 - at(kA, 1, 1)), 1e-14);
  EXPECT_LT(std::abs(l * u00 - at(kA, 0, 0)), 1e-14);
  EXPECT_LT(std::abs(l * u01 + u11 - at(kA, 0, 1)), 1e-14);
}

TEST(Linalg, ComplexAdjointSolve) {
  hlo::Builder b;
  auto a = b.parameter(hlo::Type{DType::C128, {2, 2}});
  auto rhs = b.parameter(hlo::Type{DType::C128, {2, 1}});
  auto r = lowering::luFactor(b, a);
  std::vector<hlo::Value> outs{lowering::luSolve(b, r.lu, r.perm, rhs, /*adjoint=*/true)};
  b.ret(outs);
  auto& client = testRuntime().client();
  auto exe = client.compile(b.module(), pjrt::CompileOptions{});
  std::vector<C> bv = {C(1.0, 2.0), C(-0.5, 0.25)};
  auto ab = client.bufferFromHost(kA.data(), pjrt::ElementType::C128, {2, 2}, 0);
  auto bb = client.bufferFromHost(bv.data(), pjrt::ElementType::C128, {2, 1}, 0);
  auto res = exe->execute({ab->raw(), bb->raw()}, client.devices()[0]);
  auto x = toHost<C>(*res[0], 2);
  // A^H x = b: (A^H)[i][j] = conj(A[j][i]).
  for (int i = 0; i < 2; ++i) {
    C s = std::conj(at(kA, 0, i)) * x[0] + std::conj(at(kA, 1, i)) * x[1];
    EXPECT_LT(std::abs(s - bv[i]), 1e-14) << i;
  }
}
