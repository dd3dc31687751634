// towerps._towerps: the Python extension (pybind11) over python/session.h. The Python side
// (python/towerps/torch.py) holds the PyTorch glue; this file only converts: NumPy arrays to
// pointers, Status to exceptions (kInvalidArgument: ValueError, kTimeout: TimeoutError, others:
// RuntimeError, each with the message), and releases the GIL while it waits on the servers.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/build_info.h"
#include "common/logging.h"
#include "job/initial_rows.h"
#include "job/row_batch.h"
#include "python/session.h"
#include "python/session_options.h"

namespace py = pybind11;

namespace towerps::python {
namespace {

using FloatArray = py::array_t<float, py::array::c_style>;
using IdArray = py::array_t<uint64_t, py::array::c_style>;

// A server that did not answer in time: TimeoutError in Python (translated in the module, with
// the GIL held; Raise runs where it is released).
struct ServerTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void Raise(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      throw py::value_error(s.message());
    case StatusCode::kTimeout:
      throw ServerTimeout(s.message());
    default:
      throw std::runtime_error(s.message());
  }
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(*r);
}

// The parsed options, and the logging they ask for (a script's process has no other main()).
SessionOptions ParseOptions(const std::vector<std::string>& args, const std::string& secret) {
  SessionOptions o = Take(ParseSessionArgs(args, secret));
  InitLogging({.role = "worker", .rank = o.rank, .min_level = o.log_level});
  return o;
}

py::dict JobSettings(const SessionOptions& o) {
  py::dict d;
  for (const auto& [flag, value] : o.job.ModeFields()) d[py::str(flag.substr(2))] = value;
  return d;
}

void CheckSize(const py::array& a, const std::string& name, int64_t elements) {
  if (a.size() != elements) {
    throw py::value_error("parameter '" + name + "' has " + std::to_string(a.size()) +
                          " elements here, " + std::to_string(elements) + " registered");
  }
}

// An array the values are written into in place: float32, C-contiguous and writable, or
// ValueError naming the parameter (a converted copy would take the values instead).
float* WritableBuffer(py::array& a, const std::string& name, int64_t elements) {
  CheckSize(a, name, elements);
  if (!a.dtype().is(py::dtype::of<float>()) || !(a.flags() & py::array::c_style) ||
      !a.writeable()) {
    throw py::value_error("parameter '" + name +
                          "' is not a writable, contiguous float32 array: TowerPS trains "
                          "float32 CPU parameters");
  }
  return static_cast<float*>(a.mutable_data());
}

// A table as torch.py declares it: (name, rows, dim, init scale, policy, segments' (name, rows)).
using TableTuple = std::tuple<std::string, int64_t, int64_t, float, std::string,
                              std::vector<std::pair<std::string, int64_t>>>;

class PySession {
 public:
  PySession(const SessionOptions& options, std::vector<std::string> names,
            std::vector<std::vector<int64_t>> shapes, std::vector<FloatArray> initial,
            std::vector<TableTuple> tables, int64_t bucket_bytes) {
    if (bucket_bytes < 0) {
      throw py::value_error(
          "bucket_cap_mb is negative: give 0 (each gradient goes as backward "
          "produces it) or a bucket's size in MiB");
    }
    if (names.size() != shapes.size() || names.size() != initial.size()) {
      throw py::value_error("names, shapes and initial values differ in number");
    }
    std::vector<ParameterSpec> specs;
    std::vector<const float*> values;
    for (size_t i = 0; i < names.size(); ++i) {
      specs.push_back({.name = names[i], .shape = shapes[i]});
      const int64_t n = NumElements(shapes[i]);
      CheckSize(initial[i], names[i], n);
      values.push_back(initial[i].data());
      elements_.push_back(n);
    }
    names_ = names;
    std::vector<TableSpec> table_specs;
    for (const auto& [name, rows, dim, scale, policy, segments] : tables) {
      table_specs.push_back(
          {.name = name, .rows = rows, .dim = dim, .init_scale = scale, .policy = policy});
      for (const auto& [n, r] : segments) table_specs.back().segments.push_back({n, r});
      dims_.push_back(dim);
    }
    SessionOptions o = options;
    o.worker.bucket_bytes = bucket_bytes;
    py::gil_scoped_release unlocked;
    session_ = Take(Session::Start(std::move(o), std::move(specs), values, std::move(table_specs)));
  }

