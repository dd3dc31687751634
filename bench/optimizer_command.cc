// towerps-bench optimizer: the servers' optimizer pass (ps/server/optimizer.h, ApplyUpdate) on
// one chunk of --elements floats, and on the same floats row by row (--row-dim each, as a table's
// rows are updated), for every optimizer, with --gradients pushed gradients summed per update.
// It reports microseconds per update and an FNV-1a hash of the final weights, so that two builds
// can be compared for speed and for bits in one command each.
//
// Contract: runs in this process only (no servers); exit codes as bench/commands.h says.
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "bench/commands.h"
#include "common/command_line.h"
#include "common/hash.h"
#include "ps/server/optimizer.h"

namespace po = boost::program_options;

namespace towerps::bench {
namespace {

struct OptimizerBenchOptions {
  int64_t elements = 25600;  // dlrm_small's dense parameters, about
  int64_t row_dim = 16;
  int gradients = 2;
  int updates = 2000;
};

struct Timing {
  double whole_us = 0, rows_us = 0;
  uint64_t bits = 0;  // FNV-1a of the weights after both runs
};

using Clock = std::chrono::steady_clock;

Timing Time(const OptimizerBenchOptions& o, ps::OptimizerKind kind) {
  const auto n = static_cast<size_t>(o.elements);
  std::vector<float> w(n, 0.1f), slot0(n), slot1(n);
  std::vector<std::vector<float>> grads(static_cast<size_t>(o.gradients), std::vector<float>(n));
  for (size_t j = 0; j < grads.size(); ++j) {
    for (size_t i = 0; i < n; ++i)
      grads[j][i] = 0.001f * static_cast<float>((i * (j + 3)) % 97) - 0.04f;
  }
  ps::OptimizerOptions opt;
  opt.kind = kind;
  opt.learning_rate = 0.01f;
  std::fill(slot0.begin(), slot0.end(), ps::OptimizerSlotInitialValue(opt));
  std::vector<const float*> g(grads.size());
  // One update of [first, first + count) of every array, the t-th.
  auto update = [&](int64_t first, int64_t count, int64_t t) {
    for (size_t j = 0; j < grads.size(); ++j) g[j] = grads[j].data() + first;
    ps::ApplyUpdate(opt, {.grads = g.data(),
                          .k = o.gradients,
                          .scale = 1.0f / static_cast<float>(o.gradients),
                          .w_in = w.data() + first,
                          .w_out = w.data() + first,
                          .slot0 = slot0.data() + first,
                          .slot1 = slot1.data() + first,
                          .n = count,
                          .lr = opt.learning_rate,
                          .t = t});
  };
  Timing r;
  auto start = Clock::now();
  for (int u = 0; u < o.updates; ++u) update(0, o.elements, u + 1);
  r.whole_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / o.updates;
  start = Clock::now();
  for (int u = 0; u < o.updates; ++u) {
    for (int64_t first = 0; first < o.elements; first += o.row_dim) {
      update(first, std::min(o.row_dim, o.elements - first), o.updates + u + 1);
    }
  }
  r.rows_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / o.updates;
  r.bits = Fnv1a(w.data(), w.size() * sizeof(float));
  return r;
}

}  // namespace

int RunOptimizerCommand(int argc, char** argv) {
  OptimizerBenchOptions o;
  bool json = false;
  po::options_description desc(
      "Usage: towerps-bench optimizer [options]\n\nThe servers' optimizer pass (ApplyUpdate) on "
      "one chunk and row by row, for every optimizer:\nmicroseconds per update, and a hash of "
      "the final weights to compare two builds' bits.\n\nOptions");
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "elements", po::value(&o.elements)->default_value(o.elements), "floats updated")(
      "row-dim", po::value(&o.row_dim)->default_value(o.row_dim),
      "floats per row in the row-by-row pass")("gradients",
                                               po::value(&o.gradients)->default_value(o.gradients),
                                               "gradients summed per update (the workers in sync)")(
      "updates", po::value(&o.updates)->default_value(o.updates), "updates timed per pass")(
      "json", po::bool_switch(&json), "one JSON line per optimizer");
  po::variables_map vm;
  if (auto code = ParseCommandLine("towerps-bench optimizer", argc, argv, desc, &vm)) return *code;
  if (o.elements < 1 || o.row_dim < 1 || o.gradients < 1 || o.updates < 1) {
    std::cerr << "towerps-bench optimizer: --elements " << o.elements << ", --row-dim " << o.row_dim
              << ", --gradients " << o.gradients << " and --updates " << o.updates
              << " must each be at least 1\n";
    return 2;
  }
  for (const ps::OptimizerKind kind : {ps::OptimizerKind::kSgd, ps::OptimizerKind::kMomentum,
                                       ps::OptimizerKind::kAdam, ps::OptimizerKind::kAdagrad}) {
    const Timing t = Time(o, kind);
    const std::string name = ps::kOptimizerKinds.Name(kind);
    char bits[17];
    std::snprintf(bits, sizeof(bits), "%016llx", static_cast<unsigned long long>(t.bits));
    if (json) {
      PrintJson({{"bench", "optimizer"},
                 {"optimizer", name},
                 {"elements", o.elements},
                 {"row_dim", o.row_dim},
                 {"gradients", o.gradients},
                 {"whole_us", Rounded(t.whole_us, 2)},
                 {"rows_us", Rounded(t.rows_us, 2)},
                 {"bits", bits}});
    } else {
      std::printf("%-9s %9.2f us an update of %lld floats, %9.2f us by rows of %lld; bits %s\n",
                  name.c_str(), t.whole_us, static_cast<long long>(o.elements), t.rows_us,
                  static_cast<long long>(o.row_dim), bits);
    }
  }
  return 0;
}

}  // namespace towerps::bench
