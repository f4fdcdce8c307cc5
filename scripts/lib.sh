# scripts/lib.sh - shared by scripts/run, scripts/test and scripts/dev-db.
# Sourced, not executed.

GP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GP_PGBIN=${GP_PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
GP_PACKAGES="build-essential cmake pkg-config libpq-dev libmicrohttpd-dev libjson-c-dev
libcurl4-openssl-dev libargon2-dev libssl-dev libcmocka-dev postgresql postgresql-contrib
curl openssl python3 clang-format nodejs chromium fonts-dejavu-core"

gp_log() { printf '==> %s\n' "$*" >&2; }

# Install the Debian packages that are missing (sudo when not root).
gp_install_packages() {
	local missing=() p
	for p in $GP_PACKAGES "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	gp_log "installing ${missing[*]}"
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	GP_PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
}

# gp_build <build-dir> [cmake args...]
gp_build() {
	local dir=$1
	shift
	"$GP_ROOT/scripts/build-dashboard"
	cmake -S "$GP_ROOT" -B "$dir" "$@" >/dev/null
	cmake --build "$dir" -j "$(nproc)" -- --no-print-directory >/dev/null
}

# A free TCP port on the loopback interface.
gp_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000))
}

# PostgreSQL refuses to run as root: run its tools as the owner of the data dir.
gp_pg_as() {
	local dir=$1
	shift
	if [ "$(id -u)" -eq 0 ]; then
		local owner
		owner=$(stat -c %U "$dir")
		runuser -u "$owner" -- "$@"
	else
		"$@"
	fi
}

# gp_pg_reaches <dir>: true unless we are root and the postgres user cannot
# reach <dir> (a directory above it is private, as a 0700 home is).
gp_pg_reaches() {
	[ "$(id -u)" -ne 0 ] && return 0
	runuser -u postgres -- test -x "$1" 2>/dev/null
}

# gp_pg_init <dir>: a new cluster owned by the invoking user (postgres when root).
gp_pg_init() {
	local dir=$1
	mkdir -p "$dir"
	if [ "$(id -u)" -eq 0 ]; then
		chown postgres:postgres "$dir"
		chmod 700 "$dir"
		if ! gp_pg_reaches "$dir"; then
			gp_log "PostgreSQL runs as the user postgres, which cannot reach $dir: a directory above it is private (mode 0700?). Put it under a directory every user may traverse (e.g. TMPDIR=/tmp), or make the directories above it traversable (chmod o+x)."
			return 1
		fi
	fi
	gp_pg_as "$dir" "$GP_PGBIN/initdb" -D "$dir/data" -U postgres -A trust \
		--no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; return 1; }
}

# gp_pg_start <dir> <port>: unix socket in <dir>, no TCP. Throwaway
# clusters skip durability (fsync, synchronous commit, full-page writes)
# unless GP_PG_DURABLE=1, which keeps PostgreSQL's durable defaults.
gp_pg_start() {
	local dir=$1 port=$2 nodur="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	[ "${GP_PG_DURABLE:-0}" = 1 ] && nodur=""
	gp_pg_as "$dir" "$GP_PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses='' $nodur -c max_connections=300" \
		start >/dev/null
}

gp_pg_stop() {
	local dir=$1
	[ -f "$dir/data/postmaster.pid" ] || return 0
	gp_pg_as "$dir" "$GP_PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}
