#include "launch/role.h"

#include <gtest/gtest.h>

namespace towerps::launch {
namespace {

constexpr char kSpec[] =
    R"({"cluster": {"ps": ["10.0.0.1:7000", "10.0.0.2:7001"], "worker": ["a:1", "b:2", "c:3"]},
        "task": {"type": "worker", "index": 2}})";

TEST(ClusterSpecTest, RolesAndEndpoints) {
  auto ps = RoleFromClusterSpec(kSpec, "ps", 1, "spec.json");
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->role, RoleAssignment::Role::kServer);
  EXPECT_EQ(ps->rank, 1);
  EXPECT_EQ(ps->port, 7001);
  EXPECT_EQ(ps->servers, 2);
  EXPECT_EQ(ps->workers, 3);
  auto task = RoleFromClusterSpec(kSpec, "", -1, "TOWERPS_CONFIG");  // from "task"
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->role, RoleAssignment::Role::kWorker);
  EXPECT_EQ(task->rank, 2);
  EXPECT_EQ(task->ps_endpoints,
            (std::vector<std::string>{"tcp://10.0.0.1:7000", "tcp://10.0.0.2:7001"}));
  EXPECT_EQ(task->dist_endpoint, "tcp://a:7002");  // worker 0's host, after the ps ports
}

// TensorFlow's TF_CONFIG: the chief is worker 0 and the "worker" list follows it; TF1's
// "master" is the same; a chief alone needs no "worker" list; a task without an index is 0.
TEST(ClusterSpecTest, TheChiefIsWorkerZero) {
  const std::string cluster =
      R"({"cluster": {"ps": ["p:7000"], "chief": ["c:1"], "worker": ["a:1", "b:2"]}, "task": )";
  auto chief =
      RoleFromClusterSpec(cluster + R"({"type": "chief", "index": 0}})", "", -1, "TF_CONFIG");
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_EQ(chief->role, RoleAssignment::Role::kWorker);
  EXPECT_EQ(chief->rank, 0);
  EXPECT_EQ(chief->workers, 3);
  auto worker =
      RoleFromClusterSpec(cluster + R"({"type": "worker", "index": 1}})", "", -1, "TF_CONFIG");
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->rank, 2);
  auto by_flag = RoleFromClusterSpec(cluster + "{}}", "worker", 0, "spec.json");
  ASSERT_TRUE(by_flag.ok()) << by_flag.status();
  EXPECT_EQ(by_flag->rank, 1);
  auto ps = RoleFromClusterSpec(cluster + R"({"type": "ps"}})", "", -1, "TF_CONFIG");
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->role, RoleAssignment::Role::kServer);
  EXPECT_EQ(ps->port, 7000);

  auto master = RoleFromClusterSpec(
      R"({"cluster": {"ps": ["p:7000"], "master": ["m:1"]}, "task": {"type": "master"}})", "", -1,
      "TF_CONFIG");
  ASSERT_TRUE(master.ok()) << master.status();
  EXPECT_EQ(master->rank, 0);
  EXPECT_EQ(master->workers, 1);

  for (const auto& [json, expect] : std::vector<std::pair<std::string, std::string>>{
           {cluster + R"({"type": "worker", "index": 2}})", "index 2 is outside the 2 \"worker\""},
           {cluster + R"({"type": "chief", "index": 1}})", "chief index 1 is not 0"},
           {cluster + R"({"type": "evaluator", "index": 0}})", "the chief evaluates"},
           {R"({"ps": ["p:1"], "chief": ["c:1", "d:2"]})", "it takes exactly one"},
           {R"({"ps": ["p:1"], "chief": ["c:1"], "master": ["m:1"]})", "both \"chief\" and"}}) {
    auto r = RoleFromClusterSpec(json, json.find("task") == std::string::npos ? "ps" : "", 0,
                                 "TF_CONFIG");
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
  }
}

