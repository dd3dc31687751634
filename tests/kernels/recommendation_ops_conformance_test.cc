// The conformance of the ops recommendation models added (docs/API.md, "Models with several
// inputs"): the sigmoid cross-entropy of binary models, column blocks of rows (a branch's part of
// its input), embedding lookups and their deterministic gradients, and DLRM's dot interaction,
// each against the float64 reference. Same fixture and backends as backend_conformance_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/embedding_uses.h"
#include "tests/kernels/backend_conformance.h"

namespace towerps::kernels {
namespace {

using testing::AllClose;
using testing::AnyNonZero;
using testing::RandomFloats;
using testing::ToDouble;

class RecommendationOpsConformanceTest : public BackendConformanceTest {};

TEST_P(RecommendationOpsConformanceTest, SigmoidCrossEntropy) {
  const int batch = 1031;  // more than one block of threads
  for (const float shift : {0.0f, 60.0f, -60.0f}) {
    SCOPED_TRACE(::testing::Message() << "shift " << shift);
    auto logits = RandomFloats(batch, rng_, 8.0f);
    for (float& l : logits) l += shift;
    std::vector<int32_t> labels(batch);
    for (int32_t& l : labels) l = testing::RandomInt(rng_, 0, 1);
    ASSERT_OK_AND_ASSIGN(auto lb, Put(logits));
    ASSERT_OK_AND_ASSIGN(auto lab, Put(labels));
    ASSERT_OK_AND_ASSIGN(auto loss, Filled(batch, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dl, Filled(batch, 9.0f));
    const float scale = 1.0f / batch;
    backend_->SigmoidCrossEntropy(batch, lb.data(), lab.data(), scale, loss.data(), dl.data());
    std::vector<double> loss_ref(batch), dl_ref(batch);
    ref_.SigmoidCrossEntropy(batch, ToDouble(logits).data(), labels.data(), scale, loss_ref.data(),
                             dl_ref.data());
    ASSERT_TRUE(AnyNonZero(loss_ref));
    EXPECT_TRUE(AllClose(Get(loss), loss_ref, 1e-5, 1e-6)) << "loss";
    EXPECT_TRUE(AllClose(Get(dl), dl_ref, 1e-5, 1e-7)) << "gradient";
    // Without a gradient, and with the gradient written over the logits.
    ASSERT_OK_AND_ASSIGN(auto loss2, Filled(batch, 9.0f));
    backend_->SigmoidCrossEntropy(batch, lb.data(), lab.data(), scale, loss2.data(), nullptr);
    EXPECT_EQ(Get(loss2), Get(loss));
    backend_->SigmoidCrossEntropy(batch, lb.data(), lab.data(), scale, loss2.data(), lb.data());
    EXPECT_TRUE(AllClose(Get(lb), dl_ref, 1e-5, 1e-7)) << "gradient over the logits";
  }
}

// Regression's loss: several outputs per example, with and without the gradient, and the
// gradient written over the outputs.
TEST_P(RecommendationOpsConformanceTest, SquaredError) {
  const int batch = 1031, width = 3;
  const auto outputs = RandomFloats(batch * width, rng_, 4.0f);
  const auto targets = RandomFloats(batch * width, rng_, 4.0f);
  ASSERT_OK_AND_ASSIGN(auto ob, Put(outputs));
  ASSERT_OK_AND_ASSIGN(auto tb, Put(targets));
  ASSERT_OK_AND_ASSIGN(auto loss, Filled(batch, 9.0f));
  ASSERT_OK_AND_ASSIGN(auto grad, Filled(batch * width, 9.0f));
  const float scale = 1.0f / batch;
  backend_->SquaredError(batch, width, ob.data(), tb.data(), scale, loss.data(), grad.data());
  std::vector<double> loss_ref(batch), grad_ref(batch * width);
  ref_.SquaredError(batch, width, ToDouble(outputs).data(), ToDouble(targets).data(), scale,
                    loss_ref.data(), grad_ref.data());
  ASSERT_TRUE(AnyNonZero(grad_ref));
  EXPECT_TRUE(AllClose(Get(loss), loss_ref, 1e-5, 1e-6)) << "loss";
  EXPECT_TRUE(AllClose(Get(grad), grad_ref, 1e-5, 1e-7)) << "gradient";
  ASSERT_OK_AND_ASSIGN(auto loss2, Filled(batch, 9.0f));
  backend_->SquaredError(batch, width, ob.data(), tb.data(), scale, loss2.data(), nullptr);
  EXPECT_EQ(Get(loss2), Get(loss));
  backend_->SquaredError(batch, width, ob.data(), tb.data(), scale, loss2.data(), ob.data());
  EXPECT_TRUE(AllClose(Get(ob), grad_ref, 1e-5, 1e-7)) << "gradient over the outputs";
}

TEST_P(RecommendationOpsConformanceTest, ColumnBlocks) {
  const int64_t rows = 37, x_stride = 29, y_stride = 41, width = 13;
  const auto x = RandomFloats(rows * x_stride, rng_), y0 = RandomFloats(rows * y_stride, rng_);
  ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
  // Columns 5..17 of x into columns 20..32 of y; the rest of y is untouched.
  ASSERT_OK_AND_ASSIGN(auto yb, Put(y0));
  backend_->CopyColumns(rows, width, xb.data() + 5, x_stride, yb.data() + 20, y_stride);
  std::vector<double> want = ToDouble(y0);
  ref_.CopyColumns(rows, width, ToDouble(x).data() + 5, x_stride, want.data() + 20, y_stride);
  EXPECT_TRUE(AllClose(Get(yb), want, 0, 0)) << "copy";
  backend_->AddColumns(rows, width, xb.data() + 5, x_stride, yb.data() + 20, y_stride);
  ref_.AddColumns(rows, width, ToDouble(x).data() + 5, x_stride, want.data() + 20, y_stride);
  EXPECT_TRUE(AllClose(Get(yb), want, 1e-6, 1e-7)) << "add";
  // Whole rows: one contiguous block.
  ASSERT_OK_AND_ASSIGN(auto whole, Filled(rows * x_stride, 9.0f));
  backend_->CopyColumns(rows, x_stride, xb.data(), x_stride, whole.data(), x_stride);
  EXPECT_EQ(Get(whole), x);
}

// A batch's lookups into few rows (so rows repeat) written at a column offset of wider rows, and
// the rows' gradients summed over their uses; embedding_uses.h's order checked on the way.
TEST_P(RecommendationOpsConformanceTest, Embedding) {
  const int batch = 67, fields = 5, dim = 7;
  const int64_t unique = 40, stride = 50, offset = 3;
  std::vector<uint32_t> index(static_cast<size_t>(batch) * fields);
  for (uint32_t& i : index) i = testing::RandomInt(rng_, 0, unique - 2);  // the last: unused
  std::vector<uint32_t> offsets, positions;
  kernels::EmbeddingUses(index.data(), std::ssize(index), unique, &offsets, &positions);
  ASSERT_EQ(offsets.back(), index.size());
  EXPECT_EQ(offsets[unique], offsets[unique - 1]);  // the unused row has no uses
  for (int64_t u = 0; u < unique; ++u) {
    for (uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) {
      EXPECT_EQ(index[positions[k]], u);
      if (k > offsets[u]) {
        EXPECT_LT(positions[k - 1], positions[k]);
      }
    }
  }
  const auto rows = RandomFloats(unique * dim, rng_), dy = RandomFloats(batch * stride, rng_);
  ASSERT_OK_AND_ASSIGN(auto rb, Put(rows));
  ASSERT_OK_AND_ASSIGN(auto ib, Put(index));
  ASSERT_OK_AND_ASSIGN(auto ob, Put(offsets));
  ASSERT_OK_AND_ASSIGN(auto pb, Put(positions));
  ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
  ASSERT_OK_AND_ASSIGN(auto y, Filled(batch * stride, 9.0f));
  ASSERT_OK_AND_ASSIGN(auto drows, Filled(unique * dim, 9.0f));
  backend_->EmbeddingForward(batch, fields, dim, rb.data(), ib.data(), y.data() + offset, stride);
  backend_->EmbeddingBackward(fields, dim, unique, ob.data(), pb.data(), dyb.data() + offset,
                              stride, drows.data());
  std::vector<double> y_ref(batch * stride, 9.0), drows_ref(unique * dim);
  ref_.EmbeddingForward(batch, fields, dim, ToDouble(rows).data(), index.data(),
                        y_ref.data() + offset, stride);
  ref_.EmbeddingBackward(fields, dim, unique, offsets.data(), positions.data(),
                         ToDouble(dy).data() + offset, stride, drows_ref.data());
  EXPECT_TRUE(AllClose(Get(y), y_ref, 0, 0)) << "forward";
  EXPECT_TRUE(AllClose(Get(drows), drows_ref, 1e-5, 1e-6)) << "backward";
  for (int j = 0; j < dim; ++j) EXPECT_EQ(Get(drows)[(unique - 1) * dim + j], 0.0f);
  // Twice the same: the sums' order is fixed.
  ASSERT_OK_AND_ASSIGN(auto again, Filled(unique * dim, 1.0f));
  backend_->EmbeddingBackward(fields, dim, unique, ob.data(), pb.data(), dyb.data() + offset,
                              stride, again.data());
  EXPECT_EQ(Get(again), Get(drows));
}

// Multi-hot bags of 0 to 9 ids (empty bags and ids repeated within a bag among them), summed
// and averaged, at a column offset of wider rows; BagUses' order checked on the way.
TEST_P(RecommendationOpsConformanceTest, EmbeddingBag) {
  const int batch = 71, dim = 9;
  const int64_t unique = 30, stride = 20, offset = 4;
  std::vector<uint32_t> bags = {0};
  for (int b = 0; b < batch; ++b) bags.push_back(bags.back() + testing::RandomInt(rng_, 0, 9));
  bags[5] = bags[4];  // example 4's bag is empty, whatever the draw
  for (size_t b = 5; b < bags.size(); ++b) bags[b] = std::max(bags[b], bags[b - 1]);
  std::vector<uint32_t> index(bags.back());
  for (uint32_t& i : index) i = testing::RandomInt(rng_, 0, unique - 2);  // the last: unused
  std::vector<uint32_t> offsets, examples;
  kernels::BagUses(index.data(), bags.data(), batch, unique, &offsets, &examples);
  ASSERT_EQ(offsets.back(), index.size());
  for (int64_t u = 0; u < unique; ++u) {
    for (uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) {
      if (k > offsets[u]) {
        EXPECT_LE(examples[k - 1], examples[k]);
      }
    }
  }
  const auto rows = RandomFloats(unique * dim, rng_), dy = RandomFloats(batch * stride, rng_);
  ASSERT_OK_AND_ASSIGN(auto rb, Put(rows));
  ASSERT_OK_AND_ASSIGN(auto ib, Put(index));
  ASSERT_OK_AND_ASSIGN(auto bb, Put(bags));
  ASSERT_OK_AND_ASSIGN(auto ob, Put(offsets));
  ASSERT_OK_AND_ASSIGN(auto eb, Put(examples));
  ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
  for (const bool mean : {false, true}) {
    SCOPED_TRACE(mean ? "mean" : "sum");
    ASSERT_OK_AND_ASSIGN(auto y, Filled(batch * stride, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto drows, Filled(unique * dim, 9.0f));
    backend_->EmbeddingBagForward(batch, dim, rb.data(), ib.data(), bb.data(), mean,
                                  y.data() + offset, stride);
    backend_->EmbeddingBagBackward(dim, unique, ob.data(), eb.data(), bb.data(), mean,
                                   dyb.data() + offset, stride, drows.data());
    std::vector<double> y_ref(batch * stride, 9.0), drows_ref(unique * dim);
    ref_.EmbeddingBagForward(batch, dim, ToDouble(rows).data(), index.data(), bags.data(), mean,
                             y_ref.data() + offset, stride);
    ref_.EmbeddingBagBackward(dim, unique, offsets.data(), examples.data(), bags.data(), mean,
                              ToDouble(dy).data() + offset, stride, drows_ref.data());
    ASSERT_TRUE(AnyNonZero(drows_ref));
    EXPECT_TRUE(AllClose(Get(y), y_ref, 1e-5, 1e-6)) << "forward";
    EXPECT_TRUE(AllClose(Get(drows), drows_ref, 1e-5, 1e-6)) << "backward";
    for (int j = 0; j < dim; ++j) {
      EXPECT_EQ(Get(y)[4 * stride + offset + j], 0.0f) << "the empty bag";
      EXPECT_EQ(Get(drows)[(unique - 1) * dim + j], 0.0f) << "the unused row";
    }
    ASSERT_OK_AND_ASSIGN(auto again, Filled(unique * dim, 1.0f));
    backend_->EmbeddingBagBackward(dim, unique, ob.data(), eb.data(), bb.data(), mean,
                                   dyb.data() + offset, stride, again.data());
    EXPECT_EQ(Get(again), Get(drows)) << "the sums' order is fixed";
  }
}

TEST_P(RecommendationOpsConformanceTest, DotInteraction) {
  struct Case {
    int batch, k, d;
  };
  // DLRM's small shape (27 vectors of 16), one vector (no pairs), and odd sizes.
  for (const Case& c : {Case{33, 27, 16}, Case{4, 1, 8}, Case{7, 5, 3}}) {
    SCOPED_TRACE(::testing::Message() << c.batch << "x" << c.k << "x" << c.d);
    const int64_t in = int64_t{c.batch} * c.k * c.d;
    const int64_t out = c.batch * (c.d + int64_t{c.k} * (c.k - 1) / 2);
    const auto x = RandomFloats(in, rng_), dy = RandomFloats(out, rng_);
    ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
    ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
    ASSERT_OK_AND_ASSIGN(auto y, Filled(out, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dx, Filled(in, 9.0f));
    backend_->DotInteractionForward(c.batch, c.k, c.d, xb.data(), y.data());
    backend_->DotInteractionBackward(c.batch, c.k, c.d, xb.data(), dyb.data(), dx.data());
    std::vector<double> y_ref(out), dx_ref(in);
    ref_.DotInteractionForward(c.batch, c.k, c.d, ToDouble(x).data(), y_ref.data());
    ref_.DotInteractionBackward(c.batch, c.k, c.d, ToDouble(x).data(), ToDouble(dy).data(),
                                dx_ref.data());
    ASSERT_TRUE(AnyNonZero(dx_ref));
    EXPECT_TRUE(AllClose(Get(y), y_ref, 1e-5, 1e-6)) << "forward";
    EXPECT_TRUE(AllClose(Get(dx), dx_ref, 1e-5, 1e-6)) << "backward";
  }
}

TOWERPS_INSTANTIATE_ON_EVERY_BACKEND(RecommendationOpsConformanceTest);

}  // namespace
}  // namespace towerps::kernels
