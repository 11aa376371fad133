// --config FILE for a command: one "name = value" line per option (the long option names
// without dashes; '#' starts a comment; strings may be quoted; flags take true or false), read
// into command-line arguments before parsing. Options given on the command line win over the
// file's. The format is what CLI11's config_to_str writes, so a run's DIR/config.ini reads back.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace attn::cli {

// args: the command line without the program name. When it holds "--config FILE" (or
// "--config=FILE"), returns it with that pair removed and the file's options appended (those
// not given on the command line); otherwise args unchanged. attn::Error for a file that cannot
// be read, a line that is not "name = value", or a name that is not an option of `command`.
std::vector<std::string> expand_config(const CLI::App& command, std::vector<std::string> args);

}  // namespace attn::cli
