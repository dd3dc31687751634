#include "worker/train/job_data.h"

#include <cmath>

namespace towerps::worker {

void ChannelStatistics(const Dataset& data, std::vector<float>* mean, std::vector<float>* stddev) {
  const int64_t channels = NormalizationChannels(data.example_shape);  // a vector's features
  const int64_t plane = data.example_size() / channels;
  std::vector<double> sum(static_cast<size_t>(channels)), sq(static_cast<size_t>(channels));
  const double unit = data.is_float() ? 1.0 : 1.0 / 255.0;
  for (int64_t e = 0; e < data.size(); ++e) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t base = (e * channels + c) * plane;
      double s1 = 0, s2 = 0;
      for (int64_t i = 0; i < plane; ++i) {
        const double v = (data.is_float() ? data.values[static_cast<size_t>(base + i)]
                                          : data.pixels[static_cast<size_t>(base + i)]) *
                         unit;
        s1 += v;
        s2 += v * v;
      }
      sum[static_cast<size_t>(c)] += s1;
      sq[static_cast<size_t>(c)] += s2;
    }
  }
  const double count = static_cast<double>(data.size()) * static_cast<double>(plane);
  mean->assign(static_cast<size_t>(channels), 0.0f);
  stddev->assign(static_cast<size_t>(channels), 1.0f);
  for (size_t c = 0; c < sum.size(); ++c) {
    const double m = sum[c] / count, var = std::max(0.0, sq[c] / count - m * m);
    (*mean)[c] = static_cast<float>(m);
    // A constant channel keeps a unit scale instead of dividing by zero.
    (*stddev)[c] = var > 1e-12 ? static_cast<float>(std::sqrt(var)) : 1.0f;
  }
}

namespace {

SplitLayout LayoutOf(const Dataset& d) {
  SplitLayout l{.name = d.name,
                .examples = d.size(),
                .fields = d.fields,
                .multi_hot = static_cast<int>(d.multi_hot.size()),
                .regression = d.regression()};
  for (size_t i = 0; i < d.labels.size(); ++i) {
    const auto label = static_cast<size_t>(d.labels[i]);
    if (l.label_counts.size() <= label) l.label_counts.resize(label + 1, 0);
    ++l.label_counts[label];
    if (d.labels[i] + 1 <= l.labels_needed) continue;
    l.labels_needed = d.labels[i] + 1;
    l.largest_label_at = static_cast<int64_t>(i);
  }
  return l;
}

SplitLayout LayoutOf(const StreamBatcher& s) {
  return SplitLayout{.name = s.name(),
                     .examples = s.examples(),
                     .fields = s.fields(),
                     .multi_hot = s.multi_hot(),
                     .regression = s.regression(),
                     .labels_needed = s.regression() ? 0 : s.num_classes(),
                     .label_counts = s.label_counts()};
}

// The dataset's streams, to be read by MakeJobBatches.
Result<JobData> OpenJobStreams(const DatasetDef& def, const std::string& dataset,
                               const DataRequest& request, int batch_size, int64_t shuffle_buffer) {
  if (!def.open) {
    return InvalidArgumentError("--shuffle-buffer=" + std::to_string(shuffle_buffer) +
                                ": dataset " + dataset +
                                " cannot be streamed (criteo can); drop the flag to load it whole");
  }
  JobData d;
  d.shuffle_buffer = shuffle_buffer;
  d.open_train = [&def, request] { return def.open(request, "train"); };
  d.open_test = [&def, request] { return def.open(request, "test"); };
  d.train.name = dataset + "/train";
  d.test.name = dataset + "/test";
  d.train_options.batch_size = batch_size;
  d.train_options.seed = request.seed;
  d.train_options.mean = def.stream_preprocessing.mean;  // empty: from the counting pass
  d.train_options.stddev = def.stream_preprocessing.stddev;
  d.test_options = d.train_options;
  d.test_options.shuffle = false;
  d.test_options.drop_remainder = false;
  return d;
}

}  // namespace

