// The job's flags: JobConfig's command-line and config-file options. Used by the entry points
// (main functions) only; libraries take the typed JobConfig. The parsing is common/command_line.h.
//
// Every process of a job accepts the same job flags, on the command line or in an INI file given
// with --config (Boost.Program_options syntax: "lr = 0.1"; command-line values win).
#ifndef TOWERPS_JOB_JOB_FLAGS_H_
#define TOWERPS_JOB_JOB_FLAGS_H_

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/command_line.h"  // the flag helpers every entry point uses
#include "job/job_config.h"
#include "towerps/result.h"

namespace towerps::ps {

class JobFlags {
 public:
  JobFlags();
  JobFlags(const JobFlags&) = delete;
  JobFlags& operator=(const JobFlags&) = delete;

  // The job options, bound to this object; add them to the program's description.
  const boost::program_options::options_description& options() const { return desc_; }
  // After parsing into `vm`: the validated config, or an error naming the bad flag. An option
  // of another mode given (on the command line or in --config), e.g. --staleness without
  // --mode ssp, is an error naming the option and its mode.
  Result<JobConfig> ToConfig(const boost::program_options::variables_map& vm) const;

  // The tables' policy flags that name a value (job/table_policy.h), as given.
  struct TablePolicyNames {
    std::string eviction, storage, placement;
  };

 private:
  JobConfig config_;
  std::string mode_, optimizer_, table_optimizer_, schedule_, lr_scaling_;
  TablePolicyNames table_names_;
  boost::program_options::options_description desc_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_JOB_FLAGS_H_
