#include "common/command_line.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>

#include "common/build_info.h"
#include "common/parse.h"

namespace po = boost::program_options;

namespace towerps {
namespace {

// Reads an error's placeholder values, which Boost keeps protected (a pointer to a member named
// through a derived class is the standard's way in).
struct ErrorSubstitutions : po::error_with_option_name {
  static std::map<std::string, std::string> Of(const po::error_with_option_name& e) {
    return e.*(&ErrorSubstitutions::m_substitutions);
  }
};

}  // namespace

po::typed_value<float>* FloatFlag(float* value) {
  return po::value(value)->default_value(*value, ShortestText(*value));
}

Status ParseFlags(int argc, char** argv, const po::options_description& desc,
                  po::variables_map* vm) {
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), *vm);
    if (vm->count("config")) {
      const std::string path = (*vm)["config"].as<std::string>();
      std::ifstream file(path, std::ios::binary);
      if (!file) return NotFoundError("--config " + path + ": cannot open the file");
      const std::string text((std::istreambuf_iterator<char>(file)), {});
      // A NUL would cut a value short when it is forwarded on a command line.
      if (const size_t nul = text.find('\0'); nul != std::string::npos) {
        const auto line = 1 + std::count(text.begin(), text.begin() + nul, '\n');
        return InvalidArgumentError("--config " + path + ": line " + std::to_string(line) +
                                    " has a NUL byte; the file must be text ('lr = 0.1' lines)");
      }
      std::istringstream in(text);
      po::store(po::parse_config_file(in, desc), *vm);
    }
    po::notify(*vm);
  } catch (po::error& e) {
    return InvalidArgumentError(ProgramOptionsErrorText(e) + " (see --help)");
  }
  return Status::Ok();
}

std::string ProgramOptionsErrorText(po::error& e) {
  if (auto* named = dynamic_cast<po::error_with_option_name*>(&e)) {
    for (const auto& [key, value] : ErrorSubstitutions::Of(*named)) {
      if (value.find('%') == std::string::npos) continue;
      std::string escaped;
      for (char c : value) escaped += c == '%' ? std::string("%25") : std::string(1, c);
      named->set_substitute(key, escaped);
    }
  }
  return e.what();
}

std::optional<int> ParseCommandLine(std::string_view program, int argc, char** argv,
                                    const po::options_description& desc, po::variables_map* vm) {
  if (Status s = ParseFlags(argc, argv, desc, vm); !s.ok()) {
    std::cerr << program << ": " << s.message() << "\n";
    return 2;
  }
  if (vm->count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (vm->count("version")) {
    std::cout << program << " " << BuildVersion() << "\n";
    return 0;
  }
  return std::nullopt;
}

}  // namespace towerps