Result<JobData> LoadJobData(const Registry& registry, const std::string& dataset,
                            DataRequest request, int batch_size, int64_t shuffle_buffer) {
  TOWERPS_ASSIGN_OR_RETURN(const DatasetDef* def, registry.FindDataset(dataset));
  request.options = registry.option_values();
  if (shuffle_buffer > 0) {
    return OpenJobStreams(*def, dataset, request, batch_size, shuffle_buffer);
  }
  TOWERPS_ASSIGN_OR_RETURN(DataSplits splits, def->load(request));
  for (Dataset* d : {&splits.train, &splits.test}) {
    if (d->name.empty()) d->name = dataset + (d == &splits.train ? "/train" : "/test");
    TOWERPS_RETURN_IF_ERROR(d->Validate());
  }
  if (splits.train.size() == 0 || splits.test.size() == 0) {
    return InvalidArgumentError(
        "dataset " + dataset + " has " + std::to_string(splits.train.size()) + " training and " +
        std::to_string(splits.test.size()) + " test examples; it needs some of both");
  }
  if (splits.train.example_shape != splits.test.example_shape) {
    return InvalidArgumentError("dataset " + dataset + ": training examples are " +
                                ShapeToString(splits.train.example_shape) +
                                " but test examples are " +
                                ShapeToString(splits.test.example_shape));
  }
  JobData d;
  const Preprocessing& p = splits.preprocessing;
  BatcherOptions base;
  base.batch_size = batch_size;
  base.seed = request.seed;
  base.mean = p.mean;
  base.stddev = p.stddev;
  if (p.mean.empty() || p.stddev.empty()) ChannelStatistics(splits.train, &base.mean, &base.stddev);
  base.crop_h = p.crop_h;
  base.crop_w = p.crop_w;
  d.train = std::move(splits.train);
  d.test = std::move(splits.test);
  d.train_options = base;
  d.train_options.random_crop_flip = p.random_crop_flip;
  d.test_options = base;
  d.test_options.shuffle = false;
  d.test_options.drop_remainder = false;
  return d;
}

Result<JobBatches> MakeJobBatches(JobData& data, int rank, int workers, bool with_train) {
  BatcherOptions train = data.train_options;
  train.rank = rank;
  train.num_workers = workers;
  JobBatches b;
  if (data.shuffle_buffer == 0) {
    TOWERPS_ASSIGN_OR_RETURN(b.train, Batcher::Create(&data.train, train));
    TOWERPS_ASSIGN_OR_RETURN(b.test, Batcher::Create(&data.test, data.test_options));
    data.train_layout = LayoutOf(data.train);
    data.test_layout = LayoutOf(data.test);
    return b;
  }
  // The training split is read (counted) unless only the test split is wanted and the
  // dataset gives the normalization: then a large file is not read for nothing.
  if (with_train || train.mean.empty() || train.stddev.empty()) {
    TOWERPS_ASSIGN_OR_RETURN(
        std::unique_ptr<StreamBatcher> t,
        StreamBatcher::Create(data.open_train, train, data.shuffle_buffer, data.train.name));
    // The test split takes the training split's normalization.
    data.train_options.mean = data.test_options.mean = t->options().mean;
    data.train_options.stddev = data.test_options.stddev = t->options().stddev;
    data.train_layout = LayoutOf(*t);
    if (with_train) b.train = std::move(t);
  }
  TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<StreamBatcher> e,
                           StreamBatcher::Create(data.open_test, data.test_options,
                                                 data.shuffle_buffer, data.test.name));
  data.test_layout = LayoutOf(*e);
  b.test = std::move(e);
  return b;
}

Result<int64_t> CheckDataFitsJob(const JobData& data, const BatchSource& train,
                                 const Model<float>& model, const std::string& model_name,
                                 int workers, int batch_size) {
  if (train.example_shape() != model.input_shape()) {
    return InvalidArgumentError(
        "model " + model_name + " expects " + ShapeToString(model.input_shape()) + " inputs, but " +
        data.train_layout.name + " examples are " + ShapeToString(train.example_shape()));
  }
  for (const SplitLayout* split : {&data.train_layout, &data.test_layout}) {
    // The tables' ids: as many one-hot fields and multi-hot fields as the model looks up.
    if (split->fields != model.categorical_fields() ||
        split->multi_hot != model.multi_hot_fields()) {
      return InvalidArgumentError(
          "model " + model_name + " looks up " + std::to_string(model.categorical_fields()) +
          " categorical ids and " + std::to_string(model.multi_hot_fields()) +
          " multi-hot fields per example, but " + split->name + " holds " +
          std::to_string(split->fields) + " and " + std::to_string(split->multi_hot));
    }
    if (split->regression != model.regression()) {
      return InvalidArgumentError(
          "model " + model_name +
          (model.regression() ? " predicts float targets, but " : " predicts classes, but ") +
          split->name + (split->regression ? " has float targets" : " has labels"));
    }
    // Named by the split that holds a label the model has no output for.
    if (split->labels_needed > model.num_classes() && !model.regression()) {
      const std::string at = split->largest_label_at < 0
                                 ? ""
                                 : " of example " + std::to_string(split->largest_label_at);
      return InvalidArgumentError(split->name + ": label " +
                                  std::to_string(split->labels_needed - 1) + at + " needs " +
                                  std::to_string(split->labels_needed) + " outputs, but model " +
                                  model_name + " has " + std::to_string(model.num_classes()));
    }
  }
  const int64_t examples = data.train_layout.examples;
  const int64_t steps_per_epoch = examples / workers / batch_size;
  if (steps_per_epoch < 1) {
    return InvalidArgumentError(data.train_layout.name + " has " + std::to_string(examples) +
                                " examples: too few for --workers=" + std::to_string(workers) +
                                " x --batch-size=" + std::to_string(batch_size));
  }
  return steps_per_epoch;
}

}  // namespace towerps::worker
