#include "launch/ssh_options.h"

#include <sstream>

namespace towerps::launch {

Result<SshOptions> SshOptionsFromFlags(const SshFlags& flags, const Environment& env) {
  if (!flags.hostfile.empty() && !flags.host_list.empty()) {
    return InvalidArgumentError("give the hosts once: --hostfile FILE or -H HOST:N,...");
  }
  SshOptions ssh;
  ssh.hostfile = flags.hostfile;
  ssh.host_list = flags.host_list;
  ssh.ssh = flags.ssh;
  std::istringstream words(flags.ssh_opts);
  for (std::string w; words >> w;) {
    if (w == "-n" || w == "-f") {
      return InvalidArgumentError("--ssh-opts " + w +
                                  " would cut the session's stdin, which stops the remote "
                                  "process; drop it");
    }
    ssh.ssh_opts.push_back(w);
  }
  for (const std::string& list : flags.exports) {
    std::istringstream names(list);
    for (std::string name; std::getline(names, name, ',');) {
      if (name.empty()) continue;
      const auto value = env.find(name);
      if (value == env.end()) {
        return InvalidArgumentError("--export " + name +
                                    ": no such variable in this environment; set it or drop it");
      }
      ssh.env.push_back(name + "=" + value->second);
    }
  }
  return ssh;
}

}  // namespace towerps::launch