  // Table t's rows for `ids` (uint64), as a new [n, dim] array.
  py::array_t<float> PullRows(int t, const IdArray& ids, bool step) {
    CheckTable(t);
    const auto n = static_cast<int64_t>(ids.size());
    py::array_t<float> rows({n, dims_[static_cast<size_t>(t)]});
    const uint64_t* id = ids.data();
    float* out = rows.mutable_data();
    {
      py::gil_scoped_release unlocked;
      Check(session_->tables().PullRows(t, id, n, out, step));
    }
    return rows;
  }

  void PushRows(int t, const IdArray& ids, const FloatArray& gradients) {
    CheckRows(t, ids, gradients);
    const uint64_t* id = ids.data();
    const float* g = gradients.data();
    py::gil_scoped_release unlocked;
    Check(session_->tables().PushRows(t, id, g, static_cast<int64_t>(ids.size())));
  }

  // Every lookup's rows at once (TableLookups::Lookup): per (table, uint64 ids), the step's
  // distinct ids of that table (uint64 [u]), their rows (float32 [u, dim]) and each id's row
  // index (int64 [n]).
  py::list Lookup(const std::vector<std::pair<int, IdArray>>& lookups, bool step) {
    std::vector<TableLookups::Ids> ids;
    for (const auto& [t, array] : lookups) {
      CheckTable(t);
      ids.push_back({.table = t, .ids = {array.data(), static_cast<size_t>(array.size())}});
    }
    std::vector<TableLookups::Rows> got;
    {
      py::gil_scoped_release unlocked;
      Check(session_->tables().Lookup(ids, &got, step));
    }
    py::list out;
    for (const TableLookups::Rows& r : got) {
      out.append(py::make_tuple(
          py::array_t<uint64_t>({r.ids.num_elements()}, r.ids.u64()),
          py::array_t<float>({r.rows.shape()[0], r.rows.shape()[1]}, r.rows.f32()),
          py::array_t<int64_t>({static_cast<int64_t>(r.inverse.size())}, r.inverse.data())));
    }
    return out;
  }

  // A collection's lookup (towerps.torch.nn.EmbeddingBagCollection): field k's ids are row k
  // of `columns` (uint64 [fields, batch]) and its table tables[k], all of one width. Returns its
  // fields' distinct ids one after another (uint64 [u]), their rows as one block (float32
  // [u, dim]), where each field's start in them (int64 [fields + 1]), and for each example and
  // field the index of its row in the block (int64 [batch, fields]): what the forward computes
  // from, without a Python operation per field.
  py::tuple LookupFields(const std::vector<int>& tables, const IdArray& columns, bool step) {
    const auto fields = static_cast<int64_t>(tables.size());
    if (fields == 0 || columns.ndim() != 2 || columns.shape(0) != fields) {
      throw py::value_error("lookup_fields: " + std::to_string(fields) +
                            " tables but ids of another shape; give uint64 [fields, batch]");
    }
    const int64_t batch = columns.shape(1), dim = CommonDim("lookup_fields", tables);
    std::vector<TableLookups::Ids> ids;
    for (int64_t k = 0; k < fields; ++k) {
      ids.push_back({.table = tables[static_cast<size_t>(k)],
                     .ids = {columns.data() + k * batch, static_cast<size_t>(batch)}});
    }
    std::vector<TableLookups::Rows> got;
    {
      py::gil_scoped_release unlocked;
      Check(session_->tables().Lookup(ids, &got, step));
    }
    py::array_t<int64_t> starts(fields + 1);
    int64_t* start = starts.mutable_data();
    start[0] = 0;
    for (int64_t k = 0; k < fields; ++k) {
      start[k + 1] = start[k] + got[static_cast<size_t>(k)].ids.num_elements();
    }
    const int64_t u = start[fields];
    py::array_t<uint64_t> all_ids(u);
    py::array_t<float> rows({u, dim});
    py::array_t<int64_t> inverse({batch, fields});
    uint64_t* id = all_ids.mutable_data();
    float* row = rows.mutable_data();
    int64_t* at = inverse.mutable_data();
    {
      py::gil_scoped_release unlocked;
      for (int64_t k = 0; k < fields; ++k) {
        const TableLookups::Rows& r = got[static_cast<size_t>(k)];
        const int64_t n = r.ids.num_elements();
        std::copy_n(r.ids.u64(), n, id + start[k]);
        std::copy_n(r.rows.f32(), n * dim, row + start[k] * dim);
        for (int64_t b = 0; b < batch; ++b) at[b * fields + k] = start[k] + r.inverse[b];
      }
    }
    return py::make_tuple(all_ids, rows, starts, inverse);
  }

