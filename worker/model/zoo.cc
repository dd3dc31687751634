#include "worker/model/zoo.h"

namespace towerps::worker {

std::vector<std::string> ZooModelNames() { return {"mlp", "cnn", "cifar10"}; }

Result<ModelBuilder> ZooModel(const std::string& name) {
  if (name == "mlp") {
    ModelBuilder b({1, 28, 28});
    b.Dense("fc1", 256).Relu().Dense("fc2", 128).Relu().Dense("logits", 10, Init::kGlorot);
    return b;
  }
  if (name == "cnn") {
    ModelBuilder b({1, 28, 28});
    b.Conv2d("conv1", 32, 3).Relu().MaxPool(2, 2);
    b.Conv2d("conv2", 64, 3).Relu().MaxPool(2, 2);
    b.Dense("fc1", 128).Relu().Dense("logits", 10, Init::kGlorot);
    return b;
  }
  if (name == "cifar10") {
    const kernels::LrnParams lrn{
        .depth_radius = 4, .bias = 1.0f, .alpha = 0.001f / 9.0f, .beta = 0.75f};
    ModelBuilder b({3, 24, 24});
    b.Conv2d("conv1", 64, 5, 1, Padding::kSame).Relu().MaxPool(3, 2, Padding::kSame).Lrn(lrn);
    b.Conv2d("conv2", 64, 5, 1, Padding::kSame).Relu().Lrn(lrn).MaxPool(3, 2, Padding::kSame);
    b.Dense("local3", 384).Relu().Dense("local4", 192).Relu();
    b.Dense("softmax_linear", 10, Init::kGlorot);
    return b;
  }
  std::string known;
  for (const std::string& n : ZooModelNames()) known += (known.empty() ? "" : ", ") + n;
  return NotFoundError("unknown model '" + name + "' (known: " + known + ")");
}

}  // namespace towerps::worker
