#!/usr/bin/env bash
# Regenerates the command reference in Documentation/CLI.md from 'plugind help --markdown', so the
# document stays identical to --help (CLITests checks that it is).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product plugind 2>&1 | grep -v '^\[[0-9]*/[0-9]*\]' || true
bin=$(swift build --show-bin-path)
doc=Documentation/CLI.md
begin='<!-- BEGIN GENERATED: plugind help --markdown -->'
end='<!-- END GENERATED -->'
{
    sed "/$begin/q" "$doc"
    "$bin/plugind" help --markdown
    sed -n "/$end/,\$p" "$doc"
} > "$doc.new"
mv "$doc.new" "$doc"
echo "updated $doc" >&2