  // A collection's gradient (LookupFields' block's): field k's rows [starts[k], starts[k + 1])
  // of `ids` and `gradients` added to table tables[k]'s (AddRows), in one call.
  void AddFieldsRows(const std::vector<int>& tables, const IdArray& ids,
                     const py::array_t<int64_t, py::array::c_style>& starts,
                     const FloatArray& gradients) {
    const auto fields = static_cast<int64_t>(tables.size());
    if (starts.size() != fields + 1 || fields == 0) {
      throw py::value_error("add_fields_rows: " + std::to_string(fields) + " tables but " +
                            std::to_string(starts.size()) + " starts; give one more than tables");
    }
    const int64_t dim = CommonDim("add_fields_rows", tables);
    const int64_t* start = starts.data();
    if (start[0] != 0 || start[fields] != static_cast<int64_t>(ids.size()) ||
        gradients.size() != static_cast<int64_t>(ids.size()) * dim) {
      throw py::value_error("add_fields_rows: " + std::to_string(ids.size()) + " ids, " +
                            std::to_string(gradients.size()) + " gradient values of rows of " +
                            std::to_string(dim) + " and starts ending at " +
                            std::to_string(start[fields]) + " do not match");
    }
    for (int64_t k = 0; k < fields; ++k) {
      if (start[k + 1] < start[k]) {
        throw py::value_error("add_fields_rows: field " + std::to_string(k) + " (table " +
                              std::to_string(tables[static_cast<size_t>(k)]) +
                              ") does not fit the block: its start is past its end");
      }
    }
    const uint64_t* id = ids.data();
    const float* g = gradients.data();
    py::gil_scoped_release unlocked;
    for (int64_t k = 0; k < fields; ++k) {
      Check(session_->tables().AddRows(tables[static_cast<size_t>(k)], id + start[k],
                                       g + start[k] * dim, start[k + 1] - start[k]));
    }
  }

  // Table t's gradient rows for distinct looked-up `ids`, added to the step's (AddRows).
  void AddRows(int t, const IdArray& ids, const FloatArray& gradients) {
    CheckRows(t, ids, gradients);
    const uint64_t* id = ids.data();
    const float* g = gradients.data();
    py::gil_scoped_release unlocked;
    Check(session_->tables().AddRows(t, id, g, static_cast<int64_t>(ids.size())));
  }

