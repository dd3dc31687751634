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

Result<JobData> LoadJobData(const Registry& registry, const std::string& dataset,
                            DataRequest request, int batch_size) {
  TOWERPS_ASSIGN_OR_RETURN(const DatasetDef* def, registry.FindDataset(dataset));
  request.options = registry.option_values();
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

Result<int64_t> CheckDataFitsJob(const JobData& data, const Batcher& train,
                                 const Model<float>& model, const std::string& model_name,
                                 int workers, int batch_size) {
  if (train.example_shape() != model.input_shape()) {
    return InvalidArgumentError(
        "model " + model_name + " expects " + ShapeToString(model.input_shape()) + " inputs, but " +
        data.train.name + " examples are " + ShapeToString(train.example_shape()));
  }
  // The tables' ids: as many one-hot fields and multi-hot fields as the model looks up.
  for (const Dataset* split : {&data.train, &data.test}) {
    const auto multi_hot = static_cast<int>(split->multi_hot.size());
    if (split->fields != model.categorical_fields() || multi_hot != model.multi_hot_fields()) {
      return InvalidArgumentError(
          "model " + model_name + " looks up " + std::to_string(model.categorical_fields()) +
          " categorical ids and " + std::to_string(model.multi_hot_fields()) +
          " multi-hot fields per example, but " + split->name + " holds " +
          std::to_string(split->fields) + " and " + std::to_string(multi_hot));
    }
  }
  for (const Dataset* split : {&data.train, &data.test}) {
    if (split->regression() != model.regression()) {
      return InvalidArgumentError(
          "model " + model_name +
          (model.regression() ? " predicts float targets, but " : " predicts classes, but ") +
          split->name + (split->regression() ? " has float targets" : " has labels"));
    }
  }
  // Named by the split and the example that hold a label the model has no output for.
  for (const Dataset* split : {&data.train, &data.test}) {
    for (size_t i = 0; i < split->labels.size(); ++i) {
      if (split->labels[i] < model.num_classes()) continue;
      return InvalidArgumentError(split->name + ": label " + std::to_string(split->labels[i]) +
                                  " of example " + std::to_string(i) + " needs " +
                                  std::to_string(split->labels[i] + 1) + " outputs, but model " +
                                  model_name + " has " + std::to_string(model.num_classes()));
    }
  }
  const int64_t steps_per_epoch = data.train.size() / workers / batch_size;
  if (steps_per_epoch < 1) {
    return InvalidArgumentError(data.train.name + " has " + std::to_string(data.train.size()) +
                                " examples: too few for --workers=" + std::to_string(workers) +
                                " x --batch-size=" + std::to_string(batch_size));
  }
  return steps_per_epoch;
}

}  // namespace towerps::worker
