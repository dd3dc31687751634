// my-worker: a TowerPS worker with a model and a dataset of its own, beside the stock ones.
//
//   towerps-launch --worker-bin build/my-worker --model small_resnet --dataset stripes
//
// runs it like the stock towerps-worker, in every mode (local, --hostfile, --mpi, --slurm,
// --cluster) and with every flag; `build/my-worker --list-models` shows what it can train.
#include <towerps/towerps.h>

#include <iostream>

#include "stripes.h"

namespace {

// A small residual CNN for 1x28x28 images: a 3x3 stem, two residual blocks (the second halves
// the size, with a 1x1 projection shortcut), global average pooling and 10 logits.
towerps::ModelBuilder SmallResNet() {
  using towerps::Padding;
  towerps::ModelBuilder b({1, 28, 28});
  b.Conv2d("stem", 16, 3, 1, Padding::kSame).BatchNorm("stem_bn").Relu();
  b.Residual("block1", [](towerps::ModelBuilder& m) {
    m.Conv2d("conv1", 16, 3, 1, Padding::kSame).BatchNorm("bn1").Relu();
    m.Conv2d("conv2", 16, 3, 1, Padding::kSame).BatchNorm("bn2");
  });
  b.Relu();
  b.Residual(
      "block2",
      [](towerps::ModelBuilder& m) {
        m.Conv2d("conv1", 32, 3, 2, Padding::kSame).BatchNorm("bn1").Relu();
        m.Conv2d("conv2", 32, 3, 1, Padding::kSame).BatchNorm("bn2");
      },
      [](towerps::ModelBuilder& s) { s.Conv2d("project", 32, 1, 2).BatchNorm("project_bn"); });
  b.Relu().GlobalAvgPool().Dense("logits", 10, towerps::Init::kGlorot);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  towerps::Registry registry = towerps::StockRegistry();  // mlp, cnn, ...; fashion-mnist, npy, ...
  for (const towerps::Status& s :
       {registry.AddModel("small_resnet",
                          {.summary = "a small residual CNN for 1x28x28", .build = SmallResNet}),
        registry.AddDataset("stripes", {.summary = "generated gratings, 1x28x28, 4 orientations",
                                       .load = LoadStripes,
                                       .probe = ProbeStripes})}) {
    if (!s.ok()) {
      std::cerr << "my-worker: " << s.ToString() << "\n";
      return 1;
    }
  }
  return towerps::WorkerMain(argc, argv, registry);
}
