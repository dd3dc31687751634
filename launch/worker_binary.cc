#include "launch/worker_binary.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "launch/command_lines.h"
#include "towerps/registry.h"
#include "worker/choices.h"

namespace towerps::launch {

Result<WorkerAnswer> AskWorkerBinary(const std::vector<std::string>& argv,
                                     std::chrono::milliseconds timeout) {
  char path[] = "/tmp/towerps-ask-worker-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return IoError(std::string("cannot create a file in /tmp: ") + std::strerror(errno));
  close(fd);
  const std::string answer_path = path;
  WorkerAnswer answer;
  std::optional<int> code;
  {
    SubprocessOptions so;
    so.argv = argv;
    so.output_path = answer_path;
    Result<Subprocess> ask = Subprocess::Start(so);
    if (!ask.ok()) {
      std::remove(answer_path.c_str());
      return ask.status();
    }
    code = ask->Wait(Deadline::After(timeout));
    std::ifstream in(answer_path);
    answer.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }  // one still running is killed here
  std::remove(answer_path.c_str());
  while (!answer.text.empty() && answer.text.back() == '\n') answer.text.pop_back();
  if (!code) {
    return TimeoutError("--worker-bin " + argv[0] + " did not answer " + argv.back() + " within " +
                        std::to_string(timeout.count()) + " ms");
  }
  answer.code = *code;
  return answer;
}

Result<std::string> ListChoices(const std::string& worker_binary,
                                std::chrono::milliseconds timeout) {
  if (worker_binary.empty()) return worker::ChoicesJson(StockRegistry());
  if (access(worker_binary.c_str(), X_OK) != 0) {
    return NotFoundError("--worker-bin " + worker_binary +
                         " is not an executable file; check the path");
  }
  TOWERPS_ASSIGN_OR_RETURN(const WorkerAnswer a,
                           AskWorkerBinary({worker_binary, "--list-choices"}, timeout));
  if (a.code != 0) {
    return FailedPreconditionError(
        "--worker-bin " + worker_binary + " --list-choices exited with code " +
        std::to_string(a.code) +
        " (is it a TowerPS worker built with towerps::WorkerMain?): " + a.text.substr(0, 2000));
  }
  return a.text;
}

Result<std::vector<std::pair<std::string, OptionDef>>> WorkerBinaryOptions(
    const std::string& worker_binary, std::chrono::milliseconds timeout) {
  TOWERPS_ASSIGN_OR_RETURN(const std::string text, ListChoices(worker_binary, timeout));
  const nlohmann::json choices = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<std::pair<std::string, OptionDef>> options;
  if (!choices.is_object() || !choices.contains("options")) return options;  // declares none
  for (const nlohmann::json& o : choices["options"]) {
    if (!o.is_object() || !o.value("name", nlohmann::json()).is_string()) {
      return FailedPreconditionError("--worker-bin " + worker_binary +
                                     " --list-choices gave an option without a name: " + o.dump());
    }
    options.emplace_back(o["name"].get<std::string>(),
                         OptionDef{.help = o.value("help", std::string()),
                                   .default_value = o.value("default", std::string())});
  }
  return options;
}

Result<std::map<std::string, std::string>> RecommendedFlags(const std::string& worker_binary,
                                                            const std::string& model,
                                                            std::chrono::milliseconds timeout) {
  TOWERPS_ASSIGN_OR_RETURN(const std::string text, ListChoices(worker_binary, timeout));
  const nlohmann::json choices = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::map<std::string, std::string> flags;
  if (!choices.is_object() || !choices.contains("recommended") ||
      !choices["recommended"].is_object() || !choices["recommended"].contains(model)) {
    return flags;
  }
  for (const auto& [flag, value] : choices["recommended"][model].items()) {
    if (!value.is_string()) {
      return FailedPreconditionError("--list-choices recommends a non-string value for --" + flag +
                                     " of model " + model + ": " + value.dump());
    }
    flags[flag] = value.get<std::string>();
  }
  return flags;
}

Status CheckJobWithWorkerBinary(const LaunchOptions& o) {
  std::vector<std::string> argv = WorkerJobArgs(o);
  argv.insert(argv.begin(), WorkerBinary(o));
  argv.push_back("--check-job");
  TOWERPS_ASSIGN_OR_RETURN(const WorkerAnswer a, AskWorkerBinary(argv, o.startup_timeout));
  switch (a.code) {
    case 0:
      return Status::Ok();
    case 2:
      return InvalidArgumentError(a.text);
    case 3:
      if (o.all_local) {
        return InvalidArgumentError(
            "--data-dir " +
            (o.worker.data_dir.empty() ? std::string("(unset)") : o.worker.data_dir) +
            ": the workers run on this machine and cannot read their data here: " + a.text);
      }
      std::printf("[launch] note: %s; each worker checks its data where it runs\n", a.text.c_str());
      std::fflush(stdout);
      return Status::Ok();
    default:
      return FailedPreconditionError(
          "--worker-bin " + argv[0] + " --check-job exited with code " + std::to_string(a.code) +
          " (is it a TowerPS worker built with towerps::WorkerMain?): " + a.text.substr(0, 2000));
  }
}

}  // namespace towerps::launch
