#!/usr/bin/env bash
# Checks what `make` needs before installing anything; one clear line per problem.
set -u
fail=0
say() { echo "error: $*" >&2; fail=1; }
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
  say "$py not found: install Python 3.11 or newer"
elif ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  say "$py is $("$py" -c 'import platform; print(platform.python_version())'); Onyx needs Python 3.11 or newer (set PYTHON=...)"
fi
java=java
[ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ] && java="$JAVA_HOME/bin/java"
if ! command -v "$java" >/dev/null 2>&1; then
  say "Java not found: install a JDK 17 or newer, or set JAVA_HOME"
else
  major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  if [ -z "$major" ] || [ "$major" -lt 17 ]; then say "Java ${major:-?} found; Kafka and Spark need Java 17 or newer"; fi
fi
command -v mvn >/dev/null 2>&1 || say "Maven (mvn) not found: install Maven 3.8 or newer to fetch the Kafka and Spark jars"
command -v "${CC:-cc}" >/dev/null 2>&1 || say "no C compiler (${CC:-cc}) found: install gcc, which builds yfilter's native matcher"
# The catalog's tests run on a real PostgreSQL server they start themselves (broker/local/pgserver.py).
pg_found=0
if [ -n "${ONYX_POSTGRES_BIN:-}" ] && [ -x "$ONYX_POSTGRES_BIN/initdb" ] && [ -x "$ONYX_POSTGRES_BIN/postgres" ]; then pg_found=1; fi
if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then pg_found=1; fi
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && pg_found=1; done
[ "$pg_found" = 1 ] || say "PostgreSQL server binaries (initdb, postgres) not found: install Debian's package postgresql-15 (apt-get install postgresql-15), or set ONYX_POSTGRES_BIN to their folder"
exit $fail
