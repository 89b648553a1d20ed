# Shared by install-worker and install-control (sourced, not run). Packages, broker and DB users
# come from deploy/ensure-services; this file only lays out a host: venv, settings, secrets, units.
#
# Where things go (defaults for a real host; the namespace test redirects them into a temp dir):
#   BENCHFLEET_PREFIX    /opt/benchfleet       the checkout's copy and its venv (BENCHFLEET_VENV)
#   BENCHFLEET_ETC       /etc/benchfleet       *.env settings, secrets/ (mode 700)
#   BENCHFLEET_UNIT_DIR  /etc/systemd/system   the units, paths rewritten to the above
#   BENCHFLEET_START     auto                  enable and start the unit (auto: when systemd runs)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix="${BENCHFLEET_PREFIX:-/opt/benchfleet}"
venv="${BENCHFLEET_VENV:-$prefix/venv}"
etc="${BENCHFLEET_ETC:-/etc/benchfleet}"
unit_dir="${BENCHFLEET_UNIT_DIR:-/etc/systemd/system}"
start_units="${BENCHFLEET_START:-auto}"
secrets="$etc/secrets"
me=$(basename "$0")
#: Set when a file was written: the unit is restarted to read it, else only started.
changed=0

say() { echo "$me: $*" >&2; }
die() { say "error: $*"; exit 2; }

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages, users and units)"

# deploy/ensure-services for this host: every call reads and writes the host's settings
# ($etc/local.env, fleet.env -> $etc/settings.env), never the checkout's var/, so a later call
# (install-worker's `worker`, ensure_venv's `python`) cannot overwrite the settings file with a
# developer's var/*.env.
ensure_services() {
  BENCHFLEET_VAR="$etc" BENCHFLEET_CONFIG="${BENCHFLEET_CONFIG-$etc/settings.env}" "$root/deploy/ensure-services" "$@"
}

# What the checkout holds: a hash of the package's files (pyproject.toml, setup.py, services/), so any
# edit, pull or checkout gives another stamp, with or without git.
source_stamp() {
  (cd "$root" && find pyproject.toml setup.py services -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 \
    | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16
}

# The venv with benchfleet installed from this checkout. Its stamp ($venv/benchfleet-source) says
# which source it was installed from: a checkout that changed since is installed again (pip
# --upgrade) and changed=1, so install_unit restarts the unit onto the new code. A venv that runs
# the checkout itself (an editable install, the test suite's) is left alone.
ensure_venv() {
  local want have
  local -a lock=()
  # The versions the test suite ran against, when the checkout has them (pyproject gives ranges).
  [ ! -f "$root/requirements-lock.txt" ] || lock=(-c "$root/requirements-lock.txt")
  want=$(source_stamp)
  if [ -x "$venv/bin/worker" ] && "$venv/bin/python" -c 'import services.worker.cli, services.collector.cli' 2>/dev/null; then
    if [ "$("$venv/bin/python" -c 'import os, services; print(os.path.dirname(os.path.dirname(os.path.realpath(services.__file__))))')" \
         = "$(realpath "$root")" ]; then
      return 0
    fi
    have=$(cat "$venv/benchfleet-source" 2>/dev/null || echo unknown)
    [ "$have" != "$want" ] || { say "unchanged $venv (benchfleet from source $want)"; return 0; }
    say "upgrading benchfleet in $venv: installed from source $have, the checkout is $want"
    ensure_services build  # pip compiles the native driver's load core
    "$venv/bin/pip" install -q --upgrade "${lock[@]}" "$root"
  else
    ensure_services python build
    say "creating $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "${lock[@]}" "$root"
  fi
  echo "$want" > "$venv/benchfleet-source"
  changed=1
}

# Write stdin to file $1 (mode $2) unless it already holds exactly that; say which.
write_file() {
  local tmp
  tmp=$(mktemp "$1.XXXXXX")
  cat > "$tmp"
  chmod "$2" "$tmp"
  if [ -f "$1" ] && cmp -s "$tmp" "$1"; then
    rm -f "$tmp"
    say "unchanged $1"
  else
    mv -f "$tmp" "$1"
    say "wrote $1"
    changed=1
  fi
}

# A secret copied from file $1 into $secrets/$2 (mode 600, or 640 for group $3), never echoed.
install_secret() {
  install -d -m 700 "$secrets"
  [ -s "$1" ] || die "secret file $1 is missing or empty"
  write_file "$secrets/$2" 600 < "$1"
  if [ -n "${3:-}" ]; then chgrp "$3" "$secrets/$2"; chmod 640 "$secrets/$2"; chmod 710 "$secrets"; chgrp "$3" "$secrets"; fi
}

# KEY=VALUE lines checked before they reach an env file: a value with a newline or a quote
# would make systemd read something else than the user gave.
env_line() {
  [[ "$1" =~ ^BENCHFLEET_[A-Z0-9_]+=[^\"\'$'\n']*$ ]] || die "--env $1: expected BENCHFLEET_NAME=value without quotes"
  printf '%s\n' "$1"
}

have_systemd() { [ -d /run/systemd/system ]; }

# Unit $1 (a file of deploy/host) into unit_dir with this host's paths, then enabled and started
# as $2 when systemd runs (or BENCHFLEET_START=yes).
install_unit() {
  install -d "$unit_dir"
  sed -e "s|/opt/benchfleet/venv|$venv|g" -e "s|/opt/benchfleet|$prefix|g" -e "s|/etc/benchfleet|$etc|g" \
    "$here/$1" | write_file "$unit_dir/$1" 644
  local start=$start_units
  [ "$start" != auto ] || { have_systemd && start=yes || start=no; }
  if [ "$start" = yes ]; then
    systemctl daemon-reload
    systemctl enable "$2"
    if [ "$changed" -eq 1 ]; then systemctl restart "$2"; else systemctl start "$2"; fi
    say "started $2"
  else
    say "not starting $2 (no systemd here, or BENCHFLEET_START=no)"
  fi
}
