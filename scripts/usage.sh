# Sourced first by the scripts, with their arguments: -h or --help prints the script's opening
# comment (from its second line to the first line that is not a comment) and exits.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,${/^#/!q;s/^# \{0,1\}//;p}' "$0"
  exit 0
fi
