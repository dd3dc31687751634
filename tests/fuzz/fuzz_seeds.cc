// fuzz_seeds DIR: writes the seed corpora of tests/fuzz into DIR/<harness>/seed-<name>, small
// valid inputs made by the production writers where there are some (messages, checkpoints). The
// committed corpus (tests/fuzz/corpus/) is its output:
//   build/fuzz/bin/fuzz_seeds tests/fuzz/corpus
// Files it does not write (regression inputs, crash-*) are left alone.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/message.h"
#include "job/job_config.h"
#include "job/replica_placement.h"
#include "ps/server/checkpoint.h"
#include "ps/server/replica_state.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace fs = std::filesystem;
using namespace towerps;

fs::path g_root;

void Write(const std::string& harness, const std::string& name, const std::string& bytes) {
  fs::create_directories(g_root / harness);
  std::ofstream(g_root / harness / ("seed-" + name), std::ios::binary) << bytes;
}

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

Tensor Iota(Shape shape, DType dtype) {
  Tensor t = Tensor::Empty(std::move(shape), dtype);
  auto* b = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.byte_size(); ++i) b[i] = static_cast<uint8_t>(i * 7);
  return t;
}

// One message as the transport sends it (header frame, then payloads), in SplitFrames' layout.
std::string Frames(OutgoingMessage& m) {
  std::vector<std::string> frames;
  kj::Array<capnp::word> header = m.EncodeHeader();
  frames.push_back(Bytes(header.begin(), header.size() * sizeof(capnp::word)));
  for (const Tensor& t : m.tensors()) frames.push_back(Bytes(t.raw_data(), t.byte_size()));
  return fuzz::JoinFrames(frames);
}

void MessageSeeds() {
  OutgoingMessage ping(proto::MessageType::PING);
  ping.header().setSenderRole(proto::Role::WORKER);
  ping.header().setRequestId(1);
  Write("message", "ping", Frames(ping));

  OutgoingMessage push(proto::MessageType::PUSH);
  push.header().setVersion(3);
  push.header().setClock(3);
  push.header().setVariableId(1);
  push.AddTensor(Iota({2, 3}, DType::kFloat32), 1, 0);
  Write("message", "push", Frames(push));

  OutgoingMessage init(proto::MessageType::INIT);
  init.AddTensor(Iota({5}, DType::kUInt8), 0, 0);
  init.AddTensor(Iota({2, 1, 2}, DType::kFloat32), 1, 2);
  Write("message", "init-two-payloads", Frames(init));

  OutgoingMessage pull(proto::MessageType::PULL);
  pull.header().setVariableId(2);
  pull.header().setChunkId(1);
  pull.header().setVersion(-1);
  Write("message", "pull", Frames(pull));

  // Table requests (ps/server/table_requests.h): a pull of ids, and a push of rows with the next
  // pull.
  auto ids = [](std::vector<uint64_t> values) {
    Tensor t = Tensor::Empty({static_cast<int64_t>(values.size())}, DType::kUInt64);
    std::copy(values.begin(), values.end(), t.u64());
    return t;
  };
  OutgoingMessage rows_pull(proto::MessageType::PULL);
  rows_pull.header().setClock(2);
  rows_pull.AddTensor(ids({3, 999, 3, 7}), 0, 0);
  Write("message", "table-pull", Frames(rows_pull));
  OutgoingMessage rows_push(proto::MessageType::PUSH);
  rows_push.header().setSenderRank(1);
  rows_push.header().setClock(1);
  rows_push.header().setThenPull(true);
  rows_push.AddTensor(ids({2, 5, 40}), 0, 0);
  rows_push.AddTensor(Iota({3, 4}, DType::kFloat32), 0, 0);
  Tensor counts = Tensor::Zeros({3}, DType::kUInt32);
  rows_push.AddTensor(counts, 0, 0);
  rows_push.AddTensor(ids({5, 6}), 0, 0);
  Write("message", "table-push-then-pull", Frames(rows_push));

  // A bundle (Header.parts) of a table pull and a dense push, as a worker's step sends them.
  std::vector<OutgoingMessage> parts;
  parts.emplace_back(proto::MessageType::PULL);
  parts.back().header().setRequestId(7);
  parts.back().AddTensor(ids({3, 9}), 0, 0);
  parts.emplace_back(proto::MessageType::PUSH);
  parts.back().header().setRequestId(8);
  parts.back().header().setVariableId(1);
  parts.back().AddTensor(Iota({2, 2}, DType::kFloat32), 1, 0);
  OutgoingMessage bundle = OutgoingMessage::Bundle(std::move(parts));
  Write("message", "bundle", Frames(bundle));

  OutgoingMessage reg(proto::MessageType::REGISTER);
  reg.header().setConfigFingerprint(0xfeed);
  auto vars = reg.header().initVariables(2);
  vars[0].setName("dense/kernel");
  auto shape = vars[0].initShape(2);
  shape.set(0, 4);
  shape.set(1, 3);
  vars[1].setName("bn/mean");
  vars[1].initShape(1).set(0, 3);
  vars[1].setKind(1);
  vars[1].setDecay(0.9f);
  auto fields = reg.header().initConfigFields(2);
  fields[0].setName("--lr");
  fields[0].setValue("0.1");
  fields[1].setName("--mode");
  fields[1].setValue("sync");
  Write("message", "register", Frames(reg));

  OutgoingMessage stats(proto::MessageType::STATS_REPLY);
  auto s = stats.header().initStats();
  s.setBytesIn(100);
  s.setUpdatesApplied(7);
  s.setMinVersion(-1);
  auto hist = s.initStalenessHistogram(3);
  hist.set(0, 5);
  hist.set(2, 1);
  Write("message", "stats-reply", Frames(stats));

  OutgoingMessage error(proto::MessageType::ERROR);
  SetStatus(error.header(), ProtocolError("payload 0 shape [2] does not match"));
  Write("message", "error", Frames(error));

  // A chunk's state for a joining backup, as the message harness's job expects it (4 elements,
  // momentum, 3 workers): values, the momentum slot, the previous values, one pending gradient.
  ps::ChunkState state;
  state.version = 2;
  state.updates = 2;
  state.values = Iota({4}, DType::kFloat32);
  state.slots = {Iota({4}, DType::kFloat32)};
  state.worker_clocks = {2, 2, 1};
  state.previous_version = 1;
  state.previous_values = Iota({4}, DType::kFloat32);
  state.pending = {{1, Iota({4}, DType::kFloat32)}, {2, Tensor()}};
  OutgoingMessage replicate(proto::MessageType::REPLICATE);
  replicate.header().setReplicaOp(proto::ReplicaOp::STATE);
  ps::AddReplicaState(state, &replicate);
  Write("message", "replicate-state", Frames(replicate));
}

