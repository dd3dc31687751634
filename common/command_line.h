// Command lines and --config files of every entry point (towerps-server, towerps-worker,
// towerps-launch, towerps-bench), with Boost.Program_options. Libraries take typed options
// structs; only the entry points and their flag tables (job/job_flags.h, worker/worker_flags.h,
// launch/launch_flags.h) see Boost.
//
// Contract: free functions; no state. Errors are kInvalidArgument (kNotFound for a --config file
// that cannot be opened) naming the option, the file and the line.
#ifndef TOWERPS_COMMON_COMMAND_LINE_H_
#define TOWERPS_COMMON_COMMAND_LINE_H_

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "towerps/status.h"

namespace towerps {

// A float flag bound to `value`, whose default --help prints as written: "0.05", where Boost
// would print "0.0500000007".
boost::program_options::typed_value<float>* FloatFlag(float* value);

// Parses argv and, when --config FILE is given, that file too (INI: "lr = 0.1" lines; the
// command line wins). Boost's errors become a kInvalidArgument Status naming the option.
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

}  // namespace towerps

#endif  // TOWERPS_COMMON_COMMAND_LINE_H_