  // Every table's rows as the servers hold them: per table, (ids uint64 [n], rows [n, dim]).
  py::list ExportTables() {
    std::vector<ps::HeldRows> tables;
    {
      py::gil_scoped_release unlocked;
      tables = Take(session_->tables().Export(session_->FinalVersion()));
    }
    py::list out;
    for (size_t t = 0; t < tables.size(); ++t) {
      const ps::HeldRows& r = tables[t];
      const int64_t n = r.ids.num_elements();
      out.append(py::make_tuple(py::array_t<uint64_t>({n}, r.ids.u64()),
                                py::array_t<float>({n, dims_[t]}, r.values.f32())));
    }
    return out;
  }

  void AwaitValues(std::vector<py::array> dst) {
    std::vector<float*> buffers = Buffers(dst);
    py::gil_scoped_release unlocked;
    Check(session_->AwaitValues(buffers));
  }

  void Push(int v, const FloatArray& gradient) {
    const float* data = gradient.data();
    const auto n = static_cast<int64_t>(gradient.size());
    py::gil_scoped_release unlocked;
    Check(session_->Push(v, data, n));
  }

  // Parameter v's gradient buffer as an array viewing it (its base `self`, which the Session
  // outlives), or None: see Session::GradientBuffer.
  static py::object GradientBuffer(const py::object& self, int v, bool keep_values) {
    auto& me = self.cast<PySession&>();
    if (v < 0 || v >= static_cast<int>(me.names_.size())) {
      throw py::value_error("no parameter " + std::to_string(v));
    }
    float* data = me.session_->GradientBuffer(v, keep_values);
    if (data == nullptr) return py::none();
    return py::array_t<float>({me.elements_[static_cast<size_t>(v)]}, data, self);
  }

  int64_t copied_pushes() const { return session_->copied_pushes(); }
  int64_t looked_up_ahead() const { return session_->looked_up_ahead(); }

  void PullFinal(std::vector<py::array> dst) {
    std::vector<float*> buffers = Buffers(dst);
    py::gil_scoped_release unlocked;
    Check(session_->PullFinal(buffers));
  }

  // `ahead`: the next step's lookups (table, ids), whose pulls ride on this step's pushes.
  void EndStep(std::optional<double> loss, const std::vector<std::pair<int, IdArray>>& ahead) {
    std::vector<TableLookups::Ids> ids;
    for (const auto& [t, array] : ahead) {
      CheckTable(t);
      ids.push_back({.table = t, .ids = {array.data(), static_cast<size_t>(array.size())}});
    }
    py::gil_scoped_release unlocked;
    Check(session_->EndStep(loss, ids));
  }

  std::string Finish(double test_accuracy, double test_loss, double final_train_loss, double epochs,
                     std::vector<std::pair<std::string, double>> measures,
                     std::vector<std::pair<std::string, FloatArray>> own) {
    std::vector<towerps::worker::NpzMember> arrays;
    for (const auto& [name, a] : own) {
      std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
      Tensor t = Tensor::Empty(shape);
      std::memcpy(t.f32(), a.data(), t.byte_size());
      arrays.push_back({name, std::move(t)});
    }
    py::gil_scoped_release unlocked;
    return Take(session_->Finish({.test_accuracy = test_accuracy,
                                  .test_loss = test_loss,
                                  .final_train_loss = final_train_loss,
                                  .epochs = epochs,
                                  .measures = std::move(measures)},
                                 std::move(arrays)));
  }

  void LogEval(double test_accuracy, double test_loss) {
    session_->LogEval({.test_accuracy = test_accuracy, .test_loss = test_loss, .measures = {}});
  }
  void LogScalar(const std::string& tag, double value) { session_->LogScalar(tag, value); }
  void SetEpoch(int64_t epoch) { session_->set_epoch(epoch); }
  void Leave() { session_->Leave(); }
  int64_t iteration() const { return session_->iteration(); }
  int64_t start_iteration() const { return session_->start_iteration(); }

