// SshOptions: how a hostfile job reaches its hosts (launch/backends/hostfile_launcher.h): the
// hosts (a hostfile or -H's list), the ssh client and its options, and the variables exported to
// every remote process; SshFlags, the flags they come from.
//
// Contract: plain values; SshOptionsFromFlags is a pure function of its arguments.
#ifndef TOWERPS_LAUNCH_SSH_OPTIONS_H_
#define TOWERPS_LAUNCH_SSH_OPTIONS_H_

#include <string>
#include <vector>

#include "launch/role.h"
#include "towerps/result.h"

namespace towerps::launch {

struct SshOptions {
  std::string hostfile;               // path of the hostfile
  std::string host_list;              // or -H: "host1:4,host2:4", as horovodrun takes it
  std::string ssh = "ssh";            // the ssh client
  std::vector<std::string> ssh_opts;  // passed to ssh before the host
  // "NAME=value" set for every remote process (`--export NAME`, like mpirun -x): an ssh session
  // starts from the remote login environment, not from this one.
  std::vector<std::string> env;
};

// --hostfile, -H, --ssh, --ssh-opts and --export as given.
struct SshFlags {
  std::string hostfile, host_list, ssh = "ssh", ssh_opts;
  std::vector<std::string> exports;  // NAME[,NAME...] each
  bool given() const { return !hostfile.empty() || !host_list.empty(); }
};
// The ssh options of a hostfile job: --ssh-opts split at spaces (-n and -f are refused: they cut
// the session's stdin, which stops the remote process), and each --export NAME read from `env`
// (an unset one is refused). Also refuses --hostfile with -H. Errors name the flag and value.
Result<SshOptions> SshOptionsFromFlags(const SshFlags& flags, const Environment& env);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_SSH_OPTIONS_H_
