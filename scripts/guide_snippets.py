#!/usr/bin/env python3
"""Writes docs/API.md's code as a CMake project, so that the guide is built as a user would
build it and cannot rot (scripts/check_example.sh builds it against an installed TowerPS).

  scripts/guide_snippets.py docs/API.md OUT_DIR

The guide's ```cmake block is the project's CMakeLists.txt and its ```cpp block that defines
main() is main.cc, as the guide tells users to lay them out. Every other ```cpp block is a
source of an object library beside it: a block that starts with an #include is a file as it is;
any other is a fragment, compiled as the body of
    void Snippet<k>(towerps::Registry& registry)
after #include <towerps/towerps.h> and <string>. Everything compiles with -Wall -Werror.
"""
import pathlib
import re
import sys

FRAGMENT = """#include <string>

#include <towerps/towerps.h>

void Snippet{k}(towerps::Registry& registry) {{
{body}}}
"""


def blocks(text, lang):
    return re.findall(r"^```" + lang + r"\n(.*?)^```", text, re.S | re.M)


def main():
    asked = sys.argv[1:2] in (["-h"], ["--help"])
    if len(sys.argv) != 3 or asked:
        print(__doc__.strip(), file=sys.stdout if asked else sys.stderr)
        sys.exit(0 if asked else 2)
    guide, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    text = guide.read_text()
    cmake, cpp = blocks(text, "cmake"), blocks(text, "cpp")
    mains = [b for b in cpp if re.search(r"^int main\(", b, re.M)]
    if len(cmake) != 1 or len(mains) != 1:
        sys.exit(f"{guide}: expected one cmake block and one C++ block with main(), found "
                 f"{len(cmake)} and {len(mains)}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "main.cc").write_text(mains[0])
    sources = []
    for k, block in enumerate(b for b in cpp if b is not mains[0]):
        name = f"snippet{k}.cc"
        is_file = block.lstrip().startswith("#include")
        (out / name).write_text(block if is_file else FRAGMENT.format(k=k, body=block))
        sources.append(name)
    (out / "CMakeLists.txt").write_text(
        cmake[0] + "target_compile_options(my-worker PRIVATE -Wall -Werror)\n"
        f"add_library(guide_snippets OBJECT {' '.join(sources)})\n"
        "target_link_libraries(guide_snippets PRIVATE TowerPS::towerps)\n"
        "target_compile_options(guide_snippets PRIVATE -Wall -Werror)\n")
    print(f"guide_snippets: main.cc and {len(sources)} snippet(s) from {guide}")


if __name__ == "__main__":
    main()
