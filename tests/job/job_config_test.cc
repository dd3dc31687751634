#include "job/job_config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "job/job_flags.h"

namespace towerps::ps {
namespace {

TEST(JobConfigTest, MismatchNamesTheField) {
  JobConfig a, b;
  b.optimizer.learning_rate = 0.1f;
  Status s = CompareConfigFields(a.Fields(), "server 0", b.Fields(), "worker 2");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("--lr is 0.1 at worker 2 but 0.05 at server 0"), std::string::npos)
      << s.message();
  EXPECT_NE(a.Fingerprint(), b.Fingerprint());
  EXPECT_TRUE(CompareConfigFields(a.Fields(), "x", a.Fields(), "y").ok());
}

TEST(JobConfigTest, ReplicasDefaultToAllWorkers) {
  JobConfig a, b;
  a.workers = b.workers = 4;
  b.replicas_to_aggregate = 4;
  EXPECT_EQ(a.Fingerprint(), b.Fingerprint());  // 0 means "all", which is 4
}

// The start-up line that tells a PyTorch script which schedule the servers apply.
TEST(JobConfigTest, DescribeOptimizerNamesTheSchedule) {
  JobConfig c;
  c.optimizer.kind = OptimizerKind::kAdam;
  c.optimizer.learning_rate = 0.002f;
  EXPECT_EQ(c.DescribeOptimizer(),
            "adam, lr 0.002, exponential schedule (x0.5 every 1000 steps, smoothly; "
            "--lr-schedule constant to keep it)");
  c.schedule.kind = LrScheduleKind::kConstant;
  c.schedule.warmup_steps = 100;
  EXPECT_EQ(c.DescribeOptimizer(), "adam, lr 0.002, constant schedule, warm-up over 100 steps");
}

TEST(JobConfigTest, ValidateNamesTheFlag) {
  JobConfig c;
  c.replicas_to_aggregate = 5;
  EXPECT_NE(c.Validate().message().find("--replicas-to-aggregate=5"), std::string::npos);
  c = JobConfig();
  c.optimizer.learning_rate = -1;
  EXPECT_NE(c.Validate().message().find("--lr"), std::string::npos);
  c = JobConfig();
  c.workers = 0;
  EXPECT_NE(c.Validate().message().find("--workers"), std::string::npos);
  EXPECT_TRUE(JobConfig().Validate().ok());
}

TEST(JobFlagsTest, ParsesAndRejectsBadValues) {
  JobFlags flags;
  boost::program_options::variables_map vm;
  const char* argv[] = {"prog", "--mode", "ssp", "--staleness", "3", "--optimizer", "adam"};
  ASSERT_TRUE(ParseFlags(7, const_cast<char**>(argv), flags.options(), &vm).ok());
  auto c = flags.ToConfig(vm);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mode, UpdateMode::kSsp);
  EXPECT_EQ(c->staleness, 3);
  EXPECT_EQ(c->optimizer.kind, OptimizerKind::kAdam);

  JobFlags bad;
  boost::program_options::variables_map vm2;
  const char* argv2[] = {"prog", "--mode", "eventual"};
  ASSERT_TRUE(ParseFlags(3, const_cast<char**>(argv2), bad.options(), &vm2).ok());
  EXPECT_NE(bad.ToConfig(vm2).status().message().find("--mode=eventual"), std::string::npos);

  JobFlags typo;
  boost::program_options::variables_map vm3;
  const char* argv3[] = {"prog", "--workerz", "3"};
  Status s = ParseFlags(3, const_cast<char**>(argv3), typo.options(), &vm3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("workerz"), std::string::npos);
}

// A JobFlags parse of `args` (after the program name).
Result<JobConfig> ParseJob(std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  JobFlags flags;
  boost::program_options::variables_map vm;
  TOWERPS_RETURN_IF_ERROR(
      ParseFlags(static_cast<int>(argv.size()), argv.data(), flags.options(), &vm));
  return flags.ToConfig(vm);
}

