#!/usr/bin/env bash
# Captures the README's screenshots in a real sixel terminal: xterm (VT340 emulation, so
# the page images are sixel graphics, not text) under Xvfb, driven with xdotool, shot
# with ImageMagick's `import`. Needs: apt-get install xterm xvfb xdotool imagemagick.
#
#   docs/images/capture.sh [path/to/groundwork]
#
# Runs the binary on the scripted demo session in a fresh HOME (the embedding model is
# copied from this machine's data dir, so nothing is downloaded) and writes
# docs/images/{sources,redirect,grounding}.png. Look at them before committing.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:-${CARGO_TARGET_DIR:-target}/debug/groundwork}"
out="docs/images"
for tool in Xvfb xterm xdotool import; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing (apt-get install xterm xvfb xdotool imagemagick)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "error: no binary at $bin (cargo build first, or give its path)" >&2; exit 1; }
home="$(mktemp -d)"
trap 'kill "${term_pid:-}" "${x_pid:-}" 2>/dev/null || true; rm -rf "$home"' EXIT
models="${XDG_DATA_HOME:-$HOME/.local/share}/groundwork/models"
mkdir -p "$home/.local/share/groundwork"
[ -d "$models" ] && cp -r "$models" "$home/.local/share/groundwork/"
export DISPLAY=:93
Xvfb "$DISPLAY" -screen 0 1700x1000x24 >/dev/null 2>&1 &
x_pid=$!
sleep 1
env HOME="$home" GROUNDWORK_DISCOVER=off xterm -ti vt340 \
  -xrm 'XTerm*decTerminalID: vt340' -xrm 'XTerm*numColorRegisters: 256' \
  -xrm 'XTerm*sixelScrolling: true' -bg black -fg grey90 -fa 'DejaVu Sans Mono' -fs 10 \
  -geometry 160x48+0+0 -title groundwork-capture -e "$bin" open demo &
term_pid=$!
# The first start builds the demo knowledge base.
for _ in $(seq 1 120); do
  wid="$(xdotool search --name groundwork-capture 2>/dev/null | head -1 || true)"
  [ -n "$wid" ] && [ -d "$home/.local/share/groundwork/haiku.rag.lancedb" ] && break
  sleep 1
done
sleep 8
xdotool windowfocus "$wid" 2>/dev/null
shot() { import -window "$wid" "$out/$1.png"; echo "wrote $out/$1.png"; }
# The last answers with their sources, the redirected question above them.
shot sources
# The first question's source (a PDF figure), then its visual grounding.
xdotool key F2; sleep 0.5
xdotool key Left; sleep 1
xdotool key Left; sleep 3
xdotool key V; sleep 10
shot grounding
xdotool key Escape; sleep 0.5
# From the first question, two down: the redirect trail of the third one in view.
xdotool key braceright; sleep 0.5
xdotool key braceright; sleep 0.5
shot redirect
