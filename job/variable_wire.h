// A model's variable list in a message header (Header.variables): written by a registering
// worker and by a server answering a restarted peer's join, read by the servers. And the job's
// configuration fields (JobConfig::Fields, Header.configFields) a registering worker sends for
// the servers to compare with theirs (CompareConfigFields).
//
// Contract: free functions; thread-safe. Reading copies out of the header; it trusts what the
// decoder validated (field types) and leaves the values' meaning to ValidateVariableKind and the
// model checks of the caller.
#ifndef TOWERPS_JOB_VARIABLE_WIRE_H_
#define TOWERPS_JOB_VARIABLE_WIRE_H_

#include <string>
#include <utility>
#include <vector>

#include "common/proto/towerps.capnp.h"
#include "job/variable.h"

namespace towerps::ps {

void WriteVariables(const std::vector<VariableSpec>& variables, proto::Header::Builder header);
std::vector<VariableSpec> ReadVariables(proto::Header::Reader header);

void WriteConfigFields(const std::vector<std::pair<std::string, std::string>>& fields,
                       proto::Header::Builder header);
std::vector<std::pair<std::string, std::string>> ReadConfigFields(proto::Header::Reader header);

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_VARIABLE_WIRE_H_
