#!/bin/sh
d='@STATE@'
b='@BIN@'
if [ "$1" = run ]; then
  : > "$d/run.argv"
  for a in "$@"; do printf '%s\0' "$a" >> "$d/run.argv"; done
else
@RECORD@
fi
r="$d/resp/$1"
[ -f "$r.sleep" ] && sleep "$(cat "$r.sleep")"
if [ -f "$r.code" ]; then
  [ -f "$r.err" ] && cat "$r.err" >&2
  [ -f "$r.out" ] && cat "$r.out"
  exit "$(cat "$r.code")"
fi
mkdir -p "$d/vms"
case "$1" in
  clone)
    if [ -e "$d/vms/$3" ]; then echo "VM \"$3\" already exists" >&2; exit 1; fi
    : > "$d/vms/$3" ;;
  set)
    [ -e "$d/vms/$2" ] || { echo "the specified VM \"$2\" does not exist" >&2; exit 1; } ;;
  delete)
    rm -f "$d/vms/$2" ;;
  rename)
    [ -e "$d/vms/$2" ] || { echo "the specified VM \"$2\" does not exist" >&2; exit 1; }
    mv "$d/vms/$2" "$d/vms/$3" ;;
  list)
    sep=''
    printf '['
    for f in "$d/vms"/*; do
      [ -e "$f" ] || continue
      vm=$(basename "$f")
      if [ -e "$d/running.$vm" ]; then s=running; r=true; else s=stopped; r=false; fi
      printf '%s{"Source":"local","Name":"%s","State":"%s","Running":%s}' "$sep" "$vm" "$s" "$r"
      sep=','
    done
    printf ']\n' ;;
  run)
    echo "$$" > "$d/run.pid"
    echo "fake tart: booting $2"
    if [ ! -f "$d/resp/run.nosoftnet" ]; then
      "$b/softnet" 300 &
      echo "$!" > "$d/softnet.pid"
    fi
    : > "$d/running.$2"
    sleep 300 &
    wait ;;
  stop)
    rm -f "$d/running.$2"
    [ -f "$d/run.pid" ] && /bin/kill -KILL -- "-$(cat "$d/run.pid")" 2>/dev/null
    : ;;
  ip)
    echo 192.168.64.5 ;;
  exec)
    shift
    [ "$1" = -i ] && shift
    shift
    exec "$@" ;;
esac
exit 0
