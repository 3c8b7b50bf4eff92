# Sourced by the VM benchmark scripts: `pt TOOL ARGS...` runs a perftest server and client on
# rxe0 (10.99.0.1) and prints the client's result line. The server may take seconds to listen
# under TCG, so the client retries.
pt() {
  local tool=$1; shift
  timeout 120 "$tool" -d rxe0 -x 1 "$@" >/tmp/srv.log 2>&1 &
  local out=""
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    sleep 2
    out=$(timeout 120 "$tool" -d rxe0 -x 1 "$@" 10.99.0.1 2>&1) && break
  done
  echo "$out" | grep -E '^ *[0-9]+ +[0-9]+' | tail -1
  wait
}