 private:
  void CheckTable(int t) const {
    if (t < 0 || t >= static_cast<int>(dims_.size())) {
      throw py::value_error("no table " + std::to_string(t));
    }
  }
  // The rows' width every one of `tables` has (a collection's are all one); errors name `call`.
  int64_t CommonDim(const char* call, const std::vector<int>& tables) const {
    for (int t : tables) CheckTable(t);
    const int64_t dim = dims_[static_cast<size_t>(tables.front())];
    for (int t : tables) {
      if (dims_[static_cast<size_t>(t)] != dim) {
        throw py::value_error(std::string(call) + ": table " + std::to_string(t) + " has rows of " +
                              std::to_string(dims_[static_cast<size_t>(t)]) + ", not " +
                              std::to_string(dim) + " as the first");
      }
    }
    return dim;
  }

  void CheckRows(int t, const IdArray& ids, const FloatArray& gradients) const {
    CheckTable(t);
    const auto n = static_cast<int64_t>(ids.size());
    if (gradients.size() != n * dims_[static_cast<size_t>(t)]) {
      throw py::value_error("table " + std::to_string(t) + ": " + std::to_string(n) + " ids but " +
                            std::to_string(gradients.size()) + " gradient values (rows of " +
                            std::to_string(dims_[static_cast<size_t>(t)]) + ")");
    }
  }

  // One writable buffer per parameter.
  std::vector<float*> Buffers(std::vector<py::array>& dst) const {
    if (dst.size() != names_.size()) {
      throw py::value_error("got " + std::to_string(dst.size()) + " arrays for " +
                            std::to_string(names_.size()) + " parameters");
    }
    std::vector<float*> buffers;
    for (size_t i = 0; i < dst.size(); ++i)
      buffers.push_back(WritableBuffer(dst[i], names_[i], elements_[i]));
    return buffers;
  }

  std::vector<std::string> names_;
  std::vector<int64_t> elements_;
  std::vector<int64_t> dims_;  // per table
  std::unique_ptr<Session> session_;
};

// The gradient of a lookup's [rows, dim] block from its looked-up ids' [n, dim] (ps::SumRowsAt:
// F.embedding's backward, bit for bit).
py::array_t<float> SumRows(const py::array_t<int64_t, py::array::c_style>& inverse,
                           const FloatArray& gradients, int64_t rows) {
  if (gradients.ndim() != 2 || gradients.shape(0) != inverse.size() || rows < 0) {
    throw py::value_error("sum_rows: give [n] int64 indices, [n, dim] gradients, rows >= 0");
  }
  py::array_t<float> out({rows, static_cast<int64_t>(gradients.shape(1))});
  Check(ps::SumRowsAt({inverse.data(), static_cast<size_t>(inverse.size())}, gradients.data(),
                      gradients.shape(1), rows, out.mutable_data()));
  return out;
}

}  // namespace
}  // namespace towerps::python

