#!/usr/bin/env bash
# Committed migrations are append-only: a database that already ran a file
# never runs it again, so an edit would reach new installs and silently miss
# every existing one. This check fails when
#   - a commit since this check began changed, renamed or deleted a migration;
#   - on a branch, a migration that main already has differs in the work tree;
#   - a new migration's number is not the next one (00003 was never released,
#     so the numbers go 1, 2, 4, 5, 6, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "migrations: $*" >&2; exit 1; }

# Numbering: unique, and each after 00004 one more than the last.
prev=0
for f in migrations/*.sql; do
  n=$((10#$(basename "$f" | cut -d_ -f1)))
  if [ "$n" -ne $((prev + 1)) ] && ! { [ "$n" -eq 4 ] && [ "$prev" -eq 2 ]; }; then
    fail "$f: expected number $(printf '%05d' $((prev + 1))) after $(printf '%05d' "$prev")"
  fi
  prev=$n
done

# History: since the commit that added this script.
if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  echo "migrations: shallow clone, history not checked" >&2
else
  since=$(git log --diff-filter=A --format=%H -- .ci/migrations.sh | tail -1)
  if [ -n "$since" ]; then
    edits=$(git log --format='%h %s' --diff-filter=MDR "$since"..HEAD -- 'migrations/*.sql')
    [ -z "$edits" ] || fail "committed migrations were changed (add a new migration instead):
$edits"
  fi
fi

# Work tree against main: every migration main has must be here, unchanged.
if git rev-parse --verify -q main >/dev/null; then
  missing=$(git diff --name-only --diff-filter=D main -- 'migrations/*.sql')
  [ -z "$missing" ] || fail "main has migrations this tree lacks (rebase onto main, then renumber yours): $missing"
  changed=$(git diff --name-only --diff-filter=MR main -- 'migrations/*.sql')
  [ -z "$changed" ] || fail "these migrations differ from main's (add a new migration instead): $changed"
fi