// A word that is no option's value (an unquoted --worker-cmd's script) is refused, naming it;
// Boost alone drops it.
TEST(JobFlagsTest, AStrayArgumentIsRefusedNamingIt) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--workers", "2", "extra"},
                                               {"extra", "--workers", "2"},
                                               {"--workers", "2", "--", "extra"}}) {
    const Result<JobConfig> stray = ParseJob(args);
    ASSERT_FALSE(stray.ok()) << args.back();
    EXPECT_NE(stray.status().message().find("unexpected argument 'extra'"), std::string::npos)
        << stray.status().message();
  }
}

// An option of another mode is refused, naming it and its mode, whether or not its value is the
// default; in its own mode it is taken.
TEST(JobFlagsTest, AnOptionOfAnotherModeIsRefused) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  for (const Case& c : {
           Case{{"--mode", "async", "--staleness", "5"},
                "--staleness is an option of --mode ssp; this job has --mode async"},
           Case{{"--staleness", "2"},
                "--staleness is an option of --mode ssp; this job has "
                "--mode sync"},
           Case{{"--mode", "sync", "--softsync-n", "2"},
                "--softsync-n is an option of --mode softsync; this job has --mode sync"},
           Case{{"--mode", "ssp", "--replicas-to-aggregate", "1"},
                "--replicas-to-aggregate is an option of --mode sync; this job has --mode ssp"},
           Case{{"--staleness-aware-lr"},
                "--staleness-aware-lr is an option of --mode async, "
                "ssp or softsync; this job has --mode sync"},
       }) {
    Result<JobConfig> r = ParseJob(c.args);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--mode", "ssp", "--staleness", "5", "--staleness-aware-lr"},
           {"--mode", "softsync", "--workers", "4", "--softsync-n", "2"},
           {"--mode", "sync", "--workers", "4", "--replicas-to-aggregate", "3"},
           {"--mode", "async", "--staleness-aware-lr"}}) {
    Result<JobConfig> r = ParseJob(args);
    EXPECT_TRUE(r.ok()) << args[1] << ": " << r.status().ToString();
  }
}