void CheckpointSeeds() {
  ps::Checkpoint ck;
  ck.meta.job_fields = ps::JobConfig{}.ResumableFields();
  ck.meta.model_signature = 0x5678;
  ck.meta.server_rank = 0;
  ck.meta.num_servers = 1;
  ck.meta.partition_bytes = 64;
  ck.meta.variables = {{"w", {2, 2}},
                       {"b", {2}, DType::kFloat32, ps::VariableKind::kMovingAverage, 0.75f}};
  ps::ChunkState w;
  w.version = 3;
  w.updates = 3;
  w.values = Iota({4}, DType::kFloat32);
  w.slots = {Iota({4}, DType::kFloat32)};
  w.worker_clocks = {3, 2};
  ps::ChunkState b;
  b.variable_id = 1;
  b.version = 1;
  b.values = Iota({2}, DType::kFloat32);
  ck.chunks.push_back(std::move(w));
  ck.chunks.push_back(std::move(b));
  // A table partition of 3 rows (dim 2, one optimizer slot) with 2 ids pending admission: its
  // table record, a ROWS record and a PEND record.
  ck.meta.variables.push_back(ps::TableVariable("emb", 0, 2, 0.5f));
  ps::TableState t;
  t.variable_id = 2;
  t.version = 3;
  t.updates = 3;
  t.worker_clocks = {3, 3};
  t.dim = 2;
  t.slots = 1;
  t.ids = Iota({3}, DType::kUInt64);
  t.rows = Iota({3, 4}, DType::kFloat32);
  t.row_updates = Iota({3}, DType::kUInt32);
  t.row_last_update = Iota({3}, DType::kUInt64);
  t.admission_ids = Iota({2}, DType::kUInt64);
  t.admission_counts = Iota({2}, DType::kUInt32);
  t.admission_last_seen = Iota({2}, DType::kUInt64);
  ck.tables.push_back(std::move(t));
  const fs::path tmp = fs::temp_directory_path() / ("fuzz_seeds_" + std::to_string(getpid()));
  if (Status st = ps::SaveCheckpoint(tmp.string(), ck); !st.ok()) {
    std::fprintf(stderr, "fuzz_seeds: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  std::ifstream in(tmp, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), {});
  fs::remove(tmp);
  // The harness's flags byte: bit 0 rewrites the CRCs.
  Write("checkpoint", "two-chunks-and-a-table", std::string(1, '\1') + file);
  Write("checkpoint", "two-chunks-and-a-table-crc-as-is", std::string(1, '\0') + file);
}

std::string Idx(const std::vector<uint32_t>& dims) {
  std::string out = {0, 0, 8, static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>(d >> shift);
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) out += static_cast<char>(i * 13);
  return out;
}

std::string Gzip(const std::string& raw) {
  const fs::path tmp = fs::temp_directory_path() / ("fuzz_seeds_" + std::to_string(getpid()));
  gzFile f = gzopen(tmp.c_str(), "wb9");
  gzwrite(f, raw.data(), static_cast<unsigned>(raw.size()));
  gzclose(f);
  std::ifstream in(tmp, std::ios::binary);
  std::string out((std::istreambuf_iterator<char>(in)), {});
  fs::remove(tmp);
  return out;
}

void IdxSeeds() {
  Write("idx", "images-2x3x3", Idx({2, 3, 3}));
  Write("idx", "labels-5", Idx({5}));
  Write("idx", "images-2x3x3.gz", Gzip(Idx({2, 3, 3})));
}

void Cifar10Seeds() {
  std::string records;
  for (int r = 0; r < 2; ++r) {
    records += static_cast<char>(r == 0 ? 3 : 9);
    for (int i = 0; i < 3 * 32 * 32; ++i) records += static_cast<char>((i * (r + 1)) & 0xff);
  }
  Write("cifar10", "one-record", records.substr(0, records.size() / 2));
  Write("cifar10", "two-records", records);
}

// As numpy.save writes it: magic, version, header length, the dict padded with spaces to a
// multiple of 64 bytes and ended by '\n', then the data.
std::string Npy(int major, const std::string& dict, size_t data_bytes) {
  const size_t len_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + len_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < len_bytes; ++i) out += static_cast<char>(header.size() >> (8 * i));
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out += static_cast<char>(i * 11);
  return out;
}

void NpySeeds() {
  Write("npy", "f4-2x3", Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24));
  Write("npy", "i8-3", Npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", 24));
  Write("npy", "u1-scalar-v2",
        Npy(2, "{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 1));
  Write("npy", "f8-empty-v3",
        Npy(3, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4), }", 0));
}

void CriteoSeeds() {
  const std::string good =
      "1\t5\t-1\t\t3\t0\t12\t1\t0\t2\t\t4\t\t7\t68fd1e64\t80e26c9b\tfb936136\t7b4723c4"
      "\t25c83c98\t7e0ccccf\tde7995b8\t1f89b562\ta73ee510\ta8cd5504\tb2cb9c98\t37c9c164"
      "\t2824a5f6\t1adce6ef\t8ba8b39a\t891b62e7\te5ba7672\tf54016b9\t21ddcdc9\tb1252a9d"
      "\t07b5194c\t\t3a171ecb\tc5c50484\te8b83407\t9727dd16\n";
  Write("criteo", "two-lines", good + "0" + good.substr(1));
  Write("criteo", "crlf-and-empties", "0" + std::string(39, '\t') + "\r\n");
  Write("criteo", "bad-integer", "1\tx" + std::string(38, '\t') + "\n" + good);
}

void TextSeeds() {
  Write("hostfile", "roles",
        "# cluster\nnode1 slots=4\nnode2 slots=2 servers  # PS\nnode3 workers\n");
  Write("hostfile", "one-host", "localhost slots=8\n");
  // cluster_spec: a role byte (0: TOWERPS_CONFIG's own task, 1: ps, 2: worker), an index byte.
  const std::string cluster =
      R"({"cluster": {"ps": ["h1:2222", "h2:2222"], "worker": ["h3:2223", "h4:2223"]}, )"
      R"("task": {"type": "worker", "index": 1}})";
  Write("cluster_spec", "towerps-config", std::string("\0\0", 2) + cluster);
  Write("cluster_spec", "ps-1", std::string("\1\1", 2) + cluster);
  Write("cluster_spec", "flat-worker-0",
        std::string("\2\0", 2) + R"({"ps": ["localhost:5000"], "worker": ["localhost:5001"]})");
  Write("cluster_spec", "index-as-string",
        std::string("\0\0", 2) +
            R"({"ps": ["a:1"], "worker": ["b:2", "c:3"], "task": {"type": "ps", "index": "0"}})");
  Write("config", "job",
        "# job.ini\nworkers = 2\nservers = 1\nmode = ssp\nstaleness = 2\n"
        "optimizer = adam\nlr = 0.001\nbatch-size = 32\nmodel = cnn\n");
  Write("config", "worker",
        "towers = cpu:0,cpu:1\nintra-op-threads = 2\nstraggler = 1:40ms\n"
        "gpu-memory-fraction = 0.4\nallow-growth = true\n"
        "device-count = gpu=1\nrpc-timeout-ms = 5000\n");
  Write("config", "schedule",
        "lr-schedule = step\nlr-decay-rate = 0.5\nlr-decay-steps = 100\n"
        "lr-staircase = true\nnesterov = true\nmomentum = 0.9\n"
        "data-dir = /data\nlog-level = debug\n");
  // straggler: a worker-count byte (workers = 1 + byte % 16), then RANK:DELAY, the distribution
  // and K:FACTOR on three lines.
  Write("straggler", "fixed",
        "\x03"
        "1:40ms\n\n");
  Write("straggler", "exp",
        "\x03"
        "\nexp:20ms\n");
  Write("straggler", "all",
        "\x07"
        "2:0.1s\nuniform:10ms:30ms\n1:3\n");
  Write("straggler", "us",
        "\x01"
        "0:40000us\n\n0:1.5\n");
  Write("towers", "cpus", "cpu:0,cpu:1");
  Write("towers", "gpus", "gpu:0,gpu:1,cpu:3");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR (e.g. tests/fuzz/corpus)\n");
    return 2;
  }
  g_root = argv[1];
  MessageSeeds();
  CheckpointSeeds();
  IdxSeeds();
  Cifar10Seeds();
  NpySeeds();
  CriteoSeeds();
  TextSeeds();
  return 0;
}