PYBIND11_MODULE(_towerps, m) {
  using namespace towerps::python;
  m.doc() = "TowerPS's C++ worker session (use towerps.torch)";
  m.attr("__version__") = towerps::BuildVersion();
  py::register_local_exception_translator([](std::exception_ptr e) {
    try {
      if (e) std::rethrow_exception(e);
    } catch (const ServerTimeout& timeout) {
      PyErr_SetString(PyExc_TimeoutError, timeout.what());
    }
  });
  m.def("worker_args_from_json",
        [](const std::string& json) { return Take(WorkerArgsFromJson(json)); });
  // A table's initial rows as the servers draw them (job/initial_rows.h): for tests and for
  // scripts that evaluate before any step.
  m.def(
      "initial_rows",
      [](uint64_t seed, const std::string& table, float init_scale, const IdArray& ids,
         int64_t dim) {
        const towerps::ps::InitialRows initial(seed, table, init_scale);
        py::array_t<float> rows({static_cast<int64_t>(ids.size()), dim});
        for (py::ssize_t i = 0; i < ids.size(); ++i)
          initial.Fill(ids.data()[i], dim, rows.mutable_data() + i * dim);
        return rows;
      },
      py::arg("seed"), py::arg("table"), py::arg("init_scale"), py::arg("ids"), py::arg("dim"));
  // The gradient of a lookup's block of rows (towerps.torch.nn): ps::SumRowsAt.
  m.def("sum_rows", &SumRows, py::arg("inverse"), py::arg("gradients"), py::arg("rows"));
  py::class_<SessionOptions>(m, "Options")
      .def(py::init(&ParseOptions), py::arg("args"), py::arg("secret_file"))
      .def_readonly("rank", &SessionOptions::rank)
      .def_property_readonly("workers", [](const SessionOptions& o) { return o.job.workers; })
      .def_property_readonly("servers",
                             [](const SessionOptions& o) { return o.ps_endpoints.size(); })
      .def_property_readonly("settings", &JobSettings)
      .def_property_readonly("dist_endpoint",
                             [](const SessionOptions& o) { return o.worker.dist_endpoint; })
      .def_property_readonly("join_timeout_s",
                             [](const SessionOptions& o) { return o.worker.join_timeout.count(); })
      .def_property_readonly("rpc_timeout_ms",
                             [](const SessionOptions& o) { return o.worker.rpc_timeout.count(); });
  py::class_<PySession>(m, "Session")
      .def(py::init<const SessionOptions&, std::vector<std::string>,
                    std::vector<std::vector<int64_t>>, std::vector<FloatArray>,
                    std::vector<TableTuple>, int64_t>(),
           py::arg("options"), py::arg("names"), py::arg("shapes"), py::arg("initial"),
           py::arg("tables") = std::vector<TableTuple>{},
           py::arg("bucket_bytes") = towerps::worker::WorkerOptions{}.bucket_bytes)
      .def("log_eval", &PySession::LogEval, py::arg("test_accuracy"), py::arg("test_loss"))
      .def("log_scalar", &PySession::LogScalar, py::arg("tag"), py::arg("value"))
      .def("set_epoch", &PySession::SetEpoch, py::arg("epoch"))
      .def("pull_rows", &PySession::PullRows, py::arg("t"), py::arg("ids"), py::arg("step") = true)
      .def("push_rows", &PySession::PushRows)
      .def("lookup", &PySession::Lookup, py::arg("lookups"), py::arg("step") = true)
      .def("add_rows", &PySession::AddRows, py::arg("t"), py::arg("ids"), py::arg("gradients"))
      .def("lookup_fields", &PySession::LookupFields, py::arg("tables"), py::arg("columns"),
           py::arg("step") = true)
      .def("add_fields_rows", &PySession::AddFieldsRows, py::arg("tables"), py::arg("ids"),
           py::arg("starts"), py::arg("gradients"))
      .def("export_tables", &PySession::ExportTables)
      .def("await_values", &PySession::AwaitValues)
      .def("push", &PySession::Push)
      .def("gradient_buffer", &PySession::GradientBuffer, py::arg("v"), py::arg("keep_values"))
      .def_property_readonly("copied_pushes", &PySession::copied_pushes)
      .def_property_readonly("looked_up_ahead", &PySession::looked_up_ahead)
      .def("pull_final", &PySession::PullFinal)
      .def("leave", &PySession::Leave, py::call_guard<py::gil_scoped_release>())
      .def("end_step", &PySession::EndStep, py::arg("loss") = py::none(),
           py::arg("ahead") = std::vector<std::pair<int, IdArray>>{})
      .def("finish", &PySession::Finish, py::arg("test_accuracy") = -1.0,
           py::arg("test_loss") = -1.0, py::arg("final_train_loss") = -1.0,
           py::arg("epochs") = -1.0,
           py::arg("measures") = std::vector<std::pair<std::string, double>>{},
           py::arg("own") = std::vector<std::pair<std::string, FloatArray>>{})
      .def_property_readonly("iteration", &PySession::iteration)
      .def_property_readonly("start_iteration", &PySession::start_iteration);
}
