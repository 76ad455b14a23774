# Sourced by the scripts that take packages from a Debian suite this
# machine's apt sources do not list (script/ruby-3.4: experimental's
# ruby3.4 source; script/rails-7.2: unstable's Rails gems). apt runs
# against a private source list and state directory under $1, so the
# system's apt setup is never read for packages nor written.
#
#   . script/debian-archive.sh
#   private_apt "$WORK/apt" "deb-src" experimental   # sets APT_OPTS, runs apt-get update
#   apt-get "${APT_OPTS[@]}" source --download-only ruby3.4=...

# The first Debian (not security) archive URI in the apt sources, in either
# format (deb822 .sources files, or one-line sources.list entries).
debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i !~ /-security$/ && uri !~ /security/) { print uri; exit } }
      /^$/ { uri = "" }
    ' "$f"
  done
  if [ -f /etc/apt/sources.list ]; then
    awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list
  fi
}

# private_apt DIR TYPE SUITE: a source list of one line (`TYPE MIRROR SUITE
# main`) in DIR, APT_OPTS pointing apt at it, and its package lists fetched.
private_apt() {
  local dir=$1 type=$2 suite=$3 mirror
  mirror=$(debian_mirror | head -n1)
  [ -n "$mirror" ] || { echo "no Debian archive URI found in the apt sources" >&2; return 1; }
  mkdir -p "$dir/lists/partial" "$dir/parts" "$dir/cache"
  echo "$type $mirror $suite main" >"$dir/sources.list"
  APT_OPTS=(-o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=$dir/parts"
            -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o "APT::Sandbox::User=root")
  echo "==> $suite from $mirror ($type)" >&2
  apt-get "${APT_OPTS[@]}" update >/dev/null
}
