// VariableSpec: what a worker declares about one model variable. Value type.
// VariableListHash: the 64-bit hash of a model's variable list that workers send as the model
// signature and servers compare. Pure function, thread-safe.
#ifndef TOWERPS_JOB_VARIABLE_H_
#define TOWERPS_JOB_VARIABLE_H_

#include <cstdint>
#include <string>

#include <vector>

#include "common/tensor.h"
#include "towerps/status.h"

namespace towerps::ps {

// How a variable's value moves.
//  kTrainable      by the job's optimizer, from the gradients pushed.
//  kMovingAverage  a statistic, e.g. batch norm's moving mean and variance: what is pushed in
//                  place of a gradient is the statistic of the step's batch, and the value
//                  becomes decay * value + (1 - decay) * statistic (no learning rate, momentum
//                  or weight decay). In sync mode the workers' statistics are averaged in rank
//                  order first, as gradients are, so reruns keep their bits.
//  kTable          an embedding table of shape [rows, dim]: rows of `dim` floats keyed by 64-bit
//                  ids, pulled and pushed by id, spread over the servers by a hash of the id,
//                  and created on a server when first updated, with values drawn from (seed,
//                  table name, id) uniform in [-init_scale, init_scale). rows = 0: unbounded (any
//                  id); otherwise ids must be below it. Optimized per row by the job's
//                  --table-optimizer (ps/server/table_chunk.h).
enum class VariableKind : uint8_t { kTrainable = 0, kMovingAverage = 1, kTable = 2 };

// The most floats a table row may hold.
inline constexpr int64_t kMaxTableDim = 65536;
// The most elements a dense variable may hold (256 GiB of float32, more than any one server
// holds): a bound on what a register message can make a server allocate.
inline constexpr int64_t kMaxDenseElements = int64_t{1} << 36;

// One of the tables a joined table is made of (VariableSpec::segments).
struct TableSegment {
  std::string name;  // the table it stands for, e.g. "tables.c3.weight"
  int64_t rows = 0;  // its bound: at least 1

  bool operator==(const TableSegment&) const = default;
};

// The most segments a joined table may have.
inline constexpr size_t kMaxTableSegments = 65536;

struct VariableSpec {
  std::string name;  // unique in the model, e.g. "conv1/kernel"
  Shape shape;
  DType dtype = DType::kFloat32;
  VariableKind kind = VariableKind::kTrainable;
  float decay = 0.0f;       // kMovingAverage: in [0, 1)
  float init_scale = 0.0f;  // kTable: initial values uniform in [-init_scale, init_scale)
  // kTable: the admission and eviction the model declares for it, "KEY=VALUE,..."
  // (job/table_policy.h); "" for none.
  std::string policy{};
  // kTable: the bounded tables it joins, in order (TorchRec's fused tables, FBGEMM's "table
  // batched" embeddings), or none. Segment k holds the ids [offset_k, offset_k + rows_k),
  // offset_k being the rows of the segments before it, and its row offset_k + i starts as row i
  // of a table named name_k does (job/initial_rows.h). Rows train independently of each other, so
  // a joined table has, bit for bit, the rows its segments would have apart, while a step moves
  // and updates one table instead of one per segment; --export-npz and a PyTorch state_dict give
  // the segments apart. The segments' rows add up to the table's.
  std::vector<TableSegment> segments{};

  bool is_table() const { return kind == VariableKind::kTable; }
  // kTable: the bound on ids (0: unbounded) and the floats per row.
  int64_t table_rows() const { return shape.at(0); }
  int64_t table_dim() const { return shape.at(1); }
};

// A table variable: `rows` = 0 for an unbounded one.
VariableSpec TableVariable(std::string name, int64_t rows, int64_t dim, float init_scale);

// FNV-1a (common/hash.h) over the number of variables, then each one's name, rank, dimensions
// and dtype, in order, and for a variable that is not kTrainable its kind and decay, and for a
// table its init_scale and any declared policy and segments (so the signatures of models without
// such variables are what they were). Two lists hash alike exactly when they are equal (up to
// collisions).
uint64_t VariableListHash(const std::vector<VariableSpec>& variables);

// The first difference between two variable lists, for a refusal to name: "variable 3 is
// 'fc/bias' [10] in <a_name>'s model but 'fc/b' [10] in <b_name>'s", or the first variable one
// list has beyond the other's end, or their kinds; "" when they are equal.
std::string FirstVariableDifference(const std::vector<VariableSpec>& a, const std::string& a_name,
                                    const std::vector<VariableSpec>& b, const std::string& b_name);

// kInvalidArgument naming the variable for an unknown kind, a dense variable that is not
// float32 or holds more than kMaxDenseElements, a moving average whose decay is not in [0, 1),
// or a table that is not float32 [rows >= 0, dim >= 1] with a finite init_scale >= 0, or whose
// segments are not named apart, of at least 1 row each, adding up to its rows (an unbounded
// table has none).
Status ValidateVariableKind(const VariableSpec& variable);

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_VARIABLE_H_