// The table policy flags (job/table_policy.h): defaults, per-table overrides applied in order,
// ToArgs round trip, and bad values refused naming the flag or the table, the key and the value.
TEST(JobFlagsTest, TablePoliciesParseOverrideAndRoundTrip) {
  Result<JobConfig> r = ParseJob({"--table-admission-min-count", "2", "--table-ttl-steps", "100",
                                  "--table-eviction", "lru", "--table-policy",
                                  "emb_3:min_count=5,emb_3:capacity_rows=1000,click:ttl_steps=0"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TablePolicies& p = r->table_policies;
  EXPECT_EQ(p.For("emb_0").admission_min_count, 2);
  EXPECT_EQ(p.For("emb_0").ttl_steps, 100);
  EXPECT_EQ(p.For("emb_0").eviction, EvictionOrder::kLru);
  EXPECT_EQ(p.For("emb_3").admission_min_count, 5);
  EXPECT_EQ(p.For("emb_3").capacity_rows, 1000);
  EXPECT_EQ(p.For("emb_3").ttl_steps, 100);
  EXPECT_EQ(p.For("click").ttl_steps, 0);
  EXPECT_EQ(p.NamedTables(), (std::vector<std::string>{"emb_3", "click"}));
  EXPECT_EQ(p.For("emb_3").Describe(),
            "admitted after 5 steps, ttl 100 steps, at most 1000 rows per server (lru)");
  EXPECT_EQ(TablePolicy{}.Describe(), "every id, kept forever");
  Result<JobConfig> back = ParseJob(r->ToArgs());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Fields(), r->Fields());
  EXPECT_EQ(back->table_policies.For("emb_3"), p.For("emb_3"));
  // A table on disk: its keys may come in either order (checked together).
  Result<JobConfig> tiered = ParseJob({"--table-policy",
                                       "emb_1:storage=rocksdb,emb_1:memory_mb=64,emb_2:memory_mb=8,"
                                       "emb_2:storage=rocksdb"});
  ASSERT_TRUE(tiered.ok()) << tiered.status().ToString();
  EXPECT_EQ(tiered->table_policies.For("emb_2").memory_mb, 8);
  EXPECT_EQ(tiered->table_policies.DiskUser(), "--table-policy: table 'emb_1': storage=rocksdb");
  EXPECT_EQ(tiered->table_policies.For("emb_1").Describe(),
            "on disk (rocksdb) beyond 64 MB per server in memory (lfu)");
  EXPECT_EQ(p.DiskUser(), "");
  // Every table on disk but one, kept in memory: the defaults' budget is not its.
  Result<JobConfig> one_in_memory = ParseJob({"--table-storage", "rocksdb", "--table-memory-mb",
                                              "0.5", "--table-policy", "emb_0:storage=memory"});
  ASSERT_TRUE(one_in_memory.ok()) << one_in_memory.status().ToString();
  EXPECT_EQ(one_in_memory->table_policies.For("emb_0").storage, TableStorage::kMemory);
  EXPECT_EQ(one_in_memory->table_policies.For("emb_0").memory_mb, 0.0f);
  EXPECT_EQ(one_in_memory->table_policies.For("emb_1").memory_mb, 0.5f);
  // No policy: the empty override list goes through ToArgs too.
  Result<JobConfig> plain = ParseJob(JobConfig{}.ToArgs());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->table_policies.Any());

  for (const auto& [args, expect] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--table-ttl-steps", "-1"}, "--table-ttl-steps=-1 is not in [0, 2^31)"},
           {{"--table-ttl-steps", "4294967296"}, "--table-ttl-steps=4294967296 is not in"},
           {{"--table-capacity-rows", "-5"}, "--table-capacity-rows=-5 is not in [0, 2^40]"},
           {{"--table-admission-min-count", "0"}, "--table-admission-min-count=0"},
           {{"--table-admission-probability", "1.5"}, "--table-admission-probability=1.5"},
           {{"--table-eviction", "fifo"}, "--table-eviction=fifo is not one of lfu, lru"},
           {{"--table-policy", "emb_3:ttl=5"}, "table 'emb_3': 'ttl' is not a policy key"},
           {{"--table-policy", "emb_3:ttl_steps=-2"}, "table 'emb_3': ttl_steps=-2 is not in"},
           {{"--table-policy", "emb_3:eviction=mru"}, "table 'emb_3': eviction=mru"},
           {{"--table-policy", "emb_3:min_count=two"}, "table 'emb_3': min_count"},
           {{"--table-policy", "emb_3=ttl_steps:5"}, "is not NAME:KEY=VALUE"},
           {{"--table-policy", "a:ttl_steps=1,"}, "'' is not NAME:KEY=VALUE"},
           {{"--table-storage", "ssd"}, "--table-storage=ssd is not one of memory, rocksdb"},
           {{"--table-storage", "rocksdb"}, "--table-storage=rocksdb needs a memory budget"},
           {{"--table-memory-mb", "-1"}, "--table-memory-mb=-1 is not in [0, 2^30]"},
           {{"--table-memory-mb", "64"}, "--table-memory-mb=64 bounds the memory tier"},
           {{"--table-storage", "rocksdb", "--table-memory-mb", "64", "--table-capacity-rows", "9"},
            "--table-capacity-rows=9 does not combine with storage=rocksdb"},
           {{"--table-policy", "emb_3:storage=disk"}, "table 'emb_3': storage=disk is not one of"},
           {{"--table-policy", "emb_3:storage=rocksdb"},
            "table 'emb_3': storage=rocksdb needs a memory budget: set --table-policy: table "
            "'emb_3': memory_mb"},
           {{"--table-policy", "emb_3:memory_mb=-4"}, "table 'emb_3': memory_mb=-4 is not in"},
           {{"--table-policy", "emb_3:memory_mb=4"},
            "table 'emb_3': memory_mb=4 bounds the memory tier of storage=rocksdb"},
       }) {
    Result<JobConfig> bad = ParseJob(args);
    ASSERT_FALSE(bad.ok()) << expect;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(expect), std::string::npos) << bad.status().message();
  }
}

