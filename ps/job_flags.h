// Command-line and config-file parsing for JobConfig. Used by the entry points (main functions)
// only; libraries take the typed JobConfig.
//
// Every process of a job accepts the same job flags, on the command line or in an INI file given
// with --config (Boost.Program_options syntax: "lr = 0.1"; command-line values win).
#ifndef TOWERPS_PS_JOB_FLAGS_H_
#define TOWERPS_PS_JOB_FLAGS_H_

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "ps/job_config.h"
#include "towerps/result.h"

namespace towerps::ps {

class JobFlags {
 public:
  JobFlags();
  JobFlags(const JobFlags&) = delete;
  JobFlags& operator=(const JobFlags&) = delete;

  // The job options, bound to this object; add them to the program's description.
  const boost::program_options::options_description& options() const { return desc_; }
  // After parsing: the validated config, or an error naming the bad flag.
  Result<JobConfig> ToConfig() const;

 private:
  JobConfig config_;
  std::string mode_, optimizer_, schedule_;
  boost::program_options::options_description desc_;
};

// A float flag bound to `value`, whose default --help prints as written: "0.05", where Boost
// would print "0.0500000007".
boost::program_options::typed_value<float>* FloatFlag(float* value);

// Parses argv and, when --config FILE is given, that file too. Boost's errors become a
// kInvalidArgument Status naming the option. `program` prefixes messages.
Status ParseFlags(int argc, char** argv, const boost::program_options::options_description& desc,
                  boost::program_options::variables_map* vm);

// The text of a Boost.Program_options error. Boost 1.74 builds it by replacing each %placeholder%
// until none is left, so an option name or value that contains one ("--a%value%") makes what()
// loop for ever; this writes a '%' inside names and values as "%25" first. Use it instead of
// e.what() wherever a user's text can be in the error.
std::string ProgramOptionsErrorText(boost::program_options::error& e);

// An entry point's command line: ParseFlags, then --help and --version (when `desc` has them).
// Returns the exit code when `program` should stop here (0 after printing the options for --help
// or "<program> <version>" for --version, 2 after printing the error as
// "<program>: <message>" to stderr), or nullopt to go on.
std::optional<int> ParseCommandLine(std::string_view program, int argc, char** argv,
                                    const boost::program_options::options_description& desc,
                                    boost::program_options::variables_map* vm);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_JOB_FLAGS_H_
