// A user's worker binary, as docs/API.md builds one: the stock registry, a model of its own
// ("tiny", registered only here) and a flag of its own (--tiny-width, the width of tiny's hidden
// layer). Launcher tests use it to check that towerps-launch asks the --worker-bin it is given
// about models, datasets and flags, and passes its flags on to the workers.
#include <iostream>
#include <string>

#include "towerps/towerps.h"

namespace {

towerps::ModelBuilder Tiny(const towerps::UserOptions& options) {
  towerps::ModelBuilder b({1, 28, 28});
  b.Flatten().Dense("fc", std::stoi(options.at("tiny-width"))).Relu().Dense("logits", 10);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  towerps::Registry registry = towerps::StockRegistry();
  for (const towerps::Status& s :
       {registry.AddOption("tiny-width",
                           {.help = "units of tiny's hidden layer", .default_value = "16"}),
        registry.AddModel("tiny", {.summary = "a test's own", .build_with_options = Tiny})}) {
    if (!s.ok()) {
      std::cerr << s.ToString() << "\n";
      return 1;
    }
  }
  return towerps::WorkerMain(argc, argv, registry);
}
