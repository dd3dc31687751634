// The model zoo: builders for the models TowerPS ships, by name.
//   mlp      784-256-128-10, ReLU, for 1x28x28 (Fashion-)MNIST
//   cnn      conv3x3x32, ReLU, maxpool2, conv3x3x64, ReLU, maxpool2, fc128, ReLU, fc10, for
//            1x28x28; 'valid' convolutions (28 -> 26 -> 13 -> 11 -> 5, so fc128 sees 64x5x5)
//   cifar10  the TensorFlow CIFAR-10 tutorial net for 3x24x24 crops: conv5x5x64 (same), ReLU,
//            maxpool 3/2 (same), LRN, conv5x5x64 (same), ReLU, LRN, maxpool 3/2 (same),
//            fc384, ReLU, fc192, ReLU, fc10; LRN depth_radius 4, bias 1, alpha 0.001/9, beta 0.75
//   resnet20 ResNet-20 for 3x32x32 CIFAR-10 (He et al. 2016): a 3x3x16 stem, 3 stages of 3
//            basic blocks (16, 32, 64 filters; stride 2 and a 1x1 projection where the shape
//            changes), batch norm after every convolution, global average pooling, fc10
// A new model is a builder in zoo.cc and its row in the table there. Thread-safe (pure functions
// over constant data).
#ifndef TOWERPS_WORKER_MODEL_ZOO_H_
#define TOWERPS_WORKER_MODEL_ZOO_H_

#include <span>
#include <string>
#include <vector>

#include "towerps/result.h"
#include "worker/model/model_factory.h"

namespace towerps::worker {

// What a model of the zoo is for: which datasets it takes, and so which settings it recommends.
enum class ZooKind { kImage, kCategorical, kClick, kRegression };

// One model of the zoo: its name (--model), builder, one-line summary (--list-choices) and kind.
struct ZooEntry {
  const char* name;
  ModelBuilder (*build)();
  const char* summary;
  ZooKind kind;
};

// The zoo, in the order --list-choices shows it: one table, read by everything below.
std::span<const ZooEntry> Zoo();

// kNotFound listing the known names for an unknown one.
Result<ModelBuilder> ZooModel(const std::string& name);
std::vector<std::string> ZooModelNames();

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_MODEL_ZOO_H_
