#!/bin/bash
# readme_test.sh: README.md as a newcomer reads it.  It is short (at most
# 300 lines: the rest is in docs/), its links and those of docs/ lead
# somewhere, and every command it shows is run, as written, by a test:
# here, or by the test named in COVERED.
#   short                 README.md has at most 300 lines
#   links                 every relative link of README.md and docs/*.md
#                         names a file that exists, and a heading of it
#                         when it names one (#anchor)
#   every-command-covered every command line of README's sh blocks is in
#                         COVERED (a new command without a test fails)
#   quick-start:*         the one-machine commands, in a directory where
#                         `make run` wrote out/
#   fleet:*               the symbolizer-and-agent block, with its port and
#                         /tmp paths moved to this test's
#   install:*             the install block, `make install` into DESTDIR
TEST=readme
. tests/e2e/lib.sh
need_root

check short test "$(wc -l < README.md)" -le 300

# Links: [text](path) and [text](path#anchor), relative ones only.
python3 - > "$TMP/links.out" << 'EOF'
import glob, os, re, sys

def slug(h):
    h = re.sub(r"[^\w\- ]", "", h.strip().lower())
    return h.replace(" ", "-")

bad = 0
for f in ["README.md"] + sorted(glob.glob("docs/*.md")):
    text = open(f).read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code is not links
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        path = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(path):
            print("%s: %s: no such file" % (f, target))
            bad += 1
        elif anchor and path.endswith(".md"):
            heads = {slug(m) for m in re.findall(r"^#+ (.*)$", open(path).read(), re.M)}
            if anchor not in heads:
                print("%s: %s: no such heading" % (f, target))
                bad += 1
print("links checked, %d bad" % bad)
sys.exit(1 if bad else 0)
EOF
check links test $? -eq 0
cat "$TMP/links.out" >&2

# The command lines of README's sh blocks, comments and continuation
# lines dropped.
awk '/^```sh$/ { on = 1; next } /^```$/ { on = 0 } on' README.md |
	sed 's/[[:space:]]*#.*$//' | grep -v '^[[:space:]]*$' > "$TMP/commands"

# Each command line shown, and what runs it.
declare -A COVERED=(
	['sudo make run']='tests/e2e/run_test.sh'
	['sudo make test']='this suite'
	['build/fleetprof report out/profile.pb.gz']=here
	['build/fleetprof report -t -p demo out/profile.pb.gz']=here
	['sudo build/fleetprof record -o out2 -- python3 tools/demo/demo.py 3']=here
	['sudo build/fleetprof-symbolizer --listen tcp://127.0.0.1:7070 --cache /tmp/fp-cache --out /tmp/fp-out &']=here
	['sudo build/fleetprof-agent --server tcp://127.0.0.1:7070 --interval 5 &']=here
	['sleep 20; build/fleetprof report -n 15 "$(ls /tmp/fp-out/*/*.pb.gz | tail -n 1)"']=here
	['tools/install-deps.sh run']=here
	['make']=here
	['make install']=here
)
uncovered=0
while IFS= read -r line; do
	if [ -z "${COVERED[$line]+x}" ]; then
		echo "README command without a test: $line" >&2
		uncovered=$((uncovered + 1))
	fi
done < "$TMP/commands"
check every-command-covered test "$uncovered" -eq 0
check commands-found test "$(wc -l < "$TMP/commands")" -eq "${#COVERED[@]}"

# block N: the Nth sh block of README.md (1: make run and make test).
README=$PWD/README.md
block() {
	awk -v n="$1" '/^```sh$/ { i++; on = (i == n); next } /^```$/ { on = 0 } on' "$README"
}
# Commands as README writes them: sudo is not needed (root already) and
# may not be installed.
sudo() { "$@"; }
export -f sudo

# 1. One machine: out/ as `make run` leaves it, then the block's lines.
mkdir -p "$TMP/w"
ln -s "$PWD/$BUILD" "$TMP/w/build"
ln -s "$PWD/tools" "$TMP/w/tools"
make -s run BUILD="$BUILD" RUN_OUT="$TMP/w/out" > "$TMP/w/run.log" 2>&1
check quick-start:make-run-out test -s "$TMP/w/out/profile.pb.gz"
block 2 > "$TMP/quick.sh"
(cd "$TMP/w" && bash "$TMP/quick.sh" > quick.out 2> quick.err)
check quick-start:exit-0 test $? -eq 0
check quick-start:three-commands test "$(grep -c . "$TMP/quick.sh")" -eq 3
# report: the demo's native functions by self share, then its call tree from the
# process down to a function of the demo's; record -- CMD: the demo's
# Python functions by name.
check quick-start:report-names grep -qE '  demo_(compare|checksum|sort_records)$' "$TMP/w/quick.out"
check quick-start:tree-from-demo grep -qE '^ *[0-9.]+% +[0-9.]+% +demo \[process\]$' "$TMP/w/quick.out"
check quick-start:record-python grep -q 'demo_python_primes_\[py\]' "$TMP/w/out2/profile.folded"
cat "$TMP/w/quick.err" >&2
grep -E "(process\]|demo)" "$TMP/w/quick.out" | head -n 20 >&2

# 2. A symbolizer and an agent, the block as written but on a free port
# and in this test's directory.
port=$(free_port)
block 3 | sed "s|7070|$port|g; s|/tmp/fp-|$TMP/fp-|g" > "$TMP/fleet.sh"
"$WORKLOAD" 30 > /dev/null 2>&1 &
PIDS+=($!)
(cd "$TMP/w" && bash "$TMP/fleet.sh" > fleet.out 2> fleet.err)
check fleet:exit-0 test $? -eq 0
pkill -INT -f -- "--server tcp://127.0.0.1:$port"
pkill -TERM -f -- "--cache $TMP/fp-cache"
sleep 1
check fleet:profiles test -n "$(ls "$TMP"/fp-out/*/*.pb.gz 2> /dev/null)"
check fleet:report-header grep -q 'self%' "$TMP/w/fleet.out"
# The busiest process here is the test workload: its functions by name.
check fleet:report-names grep -qE '  (compute_loop|fp::Cruncher::crunch)' "$TMP/w/fleet.out"
cat "$TMP/w/fleet.out" "$TMP/w/fleet.err" >&2

# 3. Install: the dependencies (idempotent), the build (done), the
# install into a DESTDIR.
(export DESTDIR=$TMP/root && block 4 | bash > "$TMP/install.out" 2>&1)
check install:exit-0 test $? -eq 0
check install:binaries test -x "$TMP/root/usr/local/bin/fleetprof" -a \
	-x "$TMP/root/usr/local/sbin/fleetprof-agent" -a -x "$TMP/root/usr/local/sbin/fleetprof-symbolizer"
check install:man-pages test -s "$TMP/root/usr/local/share/man/man8/fleetprof-agent.8"
