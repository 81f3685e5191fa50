// The decomposition and RNN-cell lowerings run on the plugin alone (no torch): QR, eigh and SVD
// reconstruct their input with orthonormal factors; the LSTM cell matches its formula.
#include <cmath>

#include "TestPlugin.h"
#include "csrc/hlo/Builder.h"
#include "csrc/lowering/Decomp.h"
#include "csrc/lowering/Rnn.h"

using namespace tpu;
using hlo::DType;

namespace {

using Mat = std::vector<double>;  // row-major

// Builds @main(a [m, n] f64) -> build(a) and runs it on `in`.
template <class Build>
std::vector<Mat> run(int64_t m, int64_t n, const Mat& in, Build&& build, std::vector<size_t> sizes) {
  hlo::Builder b;
  auto a = b.parameter(hlo::Type{DType::F64, {m, n}});
  std::vector<hlo::Value> outs = build(b, a);
  b.ret(outs);
  auto& client = testRuntime().client();
  auto exe = client.compile(b.module(), pjrt::CompileOptions{});
  auto buf = client.bufferFromHost(in.data(), pjrt::ElementType::F64, {m, n}, 0);
  auto res = exe->execute({buf->raw()}, client.devices()[0]);
  std::vector<Mat> r;
  for (size_t i = 0; i < sizes.size(); ++i) r.push_back(toHost<double>(*res[i], sizes[i]));
  return r;
}

Mat matmul(const Mat& x, const Mat& y, int64_t m, int64_t k, int64_t n) {
  Mat r(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l) r[i * n + j] += x[i * k + l] * y[l * n + j];
  return r;
}
Mat transpose(const Mat& x, int64_t m, int64_t n) {
  Mat r(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) r[j * m + i] = x[i * n + j];
  return r;
}
void expectIdentity(const Mat& x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(x[i * n + j], i == j ? 1.0 : 0.0, 1e-12) << i << "," << j;
}
void expectNear(const Mat& a, const Mat& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << i;
}

const Mat kA = {1.0, -2.0, 0.5, 3.0, 0.25, -1.0, 2.0, 1.5, 4.0, -0.5, 0.75, 1.25};  // 4 x 3

}  // namespace

TEST(Decomp, HouseholderQrReconstructs) {
  auto r = run(4, 3, kA, [](hlo::Builder& b, hlo::Value a) {
    auto [q, rr] = lowering::householderQr(b, a);
    return std::vector<hlo::Value>{q, rr};
  }, {16, 12});
  const Mat &Q = r[0], &R = r[1];
  expectIdentity(matmul(transpose(Q, 4, 4), Q, 4, 4, 4), 4);
  expectNear(matmul(Q, R, 4, 4, 3), kA);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < std::min<int64_t>(i, 3); ++j) EXPECT_EQ(R[i * 3 + j], 0.0) << i << "," << j;
  EXPECT_LT(R[0], 0.0);  // dlarfg: beta = -sign(a00) |x|
}

TEST(Decomp, JacobiEighIsAscendingAndDiagonalises) {
  Mat s = {4.0, 1.0, -2.0, 1.0, 2.0, 0.5, -2.0, 0.5, -3.0};
  auto r = run(3, 3, s, [](hlo::Builder& b, hlo::Value a) {
    auto [w, v] = lowering::eighJacobi(b, a, true);
    return std::vector<hlo::Value>{w, v};
  }, {3, 9});
  const Mat &w = r[0], &V = r[1];
  EXPECT_LE(w[0], w[1]);
  EXPECT_LE(w[1], w[2]);
  expectIdentity(matmul(transpose(V, 3, 3), V, 3, 3, 3), 3);
  Mat D(9, 0.0);
  for (int i = 0; i < 3; ++i) D[i * 4] = w[i];
  expectNear(matmul(matmul(V, D, 3, 3, 3), transpose(V, 3, 3), 3, 3, 3), s);
  EXPECT_NEAR(w[0] + w[1] + w[2], 3.0, 1e-12);  // trace
}

TEST(Decomp, JacobiSvdReconstructsWideAndTall) {
  for (bool wide : {false, true}) {
    int64_t m = wide ? 3 : 4, n = wide ? 4 : 3;
    Mat a = wide ? transpose(kA, 4, 3) : kA;
    auto r = run(m, n, a, [](hlo::Builder& b, hlo::Value x) {
      lowering::SvdResult s = lowering::svdJacobi(b, x, true);
      return std::vector<hlo::Value>{s.u, s.s, s.v};
    }, {static_cast<size_t>(m * m), 3, static_cast<size_t>(n * n)});
    const Mat &U = r[0], &S = r[1], &V = r[2];
    EXPECT_GE(S[0], S[1]);
    EXPECT_GE(S[1], S[2]);
    expectIdentity(matmul(transpose(U, m, m), U, m, m, m), m);
    expectIdentity(matmul(transpose(V, n, n), V, n, n, n), n);
    Mat Sm(m * n, 0.0);
    for (int i = 0; i < 3; ++i) Sm[i * n + i] = S[i];
    expectNear(matmul(matmul(U, Sm, m, m, n), transpose(V, n, n), m, n, n), a);
  }
}

TEST(Rnn, LstmCellMatchesItsFormula) {
  // Gates (1, 4): input + hidden gates, no biases; cx = 0.5.
  Mat ig = {0.1, -0.2, 0.3, 0.4}, hg = {0.05, 0.1, -0.1, 0.2};
  hlo::Builder b;
  auto i = b.parameter(hlo::Type{DType::F64, {1, 4}});
  auto h = b.parameter(hlo::Type{DType::F64, {1, 4}});
  auto c = b.parameter(hlo::Type{DType::F64, {1, 1}});
  auto outs = lowering::lstmCell(b, i, h, c, nullptr, nullptr);
  b.ret(outs);
  auto& client = testRuntime().client();
  auto exe = client.compile(b.module(), pjrt::CompileOptions{});
  double cx = 0.5;
  auto bi = client.bufferFromHost(ig.data(), pjrt::ElementType::F64, {1, 4}, 0);
  auto bh = client.bufferFromHost(hg.data(), pjrt::ElementType::F64, {1, 4}, 0);
  auto bc = client.bufferFromHost(&cx, pjrt::ElementType::F64, {1, 1}, 0);
  auto res = exe->execute({bi->raw(), bh->raw(), bc->raw()}, client.devices()[0]);
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  double gi = sig(ig[0] + hg[0]), gf = sig(ig[1] + hg[1]), gg = std::tanh(ig[2] + hg[2]), go = sig(ig[3] + hg[3]);
  double cy = gf * cx + gi * gg;
  EXPECT_NEAR(toHost<double>(*res[0], 1)[0], go * std::tanh(cy), 1e-12);
  EXPECT_NEAR(toHost<double>(*res[1], 1)[0], cy, 1e-12);
  Mat ws = toHost<double>(*res[2], 4);
  EXPECT_NEAR(ws[0], gi, 1e-12);
  EXPECT_NEAR(ws[3], go, 1e-12);
}
