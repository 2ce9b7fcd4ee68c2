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
exit $fail
