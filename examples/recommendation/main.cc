// A recommendation model defined out of tree: DLRM with a concatenation instead of the dot
// interaction (DLRM's "cat" interaction), on Criteo's features. The stock registry brings the
// criteo dataset and the zoo; this binary adds the model, with a flag of its own for the
// tables' dimension:
//
//   towerps-launch --worker-bin build/ctr-worker --model dlrm_cat --dataset criteo --data-dir D
//       --embedding-dim 8
#include <string>
#include <vector>

#include <towerps/towerps.h>

namespace {

// 13 dense features through a bottom MLP; 26 categorical fields, one table each; the bottom
// output and the 26 rows side by side; a top MLP and one logit, trained with the log loss.
towerps::ModelBuilder DlrmCat(const towerps::UserOptions& options) {
  const int dim = std::stoi(options.at("embedding-dim"));
  towerps::ModelBuilder b({13});
  std::vector<std::string> tables;
  for (int f = 1; f <= 26; ++f) {
    tables.push_back(std::string("C").append(std::to_string(f)));
    b.Embedding(tables.back(), 1, {.rows = 0, .dim = dim, .init_scale = 0.05f});
  }
  b.Join(
      "features", towerps::JoinKind::kConcat,
      {{{"dense"}, [](towerps::ModelBuilder& m) { m.Dense("bottom", 32).Relu(); }}, {tables, {}}});
  b.Dense("top1", 128).Relu().Dense("top2", 64).Relu();
  b.Dense("logit", 1, towerps::Init::kGlorot).Loss(towerps::LossKind::kSigmoidCrossEntropy);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  towerps::Registry registry = towerps::StockRegistry();
  TOWERPS_CHECK(registry
                    .AddOption("embedding-dim",
                               {.help = "dlrm_cat: floats per table row", .default_value = "8"})
                    .ok());
  TOWERPS_CHECK(
      registry
          .AddModel("dlrm_cat", {.summary = "DLRM with concatenated features (--dataset criteo)",
                                 .build_with_options = DlrmCat})
          .ok());
  return towerps::WorkerMain(argc, argv, registry);
}
