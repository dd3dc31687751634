// A user's worker binary, as docs/API.md builds one: the stock registry plus a model of its own
// ("tiny", registered only here). Launcher tests use it to check that towerps-launch asks the
// --worker-bin it is given, not the stock worker, about models and datasets.
#include <iostream>

#include "towerps/towerps.h"

namespace {

towerps::ModelBuilder Tiny() {
  towerps::ModelBuilder b({1, 28, 28});
  b.Flatten().Dense("fc", 16).Relu().Dense("logits", 10);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  towerps::Registry registry = towerps::StockRegistry();
  if (towerps::Status s = registry.AddModel("tiny", {.summary = "a test's own", .build = Tiny});
      !s.ok()) {
    std::cerr << s.ToString() << "\n";
    return 1;
  }
  return towerps::WorkerMain(argc, argv, registry);
}
