#include "common/command_line.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

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

// Levenshtein distance, for "did you mean" (names are short).
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The option of `desc` closest to `key` when it is a likely typo (at most 2 edits), else "".
std::string ClosestOption(const po::options_description& desc, const std::string& key) {
  std::string best;
  size_t best_distance = 3;
  for (const auto& option : desc.options()) {
    const std::string& name = option->long_name();
    if (name.empty()) continue;
    const size_t d = EditDistance(key, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best;
}

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") + 1 - begin);
}

// A --config file's keys and their line numbers, read as Boost reads the file: '#' starts a
// comment, "[section]" prefixes the keys after it with "section.", other lines are "key = value".
// Checks each key against `desc` first, so that a typo is named with its line (Boost names only
// the key) and the nearest flag; a line that is not "key = value" is named too.
Status CheckConfigKeys(const std::string& path, const std::string& text,
                       const po::options_description& desc,
                       std::map<std::string, int>* line_of_key) {
  std::istringstream in(text);
  std::string section;
  int n = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++n;
    const std::string line = Trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    const std::string where = "--config " + path + ": line " + std::to_string(n) + ": ";
    if (line.front() == '[' && line.back() == ']') {
      section = Trim(line.substr(1, line.size() - 2));
      return InvalidArgumentError(
          where + "sections ('[" + section +
          "]') are not used; write every option at the top level, as 'key = value' lines");
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      return InvalidArgumentError(where + "'" + line +
                                  "' is not 'key = value' (a flag's long name without '--', as "
                                  "in 'lr = 0.1'; a switch is 'key = true')");
    }
    const std::string key = Trim(line.substr(0, eq));
    if (key.empty()) {
      return InvalidArgumentError(
          where + "'" + line + "' has no key before '=' (write 'key = value', as in 'lr = 0.1')");
    }
    (*line_of_key)[key] = n;
    if (desc.find_nothrow(key, /*approx=*/false) != nullptr) continue;
    std::string hint;
    // A key of dashes alone ('-- = 1') has no name left once they are dropped.
    const std::string bare = key.substr(std::min(key.find_first_not_of('-'), key.size()));
    if (bare != key && !bare.empty() && desc.find_nothrow(bare, false) != nullptr) {
      hint = "; write the key without its leading '--' ('" + bare + " = ...')";
    } else if (const std::string near = ClosestOption(desc, key); !near.empty()) {
      hint = "; did you mean '" + near + "'?";
    }
    return InvalidArgumentError(where + "unknown option '" + key + "'" + hint + " (see --help)");
  }
  return Status::Ok();
}

}  // namespace

po::typed_value<float>* FloatFlag(float* value) {
  return po::value(value)->default_value(*value, ShortestText(*value));
}

Status ParseFlags(int argc, char** argv, const po::options_description& desc,
                  po::variables_map* vm) {
  try {
    const po::parsed_options parsed = po::command_line_parser(argc, argv).options(desc).run();
    for (const po::option& o : parsed.options) {
      // Boost drops a word that is no option's value without a word ("--max-steps 5 extra").
      if (o.position_key < 0 || o.original_tokens.empty()) continue;
      return InvalidArgumentError(
          "unexpected argument '" + o.original_tokens.front() +
          "': every argument is an option (--name value); a value with spaces, such as "
          "--worker-cmd's command, goes in quotes: --worker-cmd \"python3 train.py --epochs 3\" "
          "(see --help)");
    }
    po::store(parsed, *vm);
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
      std::map<std::string, int> line_of_key;
      TOWERPS_RETURN_IF_ERROR(CheckConfigKeys(path, text, desc, &line_of_key));
      std::istringstream in(text);
      try {
        po::store(po::parse_config_file(in, desc), *vm);
      } catch (po::error_with_option_name& e) {
        // A bad value: named with its line.
        std::string key = e.get_option_name();
        key.erase(0, std::min(key.find_first_not_of('-'), key.size()));
        const auto it = line_of_key.find(key);
        const std::string line =
            it == line_of_key.end() ? "" : ": line " + std::to_string(it->second);
        return InvalidArgumentError("--config " + path + line + ": " + ProgramOptionsErrorText(e) +
                                    " (see --help)");
      }
    }
    po::notify(*vm);
  } catch (po::unknown_option& e) {
    // A mistyped flag: named with the nearest one, as a mistyped --config key is.
    std::string key = e.get_option_name();
    key.erase(0, std::min(key.find_first_not_of('-'), key.size()));
    const std::string near = ClosestOption(desc, key);
    return InvalidArgumentError(ProgramOptionsErrorText(e) +
                                (near.empty() ? "" : "; did you mean '--" + near + "'?") +
                                " (see --help)");
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
