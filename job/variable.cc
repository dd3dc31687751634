#include "job/variable.h"

#include <algorithm>
#include <cmath>

#include "common/hash.h"

namespace towerps::ps {

namespace {

std::string Describe(const VariableSpec& v) { return "'" + v.name + "' " + ShapeToString(v.shape); }

std::string DescribeSegments(const VariableSpec& v) {
  constexpr size_t kNamed = 4;  // the first few, enough to see where two lists part
  std::string out = std::to_string(v.segments.size()) + " segments";
  for (size_t k = 0; k < std::min(kNamed, v.segments.size()); ++k) {
    out +=
        (k == 0 ? " ('" : ", '") + v.segments[k].name + "' " + std::to_string(v.segments[k].rows);
  }
  if (v.segments.size() > kNamed) out += ", ...";
  return out + (v.segments.empty() ? "" : ")");
}

}  // namespace

std::string FirstVariableDifference(const std::vector<VariableSpec>& a, const std::string& a_name,
                                    const std::vector<VariableSpec>& b, const std::string& b_name) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string at = "variable " + std::to_string(i) + " ";
    if (i >= a.size()) {
      return at + Describe(b[i]) + " is in " + b_name + "'s model, not in " + a_name + "'s (" +
             std::to_string(a.size()) + " variables)";
    }
    if (i >= b.size()) {
      return at + Describe(a[i]) + " is in " + a_name + "'s model, not in " + b_name + "'s (" +
             std::to_string(b.size()) + " variables)";
    }
    const VariableSpec &x = a[i], &y = b[i];
    if (x.name != y.name || x.shape != y.shape || x.dtype != y.dtype) {
      return at + "is " + Describe(x) + " in " + a_name + "'s model but " + Describe(y) + " in " +
             b_name + "'s";
    }
    if (x.kind != y.kind || x.decay != y.decay || x.init_scale != y.init_scale) {
      return at + Describe(x) + " is of another kind (or decay, or initial scale) in " + a_name +
             "'s model than in " + b_name + "'s";
    }
    if (x.segments != y.segments) {
      return at + Describe(x) + " joins " + DescribeSegments(x) + " in " + a_name +
             "'s model but " + DescribeSegments(y) + " in " + b_name + "'s";
    }
    if (x.policy != y.policy) {
      return at + Describe(x) + " declares the policy '" + x.policy + "' in " + a_name +
             "'s model but '" + y.policy + "' in " + b_name + "'s";
    }
  }
  return "";
}

uint64_t VariableListHash(const std::vector<VariableSpec>& variables) {
  uint64_t h = Fnv1aU64(variables.size(), kFnv1aOffsetBasis);
  for (const VariableSpec& v : variables) {
    h = Fnv1aU64(v.name.size(), h);
    h = Fnv1a(v.name.data(), v.name.size(), h);
    h = Fnv1aU64(v.shape.size(), h);
    for (int64_t d : v.shape) h = Fnv1aU64(static_cast<uint64_t>(d), h);
    const auto dtype = static_cast<uint8_t>(v.dtype);
    h = Fnv1a(&dtype, 1, h);
    if (v.kind != VariableKind::kTrainable) {
      const auto kind = static_cast<uint8_t>(v.kind);
      h = Fnv1a(&kind, 1, h);
      h = Fnv1a(&v.decay, sizeof(v.decay), h);
    }
    if (v.is_table()) h = Fnv1a(&v.init_scale, sizeof(v.init_scale), h);
    if (v.is_table() && !v.policy.empty()) h = Fnv1a(v.policy.data(), v.policy.size(), h);
    if (v.is_table() && !v.segments.empty()) {
      h = Fnv1aU64(v.segments.size(), h);
      for (const TableSegment& s : v.segments) {
        h = Fnv1aU64(s.name.size(), h);
        h = Fnv1a(s.name.data(), s.name.size(), h);
        h = Fnv1aU64(static_cast<uint64_t>(s.rows), h);
      }
    }
  }
  return h;
}