TEST(ClusterSpecTest, ErrorsNameTheProblem) {
  struct Case {
    std::string json, role;
    int index;
    std::string expect;
  };
  for (const Case& c :
       {Case{"{not json", "ps", 0, "not valid JSON"},
        Case{R"({"ps": ["h:1"]})", "ps", 0, "no \"worker\" list"},
        Case{R"({"ps": ["h"], "worker": ["w:1"]})", "ps", 0, "'h' is not host:port"},
        Case{R"({"ps": ["h:1"], "worker": ["w:1"]})", "chief", 0, "'chief'"},
        Case{R"({"ps": ["h:1"], "worker": ["w:1"]})", "worker", 3, "index 3"},
        Case{R"({"ps": ["h:1"], "worker": ["w:1"]})", "", -1, "no \"task\""},
        Case{R"({"ps": [7000], "worker": ["w:1"]})", "ps", 0, "entry '7000' is not host:port"},
        Case{R"({"ps": "h:1", "worker": ["w:1"]})", "ps", 0, "not a list"},
        Case{R"({"ps": ["h:70000"], "worker": ["w:1"]})", "worker", 0, "'h:70000'"},
        Case{R"({"ps": ["h:1"], "worker": ["w:1"], "task": {"type": "worker", "index": 0.5}})", "",
             -1, "task.index 0.5 is not an integer"},
        Case{R"(["h:1"])", "ps", 0, "not a JSON object"}}) {
    auto r = RoleFromClusterSpec(c.json, c.role, c.index, "spec.json");
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

TEST(ClusterSpecTest, ParseErrorsNameTheSourceAndSayWhere) {
  auto r = RoleFromClusterSpec("{\"ps\": [\"h:1\",]}", "ps", 0, "cluster.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("cluster.json: not valid JSON"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("line 1, column"), std::string::npos) << r.status();
}

// Found by tests/fuzz/cluster_spec_fuzzer: a number too large for a double threw
// json::out_of_range, which escaped and ended towerps-launch with std::terminate.
TEST(ClusterSpecTest, NumberOverflowIsAnErrorNotAnException) {
  for (const std::string& spec : {std::string(R"({"ps": [1e400], "worker": ["w:1"]})"),
                                  std::string(R"({"ps": ["h:1"], "worker": ["w:1"], )"
                                              R"("task": {"type": "ps", "index": -1e999}})")}) {
    auto r = RoleFromClusterSpec(spec, "", -1, "TOWERPS_CONFIG");
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("TOWERPS_CONFIG: not valid JSON"), std::string::npos)
        << r.status();
    EXPECT_NE(r.status().message().find("number overflow"), std::string::npos) << r.status();
  }
}

TEST(ClusterSpecTest, TaskIndexMayBeAString) {
  // Accepted before the spec was read with a JSON parser; still accepted.
  auto r = RoleFromClusterSpec(
      R"({"ps": ["h:1"], "worker": ["a:1", "b:1"], "task": {"type": "worker", "index": "1"}})", "",
      -1, "TOWERPS_CONFIG");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank, 1);
}

TEST(MpiLayoutTest, OpenMpiAndPmiVariables) {
  auto l = MpiLayout({{"OMPI_COMM_WORLD_RANK", "2"},
                      {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->rank, 2);
  EXPECT_EQ(l->hosts_of_rank.size(), 4u);  // one node: loopback endpoints
  auto p = MpiLayout({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->hosts_of_rank.empty());  // hosts unknown: rendezvous through --run-dir
  EXPECT_EQ(MpiLayout({}).status().code(), StatusCode::kNotFound);
  auto bad = MpiLayout({{"PMI_RANK", "1x"}, {"PMI_SIZE", "3"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("PMI_RANK: '1x'"), std::string::npos) << bad.status();
  EXPECT_FALSE(MpiLayout({{"PMI_RANK", "-1"}, {"PMI_SIZE", "3"}}).ok());
}

TEST(SlurmLayoutTest, BlockDistributionOverNodes) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::vector<int>>>{
           {"2(x3),1", {2, 2, 2, 1}}, {"4", {4}}}) {
    Result<std::vector<int>> tasks = ParseTasksPerNode(text);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    EXPECT_EQ(*tasks, want) << text;
  }
  for (const std::string bad : {"two", "2x", "2(x3", "2(3)", "2(x)", "0", "2(x0)", ""}) {
    EXPECT_FALSE(ParseTasksPerNode(bad).ok()) << "'" << bad << "'";
  }
  const std::vector<std::string> nodes = {"n1", "n2", "n3"};
  auto l = SlurmLayout({{"SLURM_PROCID", "3"},
                        {"SLURM_NTASKS", "5"},
                        {"SLURM_LOCALID", "1"},
                        {"SLURM_TASKS_PER_NODE", "2(x2),1"}},
                       nodes);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->hosts_of_rank, (std::vector<std::string>{"n1", "n1", "n2", "n2", "n3"}));
  EXPECT_FALSE(SlurmLayout({{"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "5"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_TASKS_PER_NODE", "2"}},
                           nodes)
                   .ok());
}

TEST(RoleFromLayoutTest, FirstRanksOrFirstPerNodeAreServers) {
  RankLayout l{3, 5, 1, {"n1", "n1", "n2", "n2", "n3"}};
  auto a = RoleFromLayout(l, 2, 0, 7000);  // ranks 0, 1 serve
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->role, RoleAssignment::Role::kWorker);
  EXPECT_EQ(a->rank, 1);
  EXPECT_EQ(a->ps_endpoints, (std::vector<std::string>{"tcp://n1:7000", "tcp://n1:7001"}));
  auto b = RoleFromLayout(l, 0, 1, 7000);  // one server per node: ranks 0, 2, 4
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->servers, 3);
  EXPECT_EQ(b->workers, 2);
  EXPECT_EQ(b->rank, 1);  // rank 3 is the second worker
  EXPECT_EQ(b->ps_endpoints.back(), "tcp://n3:7002");
  // Worker 0 (rank 2 in a, rank 1 in b) keeps the collectives' rendezvous, after the servers'
  // ports.
  EXPECT_EQ(a->dist_endpoint, "tcp://n2:7002");
  EXPECT_EQ(b->dist_endpoint, "tcp://n1:7003");
  EXPECT_EQ(RoleFromLayout({3, 5, 1, {}}, 2, 0, 7000)->dist_endpoint, "");  // hosts unknown
  l.rank = 2;
  auto s = RoleFromLayout(l, 0, 1, 7000);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->role, RoleAssignment::Role::kServer);
  EXPECT_EQ(s->port, 7001);
  EXPECT_FALSE(RoleFromLayout(l, 5, 0, 7000).ok());  // no worker left
}

}  // namespace
}  // namespace towerps::launch
