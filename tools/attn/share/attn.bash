# bash completion for attn. Commands and options come from attn's own --help at completion
# time, so they never fall behind the program. Installed by cmake --install into
# share/bash-completion/completions/attn.

# The words of the "Subcommands:" section of `attn ... --help`.
_attn_subcommands() {
  "$@" --help 2>/dev/null | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1}'
}

# The long options of `attn ... --help`.
_attn_options() {
  "$@" --help 2>/dev/null | grep -o -- '--[a-z0-9][a-z0-9-]*' | sort -u
}

_attn() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
  local program=${COMP_WORDS[0]}
  # The command path typed so far: attn, then the words that are subcommands.
  local path=("$program") i subs
  for ((i = 1; i < COMP_CWORD; i++)); do
    subs=$(_attn_subcommands "${path[@]}")
    if grep -qx -- "${COMP_WORDS[i]}" <<<"$subs"; then path+=("${COMP_WORDS[i]}"); fi
  done
  # After an option that takes a path, complete file names.
  case $prev in
  --q | --k | --v | --mask | --out | --weights | --x | --wq | --wk | --wv | --wo | --bq | --bk | \
    --bv | --bo | --corpus | --tokenizer | --checkpoint | --config | --prompt-file | --model | \
    --png | --svg | --html | --text-file | --save-weights | --hf)
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    return
    ;;
  esac
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_attn_options "${path[@]}")" -- "$cur")
  else
    subs=$(_attn_subcommands "${path[@]}")
    if [[ -n $subs ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$subs" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
  fi
}
complete -F _attn attn