VariableSpec TableVariable(std::string name, int64_t rows, int64_t dim, float init_scale) {
  VariableSpec v;
  v.name = std::move(name);
  v.shape = {rows, dim};
  v.kind = VariableKind::kTable;
  v.init_scale = init_scale;
  return v;
}

namespace {

// A dense variable: float32, of at most kMaxDenseElements.
Status ValidateDense(const VariableSpec& v) {
  if (v.dtype != DType::kFloat32) {
    return InvalidArgumentError("variable " + v.name + ": dtype " +
                                std::to_string(static_cast<int>(v.dtype)) +
                                ", where servers hold float32 (0)");
  }
  Result<int64_t> n = CheckedNumElements(v.shape);
  if (!n.ok()) return n.status().WithContext("variable " + v.name);
  if (*n > kMaxDenseElements) {
    return InvalidArgumentError("variable " + v.name + ": shape " + ShapeToString(v.shape) +
                                " has more than " + std::to_string(kMaxDenseElements) +
                                " elements");
  }
  return Status::Ok();
}

// A joined table's segments: named apart, each of at least one row, their rows the table's.
Status ValidateSegments(const VariableSpec& v) {
  if (v.segments.empty()) return Status::Ok();
  const std::string what = "table " + v.name + ": ";
  if (v.table_rows() == 0) {
    return InvalidArgumentError(what +
                                "an unbounded table cannot join segments (each segment's "
                                "ids are the rows before it onwards)");
  }
  if (v.segments.size() > kMaxTableSegments) {
    return InvalidArgumentError(what + std::to_string(v.segments.size()) + " segments, more than " +
                                std::to_string(kMaxTableSegments));
  }
  std::vector<std::string> names;
  int64_t rows = 0;
  for (const TableSegment& s : v.segments) {
    if (s.name.empty() || s.rows < 1 || s.rows > v.table_rows() - rows) {
      return InvalidArgumentError(what + "segment '" + s.name + "' of " + std::to_string(s.rows) +
                                  " rows: give each segment a name and at least 1 row, their "
                                  "rows adding up to the table's " +
                                  std::to_string(v.table_rows()));
    }
    rows += s.rows;
    names.push_back(s.name);
  }
  if (rows != v.table_rows()) {
    return InvalidArgumentError(what + "its segments hold " + std::to_string(rows) +
                                " rows, not the table's " + std::to_string(v.table_rows()));
  }
  std::sort(names.begin(), names.end());
  if (auto twin = std::adjacent_find(names.begin(), names.end()); twin != names.end()) {
    return InvalidArgumentError(what + "two segments are named '" + *twin + "'");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateVariableKind(const VariableSpec& v) {
  if (!v.is_table() && !v.segments.empty()) {
    return InvalidArgumentError("variable " + v.name + ": only a table joins segments");
  }
  switch (v.kind) {
    case VariableKind::kTrainable:
      return ValidateDense(v);
    case VariableKind::kMovingAverage:
      TOWERPS_RETURN_IF_ERROR(ValidateDense(v));
      if (v.decay >= 0.0f && v.decay < 1.0f) return Status::Ok();
      return InvalidArgumentError("variable " + v.name + ": moving-average decay " +
                                  std::to_string(v.decay) + " is not in [0, 1)");
    case VariableKind::kTable:
      if (v.shape.size() != 2 || v.shape[0] < 0 || v.shape[1] < 1 || v.shape[1] > kMaxTableDim ||
          v.dtype != DType::kFloat32) {
        return InvalidArgumentError("table " + v.name + ": shape " + ShapeToString(v.shape) +
                                    " is not [rows, dim] of float32 with rows >= 0 (0: unbounded)"
                                    " and dim in 1.." +
                                    std::to_string(kMaxTableDim));
      }
      if (!(v.init_scale >= 0.0f) || !std::isfinite(v.init_scale)) {
        return InvalidArgumentError("table " + v.name + ": init scale " +
                                    std::to_string(v.init_scale) + " is not a finite number >= 0");
      }
      return ValidateSegments(v);
  }
  return InvalidArgumentError("variable " + v.name + ": unknown kind " +
                              std::to_string(static_cast<int>(v.kind)));
}

}  // namespace towerps::ps