// A model's declared policy (VariableSpec::policy, PyTorch's DistributedOptimizer(tables=)):
// over the --table-* defaults, under the table's --table-policy items, checked with the table's
// name, and never saying where rows live.
TEST(JobFlagsTest, AModelsDeclaredPolicySitsBetweenTheDefaultsAndTheOverrides) {
  Result<JobConfig> r = ParseJob({"--table-ttl-steps", "100", "--table-admission-min-count", "3",
                                  "--table-policy", "emb:ttl_steps=7"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  VariableSpec emb = TableVariable("emb", 0, 4, 0.1f);
  emb.policy = "ttl_steps=50,min_count=2,eviction=lru";
  VariableSpec plain = TableVariable("plain", 0, 4, 0.1f);
  const TablePolicies& p = r->table_policies;
  EXPECT_EQ(p.For(emb).ttl_steps, 7);            // the override wins
  EXPECT_EQ(p.For(emb).admission_min_count, 2);  // the declaration over the default
  EXPECT_EQ(p.For(emb).eviction, EvictionOrder::kLru);
  EXPECT_EQ(p.For(plain).admission_min_count, 3);  // the defaults alone
  EXPECT_TRUE(CheckTablePolicies(p, {emb, plain}).ok());
  EXPECT_NE(VariableListHash({emb}), VariableListHash({TableVariable("emb", 0, 4, 0.1f)}));
  EXPECT_NE(FirstVariableDifference({emb}, "a", {TableVariable("emb", 0, 4, 0.1f)}, "b")
                .find("declares the policy 'ttl_steps=50,min_count=2,eviction=lru' in a's"),
            std::string::npos);
  for (const auto& [declared, expect] : std::vector<std::pair<std::string, std::string>>{
           {"ttl_steps=-1", "table 'emb': ttl_steps=-1 is not in"},
           {"ttl_steps", "table 'emb': the model's policy item 'ttl_steps' is not KEY=VALUE"},
           {"speed=3", "table 'emb': 'speed' is not a policy key"},
           {"storage=rocksdb",
            "table 'emb': the model declares storage=rocksdb, but where the "
            "servers keep rows is the launcher's to say"},
           {"memory_mb=4",
            "give it --table-storage, --table-memory-mb and --table-placement, or "
            "--table-policy emb:memory_mb=4"},
           {"placement=whole", "the model declares placement=whole, but where the servers"},
       }) {
    emb.policy = declared;
    Status bad = CheckTablePolicies(p, {emb});
    EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << declared;
    EXPECT_NE(bad.message().find(expect), std::string::npos) << bad.message();
  }
  // On disk from the flags, a declared capacity does not combine with it.
  Result<JobConfig> tiered = ParseJob({"--table-storage", "rocksdb", "--table-memory-mb", "8"});
  ASSERT_TRUE(tiered.ok());
  emb.policy = "capacity_rows=10";
  EXPECT_NE(CheckTablePolicies(tiered->table_policies, {emb})
                .message()
                .find("table 'emb': capacity_rows=10 does not combine with storage=rocksdb"),
            std::string::npos);
}

// An override naming a fused collection's field is refused naming the joined table it is in.
TEST(JobConfigTest, AnOverrideOfAJoinedTablesSegmentNamesTheTable) {
  Result<JobConfig> r = ParseJob({"--table-policy", "emb.c0.weight:ttl_steps=7"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  VariableSpec joined = TableVariable("emb", 10, 4, 0.1f);
  joined.segments = {{"emb.c0.weight", 4}, {"emb.c1.weight", 6}};
  const Status s = CheckTablePolicies(r->table_policies, {joined});
  EXPECT_NE(s.message().find("'emb.c0.weight', a segment of the joined table 'emb'"),
            std::string::npos)
      << s.ToString();
}

// ToArgs forwards only the options of the job's mode (the receiver refuses the others), and
// what it forwards parses back into the same fields.
TEST(JobConfigTest, ToArgsForwardsOnlyTheModesOwnOptions) {
  for (UpdateMode mode :
       {UpdateMode::kSync, UpdateMode::kAsync, UpdateMode::kSsp, UpdateMode::kSoftsync}) {
    JobConfig c;
    c.mode = mode;
    c.workers = 4;
    c.lr_scaling = LrScaling::kNone;
    const std::vector<std::string> args = c.ToArgs();
    const auto has = [&](const std::string& flag) {
      return std::find(args.begin(), args.end(), flag) != args.end();
    };
    EXPECT_EQ(has("--staleness"), mode == UpdateMode::kSsp);
    EXPECT_EQ(has("--softsync-n"), mode == UpdateMode::kSoftsync);
    EXPECT_EQ(has("--replicas-to-aggregate"), mode == UpdateMode::kSync);
    Result<JobConfig> again = ParseJob(args);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->Fields(), c.Fields());
  }
}

// An update's share of a step and what it makes of --lr and the schedule.
TEST(JobConfigTest, LrScalingIsTheShareOfAStepAnUpdateHolds) {
  JobConfig c;
  c.workers = 8;
  EXPECT_EQ(c.UpdatesPerStep(), 1);
  EXPECT_EQ(c.LrFactor(), 1.0);
  c.replicas_to_aggregate = 6;  // backup workers: still one update per step
  EXPECT_EQ(c.LrFactor(), 1.0);
  c.mode = UpdateMode::kAsync;
  EXPECT_EQ(c.LrFactor(), 1.0 / 8);
  EXPECT_EQ(c.ScheduleStep(80), 10);
  EXPECT_EQ(c.FinalVersion(10), 80);
  c.mode = UpdateMode::kSsp;
  EXPECT_EQ(c.LrFactor(), 1.0 / 8);
  c.mode = UpdateMode::kSoftsync;
  c.softsync_n = 2;  // each update averages 4 of the 8 gradients: half a step
  EXPECT_EQ(c.LrFactor(), 0.5);
  EXPECT_EQ(c.ScheduleStep(80), 40);
  c.lr_scaling = LrScaling::kNone;
  EXPECT_EQ(c.LrFactor(), 1.0);
  EXPECT_EQ(c.ScheduleStep(80), 80);
  Result<JobConfig> none = ParseJob({"--lr-scaling", "none"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->lr_scaling, LrScaling::kNone);
  Result<JobConfig> bad = ParseJob({"--lr-scaling", "linear"});
  EXPECT_NE(bad.status().message().find("--lr-scaling=linear is not one of share, none"),
            std::string::npos)
      << bad.status().message();
}

// In a stale mode under --lr-scaling share, an update's momentum is --momentum less asynchrony's
// own, 1 - 1/k for k updates a step, and the velocity's gain keeps a gradient's whole effect at
// --lr / (1 - --momentum) times its share, reached as sync's velocity builds up; sync,
// --lr-scaling none and other optimizers apply the options as given.
TEST(JobConfigTest, StaleModesTradeMomentumForRateKeepingAGradientsEffect) {
  JobConfig c;
  c.workers = 4;
  c.optimizer.momentum = 0.9f;
  constexpr int64_t kLate = int64_t{1} << 40;  // the gain reached
  const auto effect = [](const OptimizerOptions& o) { return o.velocity_gain / (1 - o.momentum); };
  EXPECT_EQ(c.UpdateOptimizer(0).momentum, 0.9f);  // sync
  EXPECT_EQ(c.UpdateOptimizer(kLate).velocity_gain, 1.0f);
  c.mode = UpdateMode::kAsync;  // k = 4: asynchrony's momentum is 0.75
  EXPECT_NEAR(c.UpdateOptimizer(kLate).momentum, 0.15, 1e-6);
  EXPECT_NEAR(c.UpdateOptimizer(kLate).velocity_gain, 8.5, 1e-5);
  EXPECT_NEAR(effect(c.UpdateOptimizer(kLate)), 10, 1e-4);
  // The gain after u updates: the share of its whole that sync's velocity holds after u / k
  // steps, 1 - 0.9^(u/k). So the first update moves a quarter of a step's gradient by far less
  // than sync's first step does.
  EXPECT_NEAR(c.UpdateOptimizer(0).velocity_gain, 8.5 * (1 - std::pow(0.9, 0.25)), 1e-5);
  EXPECT_LT(c.UpdateOptimizer(0).velocity_gain / 4, 1.0f);
  EXPECT_NEAR(c.UpdateOptimizer(39).velocity_gain, 8.5 * (1 - std::pow(0.9, 10)), 1e-5);
  c.mode = UpdateMode::kSoftsync;
  c.softsync_n = 2;  // k = 2: 0.5
  EXPECT_NEAR(c.UpdateOptimizer(kLate).momentum, 0.4, 1e-6);
  EXPECT_NEAR(c.UpdateOptimizer(kLate).velocity_gain, 6, 1e-5);
  c.softsync_n = 1;  // k = 1: as sync
  EXPECT_EQ(c.UpdateOptimizer(kLate).momentum, 0.9f);
  EXPECT_EQ(c.UpdateOptimizer(0).velocity_gain, 1.0f);
  c.mode = UpdateMode::kSsp;
  c.optimizer.momentum = 0.5f;  // below asynchrony's own: none of its own, gain 2
  EXPECT_EQ(c.UpdateOptimizer(kLate).momentum, 0.0f);
  EXPECT_NEAR(c.UpdateOptimizer(kLate).velocity_gain, 2, 1e-6);
  c.lr_scaling = LrScaling::kNone;
  EXPECT_EQ(c.UpdateOptimizer(kLate).momentum, 0.5f);
  EXPECT_EQ(c.UpdateOptimizer(kLate).velocity_gain, 1.0f);
  c.lr_scaling = LrScaling::kShare;
  c.optimizer.kind = OptimizerKind::kAdam;
  EXPECT_EQ(c.UpdateOptimizer(kLate).velocity_gain, 1.0f);
}

// Found by tests/fuzz/config_fuzzer: ToArgs dropped any field whose value was "false" (and gave
// "true" no value), as if it were a switch, so a worker got --model mlp for --model false.
TEST(JobConfigTest, ToArgsParsesBackToTheSameFieldsWhateverTheText) {
  JobConfig c;
  c.model = "false";
  c.dataset = "true";
  c.optimizer.nesterov = true;
  std::vector<std::string> args = c.ToArgs();
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  JobFlags flags;
  boost::program_options::variables_map vm;
  ASSERT_TRUE(ParseFlags(static_cast<int>(argv.size()), argv.data(), flags.options(), &vm).ok());
  Result<JobConfig> again = flags.ToConfig(vm);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->model, "false");
  EXPECT_EQ(again->dataset, "true");
  EXPECT_TRUE(again->optimizer.nesterov);
  EXPECT_FALSE(again->schedule.staircase);
  EXPECT_EQ(again->Fields(), c.Fields());
}

// ParseFlags on `args` (after the program name) in a thread, so that a hang fails the test
// instead of blocking it: nullopt when it did not return in time (the thread is left behind).
std::optional<Status> ParseWithin(std::vector<std::string> args, std::chrono::seconds limit) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  std::thread([args = std::move(args), done]() mutable {
    JobFlags flags;
    boost::program_options::options_description all;
    all.add_options()("config", boost::program_options::value<std::string>(), "");
    all.add(flags.options());
    args.insert(args.begin(), "prog");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    boost::program_options::variables_map vm;
    done->set_value(ParseFlags(static_cast<int>(argv.size()), argv.data(), all, &vm));
  }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return result.get();
}

// Found by tests/fuzz/config_fuzzer: Boost's error text replaced "%canonical_option%" inside an
// option name that contained it, for ever (towerps-server --a%canonical_option% hung).
TEST(JobFlagsTest, PlaceholdersInNamesAndValuesDoNotHangTheErrorText) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  for (const Case& c :
       {Case{{"--a%canonical_option%b"}, "a%25canonical_option%25b"},
        Case{{"--lr", "x%value%"}, "x%25value%25"}, Case{{"--%option%"}, "%25option%25"}}) {
    std::optional<Status> s = ParseWithin(c.args, std::chrono::seconds(10));
    ASSERT_TRUE(s.has_value()) << c.args[0] << ": ParseFlags did not return in 10 s";
    ASSERT_FALSE(s->ok()) << c.args[0];
    EXPECT_EQ(s->code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s->message().find(c.expect), std::string::npos) << s->message();
  }
  // A placeholder-free error keeps Boost's text.
  std::optional<Status> plain = ParseWithin({"--lr", "fast"}, std::chrono::seconds(10));
  ASSERT_TRUE(plain.has_value() && !plain->ok());
  EXPECT_NE(plain->message().find("'fast'"), std::string::npos) << plain->message();
}

// A --config file of this test's own.
class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("job_flags_test_" + std::to_string(getpid()) + ".ini"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(ConfigFileTest, PlaceholderInAConfigKeyDoesNotHang) {
  std::ofstream(path_) << "lr = 0.1\ngpu%canonical_option%x = 1\n";
  std::optional<Status> s = ParseWithin({"--config", path_}, std::chrono::seconds(10));
  ASSERT_TRUE(s.has_value()) << "ParseFlags did not return in 10 s";
  ASSERT_FALSE(s->ok());
  EXPECT_NE(s->message().find(": line 2: unknown option 'gpu%canonical_option%x'"),
            std::string::npos)
      << s->message();
}

// Found by tests/fuzz/config_fuzzer: a value with a NUL byte was cut short when the launcher
// forwarded it to the workers' command lines.
TEST_F(ConfigFileTest, ANulByteIsAnErrorNamingTheLine) {
  std::ofstream(path_, std::ios::binary) << std::string("lr = 0.1\ndata-dir = /d\0x\n", 25);
  std::optional<Status> s = ParseWithin({"--config", path_}, std::chrono::seconds(10));
  ASSERT_TRUE(s.has_value()) << "ParseFlags did not return in 10 s";
  ASSERT_FALSE(s->ok());
  EXPECT_EQ(s->code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s->message().find(": line 2 has a NUL byte"), std::string::npos) << s->message();
  std::ofstream(path_) << "lr = 0.1\n";
  std::optional<Status> good = ParseWithin({"--config", path_}, std::chrono::seconds(10));
  ASSERT_TRUE(good.has_value() && good->ok()) << (good ? good->ToString() : "no return");
}

// A --config file's mistakes are named with the file, the line and what to write instead.
TEST_F(ConfigFileTest, MistakesNameTheFileTheLineAndTheFix) {
  struct Case {
    std::string text, expect;
  };
  for (const Case& c : {
           Case{"lr = 0.1\n# a comment\nwrokers = 2\n",
                ": line 3: unknown option 'wrokers'; did you mean 'workers'?"},
           Case{"--lr = 0.1\n",
                ": line 1: unknown option '--lr'; write the key without its "
                "leading '--' ('lr = ...')"},
           Case{"lr = 0.1\n[job]\nworkers = 2\n",
                ": line 2: sections ('[job]') are not used; write every option at the top level"},
           Case{"\nlr 0.1\n", ": line 2: 'lr 0.1' is not 'key = value'"},
           Case{"workers = 2\nlr = fast\n", ": line 2: the argument ('fast') for option 'lr'"},
           Case{"colour = blue\n", ": line 1: unknown option 'colour' (see --help)"},
           // Found by tests/fuzz/config_fuzzer: a key of dashes alone threw std::out_of_range.
           Case{"lr = 0.1\n-- = 1\n", ": line 2: unknown option '--'"},
           Case{"= 1\n", ": line 1: '= 1' has no key before '='"},
       }) {
    std::ofstream(path_) << c.text;
    std::optional<Status> s = ParseWithin({"--config", path_}, std::chrono::seconds(10));
    ASSERT_TRUE(s.has_value()) << "ParseFlags did not return in 10 s";
    ASSERT_FALSE(s->ok()) << c.text;
    EXPECT_EQ(s->code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s->message().rfind("--config " + path_ + c.expect, 0), 0u) << s->message();
  }
  std::ofstream(path_) << "# the job\nlr = 0.1   # a rate\n\nworkers=2\n";
  std::optional<Status> good = ParseWithin({"--config", path_}, std::chrono::seconds(10));
  ASSERT_TRUE(good.has_value() && good->ok()) << (good ? good->ToString() : "no return");
}

// A mistyped flag on the command line gets the nearest flag, as the same typo in a file does.
TEST(JobFlagsTest, AMistypedFlagIsNamedWithTheNearestOne) {
  std::optional<Status> s = ParseWithin({"--wrokers", "2"}, std::chrono::seconds(10));
  ASSERT_TRUE(s.has_value()) << "ParseFlags did not return in 10 s";
  EXPECT_EQ(s->code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s->message().find("'--wrokers'; did you mean '--workers'? (see --help)"),
            std::string::npos)
      << s->message();
}

// A checkpoint serves a longer run of the same job: only the options that say how long to
// train may differ; anything else is named with both values.
TEST(ResumableTest, OnlyTheTrainingLengthMayDiffer) {
  JobConfig written;
  written.epochs = 1;
  JobConfig longer = written;
  longer.epochs = 2;
  longer.max_steps = 5000;
  EXPECT_TRUE(CheckResumable(longer, written.ResumableFields()).ok());
  EXPECT_NE(longer.Fingerprint(), written.Fingerprint());  // the processes of one job still agree

  JobConfig other = written;
  other.optimizer.learning_rate = 0.1f;
  const Status s = CheckResumable(other, written.ResumableFields());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("written with --lr 0.05, this job has --lr 0.1"), std::string::npos)
      << s.message();

  auto missing = written.ResumableFields();
  missing.pop_back();
  EXPECT_EQ(CheckResumable(written, missing).code(), StatusCode::kFailedPrecondition);

  // A checkpoint from before --table-placement was recorded placed its tables by rows: it
  // resumes a job placing them by rows, and a job placing them whole is told why not.
  auto before = written.ResumableFields();
  std::erase_if(before, [](const auto& f) { return f.first == "--table-placement"; });
  ASSERT_EQ(before.size() + 1, written.ResumableFields().size());
  EXPECT_TRUE(CheckResumable(written, before).ok()) << CheckResumable(written, before);
  JobConfig whole = written;
  whole.table_policies.defaults.placement = TablePlacement::kWhole;
  EXPECT_NE(CheckResumable(whole, before).message().find("it does not record --table-placement"),
            std::string::npos);
}

// Floats print as written, in --help, in job fields and in errors.
TEST(JobFlagsTest, FloatDefaultsPrintAsWritten) {
  JobFlags flags;
  std::ostringstream help;
  help << flags.options();
  EXPECT_NE(help.str().find("--lr arg (=0.05)"), std::string::npos) << help.str();
  EXPECT_EQ(help.str().find("0.0500000007"), std::string::npos);
  JobConfig job;
  job.optimizer.learning_rate = 0.1f;
  const auto fields = job.Fields();
  EXPECT_NE(
      std::find(fields.begin(), fields.end(), std::pair<std::string, std::string>("--lr", "0.1")),
      fields.end());
}

}  // namespace
}  // namespace towerps::ps
