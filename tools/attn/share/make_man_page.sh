#!/usr/bin/env bash
# Writes the man page attn.1 from the program's own --help (help2man), with every command's
# --help as a section, so the page says what the program says.
#   make_man_page.sh ATTN_BINARY OUT.1
set -euo pipefail
attn=$1 out=$2
include=$(mktemp)
trap 'rm -f "$include"' EXIT
# The commands and their subcommands, as --help lists them.
subcommands() { "$@" --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1}'; }
{
  echo "[COMMANDS]"
  for command in $(subcommands "$attn"); do
    nested=$(subcommands "$attn" "$command")
    for path in "$command" ${nested:+$(for n in $nested; do echo "$command/$n"; done)}; do
      [[ $path == "$command" && -n $nested ]] && continue
      words=${path//\// }
      echo ".SS attn $words"
      echo ".nf"
      # shellcheck disable=SC2086
      "$attn" $words --help | sed -e 's/\\/\\e/g' -e 's/^\([.'"'"']\)/\\\&\1/'
      echo ".fi"
    done
  done
  echo "[ENVIRONMENT]"
  echo ".TP"
  echo ".B ATTN_NUM_THREADS"
  echo "The default thread count, a whole number from 1 to 1024 (--threads overrides it)."
  echo "[EXIT STATUS]"
  echo "0 on success, 1 for bad input or a failed computation, 2 for a bad command line,"
  echo "130 when attn train is interrupted (its checkpoint is saved)."
} >"$include"
help2man --no-info --section 1 --name "causal multi-head attention, from the textbook to the tools" \
  --include "$include" --output "$out" "$attn"
