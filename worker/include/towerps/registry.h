// Registry: the models and datasets a worker binary can train, by name. --model and --dataset
// pick from it, and towerps-launch asks the binary (--check-job) whether they exist and fit each
// other before it starts any process.
//
//   towerps::Registry registry = towerps::StockRegistry();   // the zoo and the stock datasets
//   TOWERPS_CHECK(registry.AddModel("tiny", {.summary = "a 2-layer MLP for 1x28x28",
//       .build = [] { towerps::ModelBuilder b({1, 28, 28});
//                     b.Dense("fc", 64).Relu().Dense("logits", 10);
//                     return b; }}).ok());
//   return towerps::WorkerMain(argc, argv, registry);
//
// A binary may declare flags of its own (AddOption): `my-worker --help` lists them, towerps-launch
// --worker-bin my-worker accepts them and passes them to every worker, and model builders
// (build_with_options) and dataset loaders (DataRequest::options) read their values:
//
//   registry.AddOption("width", {.help = "units of tiny's hidden layer", .default_value = "64"});
//
// A dataset is a loader, which returns both splits in memory (<towerps/dataset.h>), and an
// optional probe, which tells the example shape and class count cheaply (from file headers, say)
// so that a mismatch is found before training starts.
//
// Contract: a value type, filled before WorkerMain and read-only after: concurrent reads are
// safe. Add* returns kInvalidArgument for an empty or duplicate name or a missing function and
// changes nothing. Loaders and probes run on the worker's main thread, may be called more than
// once, and report bad data as a Status that names the file and the problem.
#ifndef TOWERPS_REGISTRY_H_
#define TOWERPS_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "towerps/dataset.h"
#include "towerps/example_stream.h"
#include "towerps/model_builder.h"
#include "towerps/result.h"

namespace towerps {

// A binary's own flags (Registry::AddOption): each one's value by name, as given or defaulted.
using UserOptions = std::map<std::string, std::string>;

struct ModelDef {
  std::string summary;                  // one line, for --list-models
  std::function<ModelBuilder()> build;  // the description; called once per worker and check
  // Instead of `build`, for a model that reads the binary's own flags.
  std::function<ModelBuilder(const UserOptions&)> build_with_options{};
  // The job flags (names without "--") and values the model trains well with, e.g.
  // {{"optimizer", "adam"}, {"lr", "0.001"}}: towerps-launch uses each for a job that does not
  // give that flag itself, says so when it starts, and the summary records them
  // ("model_recommends"). --list-models shows them.
  std::map<std::string, std::string> recommended{};
};

// A flag of a worker binary's own (Registry::AddOption), taking a value: --name VALUE.
struct OptionDef {
  std::string help;           // for --help
  std::string default_value;  // its value when it is not given
};

// What a dataset's loader and probe are given.
struct DataRequest {
  std::string data_dir;  // --data-dir; empty: the dataset's default, if it has one
  // --train-images, --train-labels, --test-images, --test-labels: files of datasets that read
  // named files (relative to data_dir unless absolute); empty: the dataset's defaults.
  std::string train_images, train_labels, test_images, test_labels;
  Shape model_input;        // the model's input shape (synthetic data and crops follow it)
  int model_fields = 0;     // the model's categorical ids per example (synthetic data follows it)
  int model_multi_hot = 0;  // the model's multi-hot fields (EmbeddingBag tables), idem
  uint64_t seed = 1;        // the job's --seed
  bool skip_bad_lines = false;  // --skip-bad-lines: text formats skip malformed lines, counted
  double drift = 0;             // --drift: generated categorical ids drift along the stream
  UserOptions options{};        // the binary's own flags (Registry::AddOption)
};

// The examples a dataset gives a model, as far as they can be known before loading.
struct DatasetInfo {
  Shape example_shape;      // after any crop the dataset applies for request.model_input
  int num_classes = 0;      // 0: not known until loaded
  int fields = 0;           // categorical ids per example
  int multi_hot = 0;        // multi-hot fields (Dataset::multi_hot)
  bool regression = false;  // float targets instead of labels (Dataset::targets)
};

struct DatasetDef {
  std::string summary;  // one line, for --list-models
  std::function<Result<DataSplits>(const DataRequest&)> load;
  // Optional and cheap (reads no more than headers); unset: only the worker checks, after
  // loading.
  std::function<Result<DatasetInfo>(const DataRequest&)> probe{};
  // Optional: `split` ("train" or "test") from its beginning, read in order
  // (<towerps/example_stream.h>), and the preprocessing its examples take (empty mean and
  // stddev: computed from the training split as it is read). A dataset that has it can be
  // streamed through a shuffle buffer (--shuffle-buffer) instead of being loaded whole.
  std::function<Result<std::unique_ptr<ExampleStream>>(const DataRequest&,
                                                       const std::string& split)>
      open{};
  Preprocessing stream_preprocessing{};
};

class Registry {
 public:
  Status AddModel(const std::string& name, ModelDef def);
  Status AddDataset(const std::string& name, DatasetDef def);
  // A flag of this binary's own; `name` is its long name without "--" (letters, digits and
  // '-'). A name TowerPS's own flags use is refused when the worker starts, naming both.
  Status AddOption(const std::string& name, OptionDef def);
  const std::vector<std::pair<std::string, OptionDef>>& options() const { return options_; }
  // The values of the binary's own flags, each option's default until WorkerMain sets what
  // the command line gave: the models' build_with_options and the datasets' loaders and probes
  // get them. kInvalidArgument for a name that was not added.
  Status SetOptionValues(const UserOptions& values);
  const UserOptions& option_values() const { return option_values_; }

  // kNotFound naming the unknown model or dataset and listing the known ones.
  Result<ModelBuilder> DescribeModel(const std::string& model) const;
  Result<const DatasetDef*> FindDataset(const std::string& dataset) const;
  std::vector<std::string> ModelNames() const;                // in the order they were added
  std::vector<std::string> DatasetNames() const;              // idem
  const ModelDef* FindModel(const std::string& model) const;  // null when unknown

  // Whether `dataset` (probed with `request`) fits `model`: its example shape equals the model's
  // input, its categorical fields the model's embedding fields, and its classes are no more than
  // the model's outputs. kInvalidArgument naming both
  // shapes and the registered models that fit, e.g. "model cifar10 expects 3x24x24 inputs, but
  // fashion-mnist examples are 1x28x28 (choose --model mlp or cnn, or another --dataset)";
  // kNotFound for an unknown name; the probe's own error for unreadable data. OK without a
  // check when the dataset has no probe.
  Status CheckFits(const std::string& model, const std::string& dataset, DataRequest request) const;

 private:
  std::vector<std::pair<std::string, ModelDef>> models_;
  std::vector<std::pair<std::string, DatasetDef>> datasets_;
  std::vector<std::pair<std::string, OptionDef>> options_;
  UserOptions option_values_;
};

// The models TowerPS ships (mlp, cnn, cifar10, resnet20, embed-mlp, ctr_mlp, dlrm_small,
// wide_deep; see --list-models).
void AddZooModels(Registry* registry);
// The datasets TowerPS reads: fashion-mnist, idx, cifar10, npy, criteo, categorical and
// synthetic.
void AddStockDatasets(Registry* registry);
// Both: what the stock towerps-worker registers.
Registry StockRegistry();

}  // namespace towerps

#endif  // TOWERPS_REGISTRY_H_
