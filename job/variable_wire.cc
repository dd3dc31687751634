#include "job/variable_wire.h"

namespace towerps::ps {

void WriteVariables(const std::vector<VariableSpec>& variables, proto::Header::Builder header) {
  auto vars = header.initVariables(static_cast<unsigned>(variables.size()));
  for (size_t i = 0; i < variables.size(); ++i) {
    auto v = vars[static_cast<unsigned>(i)];
    v.setName(variables[i].name);
    v.setDtype(static_cast<proto::DType>(variables[i].dtype));
    v.setKind(static_cast<uint8_t>(variables[i].kind));
    v.setDecay(variables[i].decay);
    v.setInitScale(variables[i].init_scale);
    if (!variables[i].policy.empty()) v.setPolicy(variables[i].policy);
    if (!variables[i].segments.empty()) {
      auto segments = v.initSegments(static_cast<unsigned>(variables[i].segments.size()));
      for (size_t k = 0; k < variables[i].segments.size(); ++k) {
        segments[static_cast<unsigned>(k)].setName(variables[i].segments[k].name);
        segments[static_cast<unsigned>(k)].setRows(variables[i].segments[k].rows);
      }
    }
    auto shape = v.initShape(static_cast<unsigned>(variables[i].shape.size()));
    for (size_t d = 0; d < variables[i].shape.size(); ++d) {
      shape.set(static_cast<unsigned>(d), variables[i].shape[d]);
    }
  }
}

std::vector<VariableSpec> ReadVariables(proto::Header::Reader header) {
  std::vector<VariableSpec> vars;
  for (auto v : header.getVariables()) {
    VariableSpec spec;
    spec.name = v.getName().cStr();
    for (int64_t d : v.getShape()) spec.shape.push_back(d);
    spec.dtype = static_cast<DType>(v.getDtype());
    spec.kind = static_cast<VariableKind>(v.getKind());
    spec.decay = v.getDecay();
    spec.init_scale = v.getInitScale();
    spec.policy = v.getPolicy().cStr();
    for (auto s : v.getSegments()) {
      spec.segments.push_back({s.getName().cStr(), s.getRows()});
      if (spec.segments.size() > kMaxTableSegments) break;  // ValidateVariableKind refuses it
    }
    vars.push_back(std::move(spec));
  }
  return vars;
}

void WriteConfigFields(const std::vector<std::pair<std::string, std::string>>& fields,
                       proto::Header::Builder header) {
  auto list = header.initConfigFields(static_cast<unsigned>(fields.size()));
  for (size_t i = 0; i < fields.size(); ++i) {
    list[static_cast<unsigned>(i)].setName(fields[i].first);
    list[static_cast<unsigned>(i)].setValue(fields[i].second);
  }
}

std::vector<std::pair<std::string, std::string>> ReadConfigFields(proto::Header::Reader header) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto f : header.getConfigFields()) {
    out.emplace_back(f.getName().cStr(), f.getValue().cStr());
  }
  return out;
}

}  // namespace towerps::ps
