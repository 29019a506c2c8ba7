#!/bin/bash
# The relaunch agent. It runs as an instance's user data and runs the task on one node:
# setup, then run, telling the API how each ended. lib/agent/script.ts renders it for one
# attempt: the settings block below gets the attempt's values, each single-quoted, and the
# comment lines stay here (user data is small; the renderer strips them).
#
# Why one file of about 1,500 lines: it ships as user data, one script that cloud-init runs
# on a stock AMI before anything of relaunch's is on the node, so there is nothing beside
# it to source. Its sections keep it readable instead: a `# --- what ---` banner over each,
# in this order: the settings, the state (every global, each said once), the library
# (logging, time and retries, processes, curl, JSON, IMDS, SigV4), one section per step of
# main below, in its order, and main, which runs the steps, at the bottom. docs/agent.md
# says how the sections and the REPLY_* variables work, for the next change to follow.
#
# main, in order:
#  1. writes setup, run and the job's environment to files under ROOT_DIR;
#  2. learns its rank (given; 0 for the only node; else the relaunch:node-rank tag the
#     launcher sets once every node exists, read from IMDSv2), reads the attempt's callback
#     secret from its instance's SSM parameter, sends a first heartbeat and goes on beating
#     in the background, and starts watching for a spot interruption notice;
#  3. learns every node's IP (given; its own for one node; else the relaunch:node-ips:*
#     tags);
#  4. prepares the node: the job's S3 credentials, the workdir and file mounts, the task's
#     container;
#  5. on EC2, ships each phase's log to CloudWatch Logs beside the phase (its shipper's
#     functions fetched from the API, user data having no room for them); runs setup and
#     reports it, then, if setup exited 0 and the API says go, runs run and
#     reports it; a standby (launch_on_warning) is told to hold, and asks again every
#     HOLD_POLL_MS until it is told to go (its warned attempt has ended and the job is
#     relaunched: it is the next attempt now) or to stop (not needed);
#  6. shuts the node down (on EC2 the instance terminates); but a node the task may reuse
#     (REUSE_NODE: restart in place) first proves the attempt's processes gone and asks the
#     API what next, and may become a node of the next attempt on the spot and go back to
#     5 (next_attempt, in the library; the held-after tag stops its job when the attempt
#     ends while it runs).
# If the rank, the secret or the IPs never show up, it shuts down without a report: the
# controller sees a lost attempt, which never counts against the task's error budget.
#
# Processes. cloud-init runs user data as a child in its own process group, without a new
# session, so the agent keeps the job out of that group: each phase runs in a session and
# process group of its own (setsid), and a job that signals its group (kill 0) reaches
# only itself. A phase's output goes to its log through a FIFO whose reader ignores
# SIGTERM: a node that shuts down signals every process, and a job saving a checkpoint
# must still be able to print. The heartbeat, the data credentials refresher and the
# interruption watcher are subshells that end by themselves once the agent is gone.
#
# Ends. One EXIT trap ends the node whatever ended the agent: it stops the phase (SIGTERM
# to its group, STOP_GRACE_SECONDS for it to end with its output still flowing, then
# SIGKILL), the container, the mounts and the helpers, and shuts the node down. SIGTERM,
# SIGINT or SIGHUP (the node shutting down, a cancel) and a spot interruption notice in
# instance metadata stop the job that way and report nothing: its code would then be
# relaunch's doing, not the job's. With INTERRUPTION_STOP_AHEAD_SECONDS set (the task's
# launch_on_warning: its next attempt is starting beside this one), the notice stops the
# job only that long before the instance goes, its grace period and the shutdown within it,
# so the job keeps working while the standby sets up. An agent killed outright (SIGKILL,
# the OOM killer) runs no trap: its heartbeat finds it gone at the next beat, kills the
# phase and shuts down.
#
# Secrets. The callback secret stays in the agent's memory, an unexported variable handed
# to curl on its stdin: never on a command line, in a file or in the job's environment.
# Every URL and header reaches curl on its stdin too (a local node's URLs carry its route
# credential, and an IMDS session token is a header). The job's secrets reach each phase
# on its stdin, as exports it sources before its env. The SSM request is signed here
# (SigV4, with openssl) with the instance role's credentials from IMDS: stock AMIs need
# not carry the AWS CLI. A job running as root can still read
# the agent's memory; what it could do with the secret is report for its own attempt.
#
# Needs bash 4.2 or later, curl 7.55 or later, openssl, coreutils, procps and util-linux
# (all on Ubuntu and Amazon Linux AMIs); awk escapes the output tail as JSON.
set -uo pipefail

# --- settings ---
# Every setting is the agent's own: declared unexported, so none reaches a process the agent
# starts, whatever environment cloud-init gave it.

# relaunch:settings-begin
declare +x JOB_ID=''
declare +x ATTEMPT=''
declare +x AUTH_PREFIX=''
declare +x SECRET_PATH=''
declare +x SSM_REGION=''
declare +x SSM_URL=''
declare +x SSM_GET_PARAMETER=''
declare +x NUM_NODES=''
declare +x NODE_RANK=''
declare +x NODE_IPS=''
declare +x HEARTBEAT_MS=''
declare +x HEARTBEAT_TRY_MIN_MS=''
declare +x HEARTBEAT_TRY_MAX_MS=''
declare +x HEARTBEAT_URL=''
declare +x REPORT_URL=''
declare +x HOLD_URL=''
declare +x HOLD_POLL_MS=''
declare +x REUSE_NODE=''
declare +x HELD_TAG=''
declare +x NEXT_URL=''
declare +x NEXT_WAIT_SECONDS=''
declare +x PROOF_SECONDS=''
declare +x REPORT_RETRY_SECONDS=''
declare +x STOPPED_RETRY_SECONDS=''
declare +x DATA_CREDENTIALS_URL=''
declare +x DATA_REFRESH_MS=''
declare +x ROOT_DIR=''
declare +x WORK_DIR=''
declare +x MOUNTS=''
declare +x SOURCES_URL=''
declare +x MOUNT_ROOT=''
declare +x JOB_HOME=''
declare +x IMDS_URL=''
declare +x DISCOVERY_TIMEOUT_SECONDS=''
declare +x INTERRUPTION_POLL_MS=''
declare +x INTERRUPTION_STOP_AHEAD_SECONDS=''
declare +x STOP_GRACE_SECONDS=''
declare +x NODE_IPS_TAG_PREFIX=''
declare +x NODE_RANK_TAG=''
declare +x NODE_IPS_TAGS=''
declare +x BACKOFF_INITIAL_MS=''
declare +x BACKOFF_MAX_MS=''
declare +x STALE_STATUS=''
declare +x TAIL_LINES=''
declare +x TAIL_BYTES=''
declare +x SETUP_SCRIPT=''
declare +x RUN_SCRIPT=''
declare +x JOB_ENV=''
declare +x CONTAINER_IMAGE=''
declare +x CONTAINER_PREFIX=''
declare +x CONTAINER_GPUS=''
declare +x PULL_RETRY_MS=''
declare +x ECR_URL=''
declare +x AWS_CLI_DOWNLOAD=''
declare +x MOUNT_S3_DOWNLOAD=''
declare +x SHUTDOWN_COMMAND=''
declare +x LOG_GROUP=''
declare +x LOG_STREAM_PREFIX=''
declare +x LOGS_REGION=''
declare +x LOGS_URL=''
declare +x LOG_CREDENTIALS_URL=''
declare +x LIBRARY_URL=''
declare +x LIBRARY_SHA256=''
declare +x SHIP_INTERVAL_MS=''
declare +x SHIP_BACKLOG_BYTES=''
declare +x SHIP_DRAIN_MS=''
# relaunch:settings-end

# --- state ---
# Every other global of the agent, declared here and nowhere else (but for the few only its
# library uses, at the library's head), unexported for the same reason as the settings. First what the agent keeps.

# The agent's own pid: a helper whose parent is another process was orphaned (agent_alive).
declare +x AGENT_PID=''
# This instance's id, once its callback secret is read (fetch_secret).
declare +x INSTANCE_ID=''
# The attempt's callback secret, in memory only; SECRET_WORDS the job's secrets,
# NAME=<value, base64> each (take_secrets).
declare +x SECRET=''
declare +x -a SECRET_WORDS=()
# The task container's name (CONTAINER_PREFIX and the instance id); empty without an image.
declare +x CONTAINER=''
# docker exec's `-e HOME`: the job's home in its container is the node's (init_node).
declare +x -a HOME_FLAGS=()
# The file with this node's rank that heartbeats, holds and data credential requests post.
declare +x HEARTBEAT_BODY=''
# The IMDSv2 session token, and the SECONDS it is used until (imds_token).
declare +x IMDS_TOKEN=''
declare +x IMDS_TOKEN_UNTIL=0
# The folder of the job's data credentials and their AWS profile, and the profile's name.
declare +x DATA_DIR=''
declare +x DATA_PROFILE=relaunch-data
# The running phase's process (its pid is its session's and group's id), its name (setup
# or run) and its log's writer; empty when none runs.
declare +x PHASE_PID=''
declare +x PHASE_NAME=''
declare +x WRITER_PID=''
# Every phase of this attempt on this node, as `group start` (its group's id and its
# leader's start time), for the proof that they are gone (prove_gone).
declare +x -a PHASE_GROUPS=()
# What stopped the agent before its work was done (main's traps): interruption (a spot
# notice), shutdown (SIGTERM, SIGINT or SIGHUP) or held (the attempt ended and this node
# is kept for the next: the phase is stopped, the agent goes on); empty otherwise. A phase it stops is
# reported as stopped, with its last lines and no code (report_stopped).
declare +x STOP_CAUSE=''
# The helpers (heartbeat, interruption watcher, data credentials refresher); empty when not
# started. SLEEPER is the sleep that pause_ms waits for: a helper's TERM trap kills it.
declare +x HEARTBEAT_PID=''
declare +x WATCH_PID=''
declare +x DATA_PID=''
declare +x SLEEPER=''
# The agent's own step before setup in progress, and the first that failed and why
# (fail_step): its failure report.
declare +x CURRENT_STEP=''
declare +x FAILED_STEP=''
declare +x FAILED_ERROR=''
# The shippers of the phases' output to CloudWatch Logs (ship_phase), one per phase started
# (PID:PHASE each), and the phase of the last one; empty when nothing ships.
declare +x -a SHIP_PIDS=()
declare +x SHIP_PHASE=''
# 1 once the agent's library is loaded (load_library).
declare +x LIBRARY_LOADED=0
# In a shipper only: the credentials the API gave it for its node's streams, the SECONDS
# they are asked for again at, and SigV4's signing key for them and the day it is for.
declare +x SHIP_KEY_ID=''
declare +x SHIP_SECRET_KEY=''
declare +x SHIP_TOKEN=''
declare +x SHIP_REFRESH_AT=0
declare +x SHIP_SIGN_DAY=''
declare +x SHIP_SIGN_KEY=''

# Replies. A function that answers in a variable, not on stdout, sets REPLY_<WHAT>: a
# command substitution is a fork, and so is every sed, tr or cut (a node's start, setup and
# run reported: 113 processes, 169 when the signing and JSON reads were pipelines). A reply
# holds until the next call that sets it, so a caller that needs it longer copies it to a
# local, and the callers clear those that held a credential. The functions that set each:
# clock_ms: the time in ms (only differences are used).
declare +x REPLY_NOW_MS=0
# jittered_ms: a backoff delay made into a wait, in ms.
declare +x REPLY_JITTERED_MS=0
# seconds_of_ms: ms as seconds with three decimals, for sleep and messages.
declare +x REPLY_SECONDS=''
# process_start: a process's start time, in clock ticks since boot.
declare +x REPLY_STARTED=''
# notice_stop_delay: how long after a spot interruption notice the job is stopped, in ms.
declare +x REPLY_STOP_IN_MS=0
# imds_get: a metadata path's value.
declare +x REPLY_IMDS_VALUE=''
# json_value, json_file_value: a key's string value.
declare +x REPLY_JSON_VALUE=''
# sha256_of, hmac_of, hex_of: a digest, a signature, bytes in hex.
declare +x REPLY_SHA256_HEX=''
declare +x REPLY_HMAC_HEX=''
declare +x REPLY_HEX=''
# aws_call: the answer's body, its HTTP status (000: none) and, unless a 200, what went
# wrong.
declare +x REPLY_AWS_ANSWER=''
declare +x REPLY_AWS_STATUS=''
declare +x REPLY_AWS_ERROR=''
# ssm_get_parameter: the parameter's value; it and fetch_secret: why it could not be read.
declare +x REPLY_SSM_VALUE=''
declare +x REPLY_SSM_ERROR=''
# Why the agent's library could not be had (load_library).
declare +x REPLY_LIBRARY_ERROR=''
# next_attempt: how the attempt's setup goes on this node (rerun, or skip: it ran here).
declare +x REPLY_NEXT_SETUP=rerun
# run_answer: the API's word on running (go, stop or hold) and why.
declare +x REPLY_RUN_WORD=''
declare +x REPLY_RUN_REASON=''
# run_phase: the phase's exit code.
declare +x REPLY_PHASE_CODE=0
# run_tool: the last lines of a failed tool's stderr, in one bounded line.
declare +x REPLY_TOOL_ERROR=''
# heartbeat_body's: the file the next heartbeat posts.
declare +x REPLY_HEARTBEAT_BODY=''
# ship_batch: the log's bytes a batch holds, and whether it is full (1) or took all it
# could (0). logs_call: the answer's HTTP status (000: none) and its error type.
declare +x REPLY_SHIP_TAKEN=0
declare +x REPLY_SHIP_FULL=0
declare +x REPLY_LOGS_STATUS=''
declare +x REPLY_LOGS_ERROR=''
# pull_image, ecr_login, fetch_data_credentials: why each failed.
declare +x REPLY_PULL_ERROR=''
declare +x REPLY_LOGIN_ERROR=''
declare +x REPLY_DATA_ERROR=''

# Constants. What aws_call signs with.
declare +x AWS_CONTENT_TYPE='application/x-amz-json-1.1'
declare +x AWS_SIGNED_HEADERS='content-type;host;x-amz-date;x-amz-security-token;x-amz-target'

# The program each phase's shell runs, in a session of its own: the job's secrets from its
# stdin (exports; then stdin is /dev/null), its environment, its folder, its script. $1 is
# the agent's folder, $2 the work folder, $3 the phase; $4 is set to the shell's own
# absolute path before the job's environment is read, so the script runs in that bash
# whatever PATH the job's envs give (its own commands then see that PATH). It has no
# variable of its own, so nothing the job names can change what it does.
declare +x PHASE_PROGRAM="set -- \"\$1\" \"\$2\" \"\$3\" \"\$BASH\" && . /dev/stdin && exec </dev/null && . \"\$1/env.sh\" && cd \"\$2\" && exec \"\$4\" \"\$1/\$3.sh\""

# The container's first process: it waits, and on SIGTERM (docker stop, or dockerd on the
# node's shutdown) passes it to every other process in the container and waits until they
# have ended, so the job gets its grace period inside the container too.
declare +x CONTAINER_INIT='trap '\''kill -TERM -1 2>/dev/null; while kill -0 -1 2>/dev/null; do sleep 0.2; done; exit 0'\'' TERM; while :; do sleep 3600 & wait $!; done'

# --- library: logging, time and retries ---

log() { printf 'relaunch-agent: %s\n' "$*" >&2; }

# Says why one of the agent's own steps ($1, agent/protocol.ts's AgentStep) failed ($2, one
# line, into setup's log) and keeps it for the failure report, unless an earlier failure is
# kept already: the first one is the cause. Returns 1, for `|| fail_step ...`.
fail_step() {
  echo "relaunch: $2"
  if [ -z "$FAILED_STEP" ]; then
    FAILED_STEP=$1
    FAILED_ERROR=$2
  fi
  return 1
}

# Runs a tool of one of the agent's steps (the AWS CLI, mountpoint-s3): its stderr still
# reaches the step's log, and when it fails its last 3 lines that say anything, trimmed and
# joined by " / ", are in REPLY_TOOL_ERROR, at most 400 bytes of their end (the cause ends
# the chain), for the failure report: "NoSuchBucket" says what "could not copy" does not.
run_tool() {
  local err="$ROOT_DIR/tool.stderr" code line text=''
  "$@" 2>"$err"
  code=$?
  cat "$err" >&2 2>/dev/null
  REPLY_TOOL_ERROR=''
  if (( code != 0 )); then
    while IFS= read -r line; do
      line=${line//$'\r'/}
      line=${line#"${line%%[![:space:]]*}"}
      line=${line%"${line##*[![:space:]]}"}
      if [ -n "$line" ]; then text=${text:+$text / }$line; fi
    done < <(grep -v '^[[:space:]]*$' "$err" 2>/dev/null | tail -n 3)
    if (( ${#text} > 400 )); then text="...${text: -400}"; fi
    REPLY_TOOL_ERROR=$text
  fi
  rm -f "$err"
  return "$code"
}

# $1 ms in seconds with three decimals, in REPLY_SECONDS (no subshell: the loops that pause
# many times a second fork once a pause, for the sleep).
seconds_of_ms() {
  printf -v REPLY_SECONDS '%d.%03d' "$(( $1 / 1000 ))" "$(( $1 % 1000 ))"
}

# The time in ms, in REPLY_NOW_MS: from bash 5's EPOCHREALTIME; an older bash counts whole
# seconds, so its deadlines are kept to within a second. Only differences are used.
clock_ms() {
  local seconds fraction
  if (( BASH_VERSINFO[0] >= 5 )); then
    seconds=${EPOCHREALTIME%[.,]*}
    fraction=${EPOCHREALTIME#*[.,]}
    REPLY_NOW_MS=$(( seconds * 1000 + 10#$fraction / 1000 ))
  else
    REPLY_NOW_MS=$(( SECONDS * 1000 ))
  fi
}

# A backoff delay of $1 ms made into a wait, in REPLY_JITTERED_MS: half the delay, plus up
# to the other half at random (30 random bits from two draws of RANDOM).
jittered_ms() {
  local half=$(( $1 / 2 ))
  REPLY_JITTERED_MS=$(( $1 - half + (RANDOM * 32768 + RANDOM) % (half + 1) ))
}

# Sleeps $1 ms in the background and waits for it, so a signal's trap runs at once (a
# helper's TERM trap kills the sleeper).
pause_ms() {
  seconds_of_ms "$1"
  sleep "$REPLY_SECONDS" &
  SLEEPER=$!
  wait "$SLEEPER"
  SLEEPER=''
}

# After try $1 of $2 failed: 1 when it was the last, else a wait of about $3 ms, doubled
# for each try before (jittered), and 0 to try again. For what a busy registry or network
# fails now and then: pulls, logins, clones.
next_try() {
  local try=$1 tries=$2 delay=$3
  if (( try >= tries )); then return 1; fi
  jittered_ms $(( delay << (try - 1) ))
  seconds_of_ms "$REPLY_JITTERED_MS"
  echo "relaunch: try $try of $tries failed; trying again in $REPLY_SECONDS s"
  pause_ms "$REPLY_JITTERED_MS"
}

# --- library: processes ---

# The start time of process $1 (/proc/<pid>/stat's 22nd field, in clock ticks since boot)
# in REPLY_STARTED; 1, and REPLY_STARTED empty, when no such process runs.
process_start() {
  local stat
  local -a fields
  REPLY_STARTED=''
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  read -r -a fields <<<"${stat##*) }"
  REPLY_STARTED=${fields[19]:-}
  [ -n "$REPLY_STARTED" ]
}

# Whether the agent that started this helper still runs: a helper whose parent is no
# longer the agent was orphaned (the agent was killed outright) and ends itself.
agent_alive() {
  local stat parent
  if read -r stat 2>/dev/null <"/proc/$BASHPID/stat"; then
    # After "pid (command) ": the state, then the parent's pid.
    stat=${stat##*) }
    parent=${stat#* }
    parent=${parent%% *}
  else
    parent=$(ps -o ppid= -p "$BASHPID" 2>/dev/null)
    parent=${parent//[[:space:]]/}
  fi
  [ "$parent" = "$AGENT_PID" ]
}

# Whether a live process (a zombie is dead) is left in process group $1. A node that shuts
# down signals every process once, and ps handles SIGTERM itself (whatever it inherited): a
# ps or awk that did not finish says nothing, and the kernel is asked instead, as it is
# when the image has no ps.
group_alive() {
  local table
  if table=$(ps -A -o pgid= -o stat= 2>/dev/null); then
    awk -v group="$1" '$1 == group && $2 !~ /^Z/ { found = 1 } END { exit !found }' <<<"$table"
    case $? in
      0) return 0 ;;
      1) return 1 ;;
    esac
  fi
  kill -0 -- "-$1" 2>/dev/null
}

# Ends a helper ($1, a pid, or nothing) and waits for it: up to 15 s, as long as its call
# of the API may take to end, then SIGKILL. It waits by looking, not with wait: a wait in
# the exit path for a child that has just ended can hang bash. The looks come 10 ms apart
# at first and 200 ms at most, so that a helper held up by a slow call costs few forks.
stop_helper() {
  local deadline pause=10
  if [ -z "$1" ]; then return; fi
  kill "$1" 2>/dev/null
  clock_ms
  deadline=$(( REPLY_NOW_MS + 15000 ))
  while kill -0 "$1" 2>/dev/null; do
    clock_ms
    if (( REPLY_NOW_MS >= deadline )); then
      kill -KILL "$1" 2>/dev/null
      return
    fi
    pause_ms "$pause"
    pause=$(( pause * 2 > 200 ? 200 : pause * 2 ))
  done
}

# --- library: curl ---

# One line of a curl config (read with -K - from stdin): option $1 set to $2, a quoted
# string in which \, ", and the control characters curl knows are escaped. URLs and headers
# reach curl this way: a local node's URLs carry its route token, and a command line is
# anyone's to read (ps).
curl_option() {
  local value=$2 bs=\\
  value=${value//"$bs"/"$bs$bs"}
  value=${value//'"'/"$bs"'"'}
  value=${value//$'\t'/"$bs"t}
  value=${value//$'\r'/"$bs"r}
  value=${value//$'\n'/"$bs"n}
  printf '%s = "%s"\n' "$1" "$value"
}

# Prints the HTTP status of a JSON POST of file $2 to $1, 000 when nothing answered
# within $3 seconds; the answer's body goes to file $4 (none: dropped). The URL and the
# Authorization header reach curl on its stdin.
post_json() {
  local out=/dev/null
  if [ "$#" -ge 4 ]; then out=$4; fi
  { curl_option url "$1"; curl_option header "Authorization: $AUTH_PREFIX$SECRET"; } |
    curl -s -o "$out" -w '%{http_code}' --max-time "$3" -X POST -K - \
      -H 'Content-Type: application/json' --data-binary "@$2" || true
}

# --- library: JSON ---

# stdin as one JSON string. One trailing newline is dropped, NUL bytes are removed, and a
# character cut in half at the start (tail -c) is dropped; other bytes that are not UTF-8
# become U+FFFD, one for each ill-formed sequence (the API refuses a body that is not
# UTF-8, and a refused report would lose the job's exit code), by Unicode's table of
# well-formed sequences. awk, not python3: a node may have no python3, or one behind a
# version manager's shim that takes a second to start.
json_string() {
  tr -d '\000' | LC_ALL=C awk '
    BEGIN {
      for (i = 1; i < 32; i++) escaped[sprintf("%c", i)] = sprintf("\\u%04x", i)
      escaped["\\"] = "\\\\"
      escaped["\""] = "\\\""
      for (i = 128; i < 256; i++) byte[sprintf("%c", i)] = i
      replacement = "\357\277\275"
      printf "%s", "\""
    }
    {
      line = $0
      if (NR == 1) while (length(line) > 0 && substr(line, 1, 1) >= "\200" && substr(line, 1, 1) <= "\277") line = substr(line, 2)
      out = ""
      n = length(line)
      i = 1
      while (i <= n) {
        c = substr(line, i, 1)
        if (!(c in byte)) {
          out = out ((c in escaped) ? escaped[c] : c)
          i++
          continue
        }
        # A lead byte: how many bytes follow, and the range of the first of them.
        b = byte[c]
        low = 128; high = 191
        if (b >= 194 && b <= 223) need = 1
        else if (b == 224) { need = 2; low = 160 }
        else if (b == 237) { need = 2; high = 159 }
        else if (b >= 225 && b <= 239) need = 2
        else if (b == 240) { need = 3; low = 144 }
        else if (b == 244) { need = 3; high = 143 }
        else if (b >= 241 && b <= 243) need = 3
        else need = -1
        if (need < 0) {
          out = out replacement
          i++
          continue
        }
        j = i + 1
        for (k = 0; k < need; k++) {
          c = substr(line, j, 1)
          if (!(c in byte) || byte[c] < low || byte[c] > high) break
          low = 128; high = 191
          j++
        }
        # Well-formed: kept. Cut short: one U+FFFD for what was read, and the byte that
        # broke it is read again.
        out = out ((k == need) ? substr(line, i, j - i) : replacement)
        i = j
      }
      if (NR > 1) printf "%s", "\\n"
      printf "%s", out
    }
    END { printf "%s", "\"" }'
}

# The string value of the first key $1 in the JSON document $2 (a flat document with plain
# values), in REPLY_JSON_VALUE; empty when it has none.
json_value() {
  local pattern="\"$1\"[[:space:]]*:[[:space:]]*\"([^\"]*)\""
  REPLY_JSON_VALUE=''
  if [[ $2 =~ $pattern ]]; then
    REPLY_JSON_VALUE=${BASH_REMATCH[1]}
    # BASH_REMATCH keeps no copy of it (the value may be a credential): an empty match.
    [[ $1 =~ ^ ]]
  fi
}

# The string value of key $1 in the JSON file $2, in REPLY_JSON_VALUE; empty when the file
# cannot be read or has no such key.
json_file_value() {
  local text=''
  IFS= read -r -d '' text 2>/dev/null <"$2"
  json_value "$1" "$text"
}

# --- library: IMDS ---

# IMDSv2: a session token (kept for four of its five minutes), then the metadata path.
imds_token() {
  if [ -z "$IMDS_TOKEN" ] || (( SECONDS >= IMDS_TOKEN_UNTIL )); then
    IMDS_TOKEN=$(curl_option url "$IMDS_URL/latest/api/token" |
      curl -sf --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' -K -) || { IMDS_TOKEN=''; return 1; }
    IMDS_TOKEN_UNTIL=$(( SECONDS + 240 ))
  fi
}

# A metadata path's GET, as a curl config (for -K -), with the session token.
imds_request() {
  curl_option url "$IMDS_URL/latest/meta-data/$1"
  curl_option header "X-aws-ec2-metadata-token: $IMDS_TOKEN"
}

# A metadata path's value, in REPLY_IMDS_VALUE (empty unless the read succeeds: a read cut
# short leaves nothing). Called in the agent's own shell, not in a $(...), so that the
# session token it may fetch is kept for the next call; a failed read drops the token, in
# case IMDS no longer takes it.
imds_get() {
  local value
  REPLY_IMDS_VALUE=''
  imds_token || return 1
  value=$(imds_request "$1" | curl -sf --max-time 5 -K -) || { IMDS_TOKEN=''; return 1; }
  REPLY_IMDS_VALUE=$value
}

# --- library: SigV4 ---

# AWS requests signed with the instance role's credentials, in bash and openssl: stock AMIs
# need not carry the AWS CLI. Each step keeps to bash where it can and answers in a REPLY_
# (the state block says why), and their callers clear those that held a credential.

# The SHA-256 of $1, hex, in REPLY_SHA256_HEX.
sha256_of() {
  REPLY_SHA256_HEX=$(printf '%s' "$1" | sha256sum)
  REPLY_SHA256_HEX=${REPLY_SHA256_HEX%% *}
}

# HMAC-SHA256 of $2 under the hex key $1, hex, in REPLY_HMAC_HEX. The keys are SigV4's
# derived keys; the first, from the role's secret key, is on openssl's command line for a
# moment, which tells a local process nothing it cannot read from instance metadata itself.
hmac_of() {
  REPLY_HMAC_HEX=$(printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$1")
  REPLY_HMAC_HEX=${REPLY_HMAC_HEX##*= }
}

# The bytes of $1, an ASCII text (a secret access key is), in hex, in REPLY_HEX.
hex_of() {
  local i
  REPLY_HEX=''
  for (( i = 0; i < ${#1}; i++ )); do printf -v REPLY_HEX '%s%02x' "$REPLY_HEX" "'${1:i:1}"; done
}

# One call of an AWS JSON API, signed (SigV4) with the instance role's credentials from
# instance metadata: service $1 in region $2 at endpoint $3, target $4, body $5. The
# answer's body in REPLY_AWS_ANSWER and its HTTP status in REPLY_AWS_STATUS (000: no
# answer); 1 with REPLY_AWS_ERROR set when it is not a 200. Values that carry credentials
# or secrets move through pipes from printf (a builtin), never here-strings, which an older
# bash keeps in a temporary file.
aws_call() {
  local service=$1 region=$2 url=$3 target=$4 body=$5
  local role creds key_id secret_key token amz_date day host path canonical scope key part to_sign answer
  REPLY_AWS_ANSWER=''
  REPLY_AWS_STATUS=000
  role=''
  if imds_get iam/security-credentials/; then role=${REPLY_IMDS_VALUE%%$'\n'*}; fi
  if [ -z "$role" ]; then
    REPLY_AWS_ERROR='no instance role in instance metadata'
    return 1
  fi
  if ! imds_get "iam/security-credentials/$role"; then
    REPLY_AWS_ERROR="no credentials for role $role in instance metadata"
    return 1
  fi
  creds=$REPLY_IMDS_VALUE
  REPLY_IMDS_VALUE=''
  json_value AccessKeyId "$creds"
  key_id=$REPLY_JSON_VALUE
  json_value SecretAccessKey "$creds"
  secret_key=$REPLY_JSON_VALUE
  json_value Token "$creds"
  token=$REPLY_JSON_VALUE
  REPLY_JSON_VALUE=''
  amz_date=$(date -u +%Y%m%dT%H%M%SZ)
  day=${amz_date:0:8}
  # The URL without its scheme: the host, then the path.
  host=${url#*://}
  path=${host#"${host%%/*}"}/
  host=${host%%/*}
  sha256_of "$body"
  printf -v canonical 'POST\n%s\n\ncontent-type:%s\nhost:%s\nx-amz-date:%s\nx-amz-security-token:%s\nx-amz-target:%s\n\n%s\n%s' \
    "$path" "$AWS_CONTENT_TYPE" "$host" "$amz_date" "$token" "$target" "$AWS_SIGNED_HEADERS" "$REPLY_SHA256_HEX"
  scope="$day/$region/$service/aws4_request"
  hex_of "AWS4$secret_key"
  key=$REPLY_HEX
  REPLY_HEX=''
  for part in "$day" "$region" "$service" aws4_request; do
    hmac_of "$key" "$part"
    key=$REPLY_HMAC_HEX
  done
  sha256_of "$canonical"
  printf -v to_sign 'AWS4-HMAC-SHA256\n%s\n%s\n%s' "$amz_date" "$scope" "$REPLY_SHA256_HEX"
  hmac_of "$key" "$to_sign"
  answer=$({
    curl_option url "$url/"
    for part in "Content-Type: $AWS_CONTENT_TYPE" "X-Amz-Date: $amz_date" "X-Amz-Security-Token: $token" \
      "X-Amz-Target: $target" \
      "Authorization: AWS4-HMAC-SHA256 Credential=$key_id/$scope, SignedHeaders=$AWS_SIGNED_HEADERS, Signature=$REPLY_HMAC_HEX"; do
      curl_option header "$part"
    done
  } | curl -s --max-time 10 -X POST -K - --data-binary "$body" -w '\n%{http_code}') || answer=$'\n000'
  REPLY_AWS_STATUS=${answer##*$'\n'}
  REPLY_AWS_ANSWER=${answer%$'\n'*}
  if [ "$REPLY_AWS_STATUS" = 200 ]; then return 0; fi
  json_value __type "$REPLY_AWS_ANSWER"
  REPLY_AWS_ERROR="HTTP $REPLY_AWS_STATUS $REPLY_JSON_VALUE"
  return 1
}

# --- 1. the node's files ---

# The node's folders and files: its home (the local runtime gives each node its own, which
# the container gets too), the work folder, the scripts and the job's environment.
init_node() {
  if [ -n "$JOB_HOME" ]; then export HOME="$JOB_HOME"; fi
  if [ -z "$(printenv HOME)" ]; then export HOME=/root; fi
  # In a container too, the job's ~ is the folder its ~ mounts went to on the node: a real
  # daemon would give it the image user's home instead.
  HOME_FLAGS=(-e HOME)
  # A relative work folder (a task's workdir, sky_workdir) is under the home folder.
  if [[ $WORK_DIR != /* ]]; then WORK_DIR="$HOME/$WORK_DIR"; fi
  mkdir -p "$ROOT_DIR" "$WORK_DIR" "$HOME" || return 1
  printf '%s' "$SETUP_SCRIPT" >"$ROOT_DIR/setup.sh" &&
    printf '%s' "$RUN_SCRIPT" >"$ROOT_DIR/run.sh" &&
    printf '%s' "$JOB_ENV" >"$ROOT_DIR/env.sh"
}

# --- 2. the rank, the callback secret, the heartbeat and the interruption watch ---

# This node's rank: given, 0 for the only node, or the launcher's tag.
resolve_node_rank() {
  local deadline=$(( SECONDS + DISCOVERY_TIMEOUT_SECONDS ))
  if [[ ! $NODE_RANK =~ ^[0-9]+$ ]] && (( NUM_NODES == 1 )); then NODE_RANK=0; fi
  while [[ ! $NODE_RANK =~ ^[0-9]+$ ]]; do
    if imds_get "tags/instance/$NODE_RANK_TAG" && [[ $REPLY_IMDS_VALUE =~ ^[0-9]+$ ]]; then NODE_RANK=$REPLY_IMDS_VALUE; break; fi
    if (( SECONDS >= deadline )); then return 1; fi
    pause_ms 2000
  done
}

# SSM GetParameter of $1 with decryption: the value in REPLY_SSM_VALUE (0), else what went
# wrong in REPLY_SSM_ERROR (1).
ssm_get_parameter() {
  local body
  REPLY_SSM_VALUE=''
  printf -v body '{"Name":"%s","WithDecryption":true}' "$1"
  if ! aws_call ssm "$SSM_REGION" "$SSM_URL" "$SSM_GET_PARAMETER" "$body"; then
    REPLY_SSM_ERROR=$REPLY_AWS_ERROR
    return 1
  fi
  json_value Value "$REPLY_AWS_ANSWER"
  REPLY_SSM_VALUE=$REPLY_JSON_VALUE
  REPLY_JSON_VALUE=''
  REPLY_AWS_ANSWER=''
}

# Splits a parameter's value (secret-parameter.ts's agentSecretValue) into SECRET, the
# callback secret, and SECRET_WORDS, the job's secrets as NAME=base64 words; 1 when it is
# not such a value.
take_secrets() {
  local word
  local -a words
  read -r -a words < <(printf '%s\n' "$1")
  if [[ ! ${words[0]:-} =~ ^[0-9a-f]{64}$ ]]; then return 1; fi
  for word in "${words[@]:1}"; do
    if [[ ! $word =~ ^[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9+/=]*$ ]]; then return 1; fi
  done
  SECRET=${words[0]}
  SECRET_WORDS=("${words[@]:1}")
}

# The job's secrets as exports, one a line, for a phase to source: from memory (printf is a
# builtin, and this runs in a subshell whose output is a pipe), never a file or a command line.
secret_exports() {
  local word value
  for word in "${SECRET_WORDS[@]}"; do
    # The x keeps the value's trailing newlines from the command substitution.
    value=$(printf '%s' "${word#*=}" | base64 -d; printf x)
    printf 'export %s=%q\n' "${word%%=*}" "${value%x}"
  done
}

# The attempt's callback secret, in SECRET: this instance's parameter, which the launcher
# writes once the instance exists. Until then SSM refuses (the parameter has no tag that
# names this instance yet), so a refusal is tried again until the discovery deadline; why
# the last try failed in REPLY_SSM_ERROR.
fetch_secret() {
  local deadline=$(( SECONDS + DISCOVERY_TIMEOUT_SECONDS )) instance_id last='' slash=/
  while :; do
    instance_id=''
    if imds_get instance-id; then instance_id=$REPLY_IMDS_VALUE; fi
    if [[ ! $instance_id =~ ^[A-Za-z0-9._-]+$ ]]; then
      REPLY_SSM_ERROR='no instance id in instance metadata'
    elif ssm_get_parameter "$SECRET_PATH/$instance_id"; then
      # JSON may escape a slash as \/. The slash put back is a variable's: bash 4.2 keeps the
      # backslash of a quoted \/ in a replacement.
      if take_secrets "${REPLY_SSM_VALUE//'\/'/$slash}"; then
        REPLY_SSM_VALUE=''
        INSTANCE_ID=$instance_id
        return 0
      fi
      REPLY_SSM_ERROR="parameter $SECRET_PATH/$instance_id does not hold a callback secret"
    fi
    if [ "$REPLY_SSM_ERROR" != "$last" ]; then log "the callback secret is not readable yet: $REPLY_SSM_ERROR"; last=$REPLY_SSM_ERROR; fi
    if (( SECONDS >= deadline )); then return 1; fi
    pause_ms 2000
  done
}

# One round of heartbeat tries, over by $1 (ms, clock_ms's clock: when the next beat is
# due). Returns 0 once a 2xx acknowledges a beat. A timeout, throttling, a 5xx or no
# answer is tried again after a jittered backoff while a try still fits before the
# deadline; each try's own time limit ends at the deadline too. Any other answer ends the
# round at once (1): it is the reports' business to stop the agent.
heartbeat_once() {
  local deadline=$1 delay=$BACKOFF_INITIAL_MS status limit
  while :; do
    clock_ms
    limit=$(( deadline - REPLY_NOW_MS ))
    if (( limit > HEARTBEAT_TRY_MAX_MS )); then limit=$HEARTBEAT_TRY_MAX_MS; fi
    if (( limit < 1 )); then limit=1; fi
    seconds_of_ms "$limit"
    heartbeat_body
    status=$(post_json "$HEARTBEAT_URL" "$REPLY_HEARTBEAT_BODY" "$REPLY_SECONDS")
    case $status in
      2??) return 0 ;;
      408 | 429 | 5?? | 000) ;;
      *) log "the API refused a heartbeat (HTTP $status)"; return 1 ;;
    esac
    jittered_ms "$delay"
    clock_ms
    if (( REPLY_NOW_MS + REPLY_JITTERED_MS + HEARTBEAT_TRY_MIN_MS > deadline )); then
      log "a heartbeat got HTTP $status; the next one is due before a retry could finish"
      return 1
    fi
    seconds_of_ms "$REPLY_JITTERED_MS"
    log "a heartbeat got HTTP $status; retrying in $REPLY_SECONDS s"
    pause_ms "$REPLY_JITTERED_MS"
    delay=$(( delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2 ))
  done
}

# The body of the next heartbeat, in REPLY_HEARTBEAT_BODY: the node's rank, and, when the
# job's progress file (RELAUNCH_PROGRESS_FILE) holds a step number, the step and the file's
# age in seconds (the API dates it by its own clock). Anything else in the file is ignored.
heartbeat_body() {
  local file="$ROOT_DIR/progress" step='' modified now
  REPLY_HEARTBEAT_BODY=$HEARTBEAT_BODY
  [ -f "$file" ] || return 0
  read -r step <"$file" || true
  step=${step//[[:space:]]/}
  [[ $step =~ ^[0-9]{1,15}$ ]] || return 0
  modified=$(stat -c %Y "$file" 2>/dev/null || stat -f %m "$file" 2>/dev/null) || return 0
  now=$(date +%s)
  REPLY_HEARTBEAT_BODY="$ROOT_DIR/heartbeat-progress.json"
  printf '{"nodeRank":%d,"progress":{"step":%d,"ageSeconds":%d}}' \
    "$NODE_RANK" "$(( 10#$step ))" "$(( now > modified ? now - modified : 0 ))" >"$REPLY_HEARTBEAT_BODY"
}

# A round every HEARTBEAT_MS from $1 (the first round's start), each over by the next: a
# round that ran late (a slow try) starts the cadence again from its end. Before each
# round it checks that the agent still runs; one killed outright is ended for it.
heartbeat_loop() {
  local next=$1
  trap 'kill "$SLEEPER" 2>/dev/null; exit 0' TERM
  while :; do
    next=$(( next + HEARTBEAT_MS ))
    clock_ms
    if (( next < REPLY_NOW_MS )); then next=$REPLY_NOW_MS; fi
    pause_ms $(( next - REPLY_NOW_MS ))
    if ! agent_alive; then
      end_orphaned_node
      exit 0
    fi
    heartbeat_once $(( next + HEARTBEAT_MS ))
  done
}

start_heartbeat() {
  local first
  HEARTBEAT_BODY="$ROOT_DIR/heartbeat.json"
  printf '{"nodeRank":%d}' "$NODE_RANK" >"$HEARTBEAT_BODY"
  clock_ms
  first=$REPLY_NOW_MS
  heartbeat_once $(( first + HEARTBEAT_MS ))
  # Its stderr is the agent's own (agent.log locally, cloud-init's output log on EC2): a
  # refusal (401, 403, 409) or a throttled round is on the node for whoever looks.
  heartbeat_loop "$first" </dev/null >/dev/null &
  HEARTBEAT_PID=$!
}

# How long after a spot interruption notice ($1, spot/instance-action's JSON) the job is to
# be stopped, in ms, in REPLY_STOP_IN_MS: at once (0) unless INTERRUPTION_STOP_AHEAD_SECONDS
# is set, else that long before the notice's `time` (when EC2 reclaims the instance), and
# at once when that moment has passed or the time cannot be read.
notice_stop_delay() {
  local reclaim now
  REPLY_STOP_IN_MS=0
  if [ -z "$INTERRUPTION_STOP_AHEAD_SECONDS" ]; then return; fi
  json_value time "$1"
  reclaim=$(date -u -d "$REPLY_JSON_VALUE" +%s%3N 2>/dev/null) || return
  now=$(date -u +%s%3N)
  if [[ $reclaim =~ ^[0-9]+$ && $now =~ ^[0-9]+$ ]] && (( reclaim - INTERRUPTION_STOP_AHEAD_SECONDS * 1000 > now )); then
    REPLY_STOP_IN_MS=$(( reclaim - INTERRUPTION_STOP_AHEAD_SECONDS * 1000 - now ))
  fi
}

# Asks instance metadata every INTERRUPTION_POLL_MS for a spot interruption notice
# (spot/instance-action: 404 until EC2 decides to reclaim the instance, two minutes before
# it does); on one, tells the agent (SIGUSR1) when notice_stop_delay says, and ends. Ends
# by itself once the agent is gone. The question is asked in the background and waited
# for, as a pause is, so that TERM ends the watch at once even while IMDS takes its time
# (up to curl's 5 s). The question, which carries the session token, is written once per
# token and piped to curl from printf (a builtin; not a here string, which an older bash
# keeps in a temporary file): each look costs two processes, not the three of imds_get.
# On a node that may serve the next attempt it also reads the held-after tag (held_look).
interruption_watch() {
  local notice='' answer="$ROOT_DIR/interruption-notice" token='' request=''
  trap 'kill "$SLEEPER" 2>/dev/null; exit 0' TERM
  while agent_alive; do
    # The session token is kept here: a question asked in a subshell cannot keep it.
    if ! imds_token 2>/dev/null; then
      pause_ms "$INTERRUPTION_POLL_MS"
      continue
    fi
    if [ "$token" != "$IMDS_TOKEN" ]; then
      token=$IMDS_TOKEN
      request=$(imds_request spot/instance-action)
    fi
    printf '%s\n' "$request" | curl -sf --max-time 5 -K - >"$answer" 2>/dev/null &
    SLEEPER=$!
    if wait "$SLEEPER"; then
      SLEEPER=''
      IFS= read -r -d '' notice <"$answer"
      notice_stop_delay "$notice"
      if (( REPLY_STOP_IN_MS > 0 )); then
        seconds_of_ms "$REPLY_STOP_IN_MS"
        log "spot interruption notice: the job runs on for $REPLY_SECONDS s, then gets its $STOP_GRACE_SECONDS s before the instance goes (launch_on_warning)"
        pause_ms "$REPLY_STOP_IN_MS"
        if ! agent_alive; then exit 0; fi
      fi
      kill -USR1 "$AGENT_PID"
      exit 0
    fi
    if [ -n "$HELD_TAG" ]; then held_look; fi
    pause_ms "$INTERRUPTION_POLL_MS"
  done
}

start_interruption_watch() {
  if (( INTERRUPTION_POLL_MS <= 0 )); then return; fi
  interruption_watch </dev/null >/dev/null &
  WATCH_PID=$!
}

# --- 3. every node's IP ---

# Every node's IP, head first, one a line: given, this node's own, or the launcher's tags.
resolve_node_ips() {
  local deadline=$(( SECONDS + DISCOVERY_TIMEOUT_SECONDS )) chunk complete
  local -a ips words
  while [ -z "$NODE_IPS" ]; do
    if (( NUM_NODES == 1 )); then
      if imds_get local-ipv4 && [ -n "$REPLY_IMDS_VALUE" ]; then NODE_IPS=$REPLY_IMDS_VALUE; break; fi
    else
      ips=()
      complete=1
      for (( chunk = 0; chunk < NODE_IPS_TAGS; chunk++ )); do
        if imds_get "tags/instance/$NODE_IPS_TAG_PREFIX$chunk"; then
          read -r -a words < <(printf '%s\n' "$REPLY_IMDS_VALUE")
          ips+=("${words[@]}")
        else
          complete=0
          break
        fi
      done
      if (( complete && ${#ips[@]} == NUM_NODES )); then NODE_IPS=$(printf '%s\n' "${ips[@]}"); break; fi
    fi
    if (( SECONDS >= deadline )); then return 1; fi
    pause_ms 2000
  done
}

# The job's environment file, finished once the rank and the IPs are known.
write_node_env() {
  {
    printf 'export RELAUNCH_NODE_RANK=%q SKYPILOT_NODE_RANK=%q\n' "$NODE_RANK" "$NODE_RANK"
    printf 'export RELAUNCH_NODE_IPS=%q SKYPILOT_NODE_IPS=%q\n' "$NODE_IPS" "$NODE_IPS"
    printf 'export RELAUNCH_MOUNT_ROOT=%q\n' "$MOUNT_ROOT"
    printf 'export RELAUNCH_PROGRESS_FILE=%q\n' "$ROOT_DIR/progress"
  } >>"$ROOT_DIR/env.sh"
}

# --- 4. the node prepared: installs ---

# The AWS CLI, when the image has none (Ubuntu 24.04): installed by the agent's library
# (install_aws), fetched only by a node that needs it.
ensure_aws() {
  if command -v aws >/dev/null 2>&1; then return 0; fi
  need_library install "install the AWS CLI" && install_aws
}

# --- 4. the node prepared: the job's data credentials ---

# The job's own S3 credentials, on EC2 (DATA_CREDENTIALS_URL set): the instance role reaches
# no S3 data, so the API gives each node credentials for its job's uploads, copies and
# mounts only (s3-data.ts's jobDataPolicy), asked with the callback secret. They sit in a
# folder only root reads, where an AWS profile's credential_process prints them from: the
# AWS CLI and mountpoint-s3 run with that profile (DATA_PROFILE, in DATA_DIR), and ask
# again before they expire.

# Asks for the credentials until answered (0), refused for good (1) or past SECONDS $1
# (2); why in REPLY_DATA_ERROR. The answer replaces the last one in one rename.
fetch_data_credentials() {
  local deadline=$1 delay=$BACKOFF_INITIAL_MS status file="$DATA_DIR/credentials.json"
  while :; do
    # 10 s at most: a TERM from stop_helper waits for this call to end.
    status=$(post_json "$DATA_CREDENTIALS_URL" "$HEARTBEAT_BODY" 10 "$file.part")
    # An answer cut off by the time limit still says 200: only a whole one replaces the last.
    if [[ $status == 2?? ]] && ! grep -q '"Expiration" *: *"[^"]' "$file.part" 2>/dev/null; then status=000; fi
    case $status in
      2??) mv -f "$file.part" "$file"; return 0 ;;
      408 | 429 | 5?? | 000) ;;
      *)
        json_file_value error "$file.part"
        REPLY_DATA_ERROR="the API refused this node's data credentials (HTTP $status): $REPLY_JSON_VALUE"
        rm -f "$file.part"
        return 1
        ;;
    esac
    rm -f "$file.part"
    if (( SECONDS >= deadline )); then
      REPLY_DATA_ERROR="no data credentials from the API (last answer: HTTP $status)"
      return 2
    fi
    jittered_ms "$delay"
    # In the background, so the refresher's TERM ends the wait at once (pause_ms).
    pause_ms "$REPLY_JITTERED_MS"
    delay=$(( delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2 ))
  done
}

# Fresh credentials every DATA_REFRESH_MS until the attempt ends. An API that does not
# answer for a whole round (an outage) is asked again the next round, while the last
# credentials still last; a refusal (409: the attempt is over) ends the refreshes, and so
# does the agent being gone.
data_credentials_loop() {
  trap 'kill "$SLEEPER" 2>/dev/null; exit 0' TERM
  while :; do
    pause_ms "$DATA_REFRESH_MS"
    if ! agent_alive; then return; fi
    fetch_data_credentials $(( SECONDS + DATA_REFRESH_MS / 1000 ))
    case $? in
      1) echo "relaunch: $REPLY_DATA_ERROR"; return ;;
      2) echo "relaunch: $REPLY_DATA_ERROR" ;;
    esac
  done
}

# The profile, the first credentials (the discovery deadline to get them), then the refreshes.
start_data_credentials() {
  DATA_DIR="$ROOT_DIR/aws"
  { mkdir -p "$DATA_DIR" && chmod 700 "$DATA_DIR" &&
    printf '[profile %s]\ncredential_process = cat "%s"\n' "$DATA_PROFILE" "$DATA_DIR/credentials.json" >"$DATA_DIR/config"; } ||
    { fail_step data-credentials "could not write the AWS profile in $DATA_DIR"; return 1; }
  fetch_data_credentials $(( SECONDS + DISCOVERY_TIMEOUT_SECONDS )) || { fail_step data-credentials "$REPLY_DATA_ERROR"; return 1; }
  data_credentials_loop </dev/null >>"$ROOT_DIR/data-credentials.log" 2>&1 &
  DATA_PID=$!
}

# Runs a command (the AWS CLI, mountpoint-s3) with the job's data credentials where the
# API gives them, else with whatever credentials the machine has.
with_data_credentials() {
  if [ -z "$DATA_CREDENTIALS_URL" ]; then "$@"; return; fi
  AWS_CONFIG_FILE="$DATA_DIR/config" AWS_PROFILE=$DATA_PROFILE "$@"
}

# --- 4. the node prepared: the workdir and file mounts ---

# A task's path on this node: ~/x and x under the home folder, /x under MOUNT_ROOT (empty
# on EC2; the local runtime maps absolute paths into the job's folder).
node_path() {
  case $1 in
    '~') printf '%s' "$HOME" ;;
    [~]/*) printf '%s/%s' "$HOME" "${1:2}" ;;
    /*) printf '%s%s' "$MOUNT_ROOT" "$1" ;;
    *) printf '%s/%s' "$HOME" "$1" ;;
  esac
}

# An uploaded file or folder: fetched from the store once per node, its SHA-256 checked
# against its name, unpacked at the path (a folder's files over what is there).
fetch_upload() {
  local entry=$1 sha=$2 dest=$3 archive="$ROOT_DIR/sources/$2.tar.gz" unpacked="$ROOT_DIR/sources/$2.d" got
  mkdir -p "$ROOT_DIR/sources" || return 1
  if [ ! -f "$archive" ]; then
    case $SOURCES_URL in
      s3://*) ensure_aws && run_tool with_data_credentials aws s3 cp --only-show-errors "$SOURCES_URL/$sha.tar.gz" "$archive.part" ;;
      *) run_tool cp "$SOURCES_URL/$sha.tar.gz" "$archive.part" ;;
    esac || { fail_step mounts "could not fetch $SOURCES_URL/$sha.tar.gz${REPLY_TOOL_ERROR:+: $REPLY_TOOL_ERROR}"; return 1; }
    got=$(sha256sum "$archive.part" | cut -d' ' -f1)
    if [ "$got" != "$sha" ]; then
      rm -f "$archive.part"
      fail_step mounts "$SOURCES_URL/$sha.tar.gz has SHA-256 $got, not the one its name says"
      return 1
    fi
    mv -f "$archive.part" "$archive" || return 1
  fi
  if [ "$entry" = dir ]; then
    mkdir -p "$dest" && tar -xzmf "$archive" --no-same-owner -C "$dest"
    return
  fi
  rm -rf "$unpacked" && mkdir -p "$unpacked" "$(dirname "$dest")" && tar -xzmf "$archive" --no-same-owner -C "$unpacked" || return 1
  # The archive of a file holds that one file, whatever its name (a dot file too).
  ( shopt -s dotglob nullglob; set -- "$unpacked"/*; [ "$#" -eq 1 ] && mv -fT "$1" "$dest" )
}

# A folder's files copied (a bucket's, locally, with mode COPY).
copy_folder() {
  mkdir -p "$1" "$2" && cp -a "$1/." "$2/"
}

# A folder that stands in for a bucket, linked at the path.
link_folder() {
  mkdir -p "$1" "$(dirname "$2")" && ln -sfnT "$1" "$2"
}

# The workdir and file mounts, in order, before setup. Each path goes to mounts.paths (for
# the container); where the local runtime maps one, the mapping is said.
prepare_mounts() {
  local kind a b c dest path step=0
  : >"$ROOT_DIR/mounts.paths"
  # The list on fd 3: no step's command can read it from stdin.
  while IFS=$'\t' read -r -u 3 kind a b c dest; do
    REPLY_TOOL_ERROR=''
    path=$(node_path "$dest")
    if [ -n "$MOUNT_ROOT" ]; then echo "relaunch: $dest is $path on this machine"; fi
    case $kind in
      upload) fetch_upload "$a" "$b" "$path" ;;
      s3-copy) need_library mounts "copy s3://$a" && copy_s3 "$a" "$b" "$path" ;;
      s3-mount) need_library mounts "mount s3://$a" && mount_bucket "$a" "$b" "$c" "$path" "$ROOT_DIR/mount-cache/$step" ;;
      link) link_folder "$a" "$path" ;;
      copy-dir) copy_folder "$a" "$path" ;;
      git) need_library mounts "clone $a" && clone_repo "$a" "$b" "$path" ;;
      *) false ;;
    esac || {
      # The mount's own failure says what went wrong; an install's stays the install's; a
      # tool's (the AWS CLI's, mountpoint-s3's) last lines say why it failed.
      if [ "$FAILED_STEP" = mounts ]; then FAILED_ERROR="could not prepare $dest ($kind): $FAILED_ERROR"; fi
      fail_step mounts "could not prepare $dest ($kind)${REPLY_TOOL_ERROR:+: $REPLY_TOOL_ERROR}"
      return 1
    }
    printf '%s\n' "$path" >>"$ROOT_DIR/mounts.paths"
    step=$(( step + 1 ))
  done 3< <(printf '%s' "$MOUNTS")
}

# --- 4. the node prepared: the task's container ---

# Pulls the task's image once; its output to setup's log, its last line in REPLY_PULL_ERROR.
pull_image() {
  local output code
  output=$(docker pull "$CONTAINER_IMAGE" 2>&1)
  code=$?
  printf '%s\n' "$output"
  REPLY_PULL_ERROR=${output##*$'\n'}
  return "$code"
}

# The task's container, started once for both phases: docker (installed from the
# distribution's packages when the image lacks it), a login when the image is in ECR, the
# image pulled (three tries, PULL_RETRY_MS apart, then twice that), then the
# container: the host's network (peers and instance metadata as on the host), the node's
# GPUs, and the agent's and work folders at the same paths. Its first process is
# CONTAINER_INIT, and docker stops it with the job's grace period. Its output goes to
# setup's log; a failure is one of the agent's steps (install, image-login, image-pull,
# container).
container_start() {
  local registry region path try memlock output reason
  local -a gpus=() volumes=() limits=()
  local -A seen=()
  CURRENT_STEP=install
  if ! command -v docker >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    echo "relaunch: installing docker"
    # First boot's own apt runs (unattended-upgrades) may hold the lock for minutes.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q docker.io ||
      { apt-get -o DPkg::Lock::Timeout=600 update -q && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q docker.io; }
  fi
  if ! command -v docker >/dev/null 2>&1; then
    fail_step install "docker is not installed on this machine image and could not be installed"
    return 1
  fi
  registry=${CONTAINER_IMAGE%%/*}
  if [[ $registry =~ ^[0-9]{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$ ]]; then
    region=${BASH_REMATCH[1]}
    CURRENT_STEP=image-login
    echo "relaunch: logging in to $registry"
    need_library image-login "log in to $registry" || return 1
    for (( try = 1; ; try++ )); do
      if ecr_login "$registry" "$region"; then break; fi
      next_try "$try" 3 "$PULL_RETRY_MS" || { fail_step image-login "$REPLY_LOGIN_ERROR"; return 1; }
    done
  fi
  CURRENT_STEP=image-pull
  # Pulled when the daemon does not have it, as docker run does: an image the machine image
  # or the user's own machine (a local run) already holds, built there or pulled before,
  # needs no registry.
  if docker image inspect "$CONTAINER_IMAGE" >/dev/null 2>&1; then
    echo "relaunch: $CONTAINER_IMAGE is on this machine already"
  else
    for (( try = 1; ; try++ )); do
      if pull_image; then break; fi
      next_try "$try" 3 "$PULL_RETRY_MS" || { fail_step image-pull "could not pull $CONTAINER_IMAGE in 3 tries: $REPLY_PULL_ERROR"; return 1; }
    done
  fi
  CURRENT_STEP=container
  if (( CONTAINER_GPUS )); then
    if ! docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q nvidia; then
      fail_step container "this node has GPUs but its docker has no NVIDIA runtime to give them to the container (use the default image or a Deep Learning AMI)"
      return 1
    fi
    gpus=(--gpus all)
  fi
  # The folders at the same paths: the agent's, the work folder, the home folder and the
  # mounts (read from the file prepare_mounts wrote, one per line). Each once: docker
  # refuses a container with two mounts at one destination, and the work folder is the
  # agent's without a workdir and the workdir mount's with one.
  while IFS= read -r path; do
    path=${path%"${path##*[!/]}"}
    if [ -n "$path" ] && [ -z "${seen[$path]:-}" ]; then
      seen[$path]=1
      volumes+=(-v "$path:$path")
    fi
  done < <(printf '%s\n' "$ROOT_DIR" "$WORK_DIR" "${JOB_HOME:+$HOME}"; cat "$ROOT_DIR/mounts.paths")
  # Shared memory and locked memory as on the host: data loader workers and NCCL need them.
  # A host whose root may not raise the locked-memory limit (a host that is itself a
  # container, rootless docker) refuses --ulimit memlock=-1 ("error setting rlimit"): the
  # container then keeps the host's limit, and says so, rather than never starting.
  for memlock in memlock=-1 ''; do
    limits=()
    if [ -n "$memlock" ]; then limits=(--ulimit "$memlock"); fi
    docker rm -f "$CONTAINER" >/dev/null 2>&1
    if output=$(docker run -d --name "$CONTAINER" --network host --ipc host "${limits[@]}" --stop-timeout "$STOP_GRACE_SECONDS" "${gpus[@]}" \
      "${volumes[@]}" --entrypoint bash "$CONTAINER_IMAGE" -c "$CONTAINER_INIT" 2>&1); then
      return 0
    fi
    printf '%s\n' "$output"
    if [ -z "$memlock" ] || [[ $output != *rlimit* ]]; then break; fi
    echo "relaunch: this host may not lift the container's locked-memory limit: starting it with the host's"
  done
  # docker run -d prints the id of a container it made but could not start before its error.
  reason=${output%%$'\n'*}
  if [[ $output == *$'\n'docker:* ]]; then
    reason=${output#*$'\n'docker: }
    reason=${reason%%$'\n'*}
  fi
  fail_step container "docker could not start the container from $CONTAINER_IMAGE: ${reason#docker: }"
}

# --- 4. the node prepared: its parts, in order ---

# Everything before setup that is the agent's own work: the job's S3 credentials, the
# workdir and file mounts, the container. Its output goes to setup's log. A failure is the
# agent's, never the job's: FAILED_STEP and FAILED_ERROR say which step and why.
prepare_node() {
  CURRENT_STEP=install
  # A phase runs in a session of its own: without setsid the job would share the agent's group.
  if ! command -v setsid >/dev/null 2>&1; then
    fail_step install "setsid (util-linux) is not on this machine image: the job needs a session of its own"
    return 1
  fi
  if [ -n "$DATA_CREDENTIALS_URL" ]; then
    CURRENT_STEP=data-credentials
    start_data_credentials || return 1
  fi
  CURRENT_STEP=mounts
  prepare_mounts || return 1
  if [ -n "$CONTAINER_IMAGE" ]; then container_start || return 1; fi
}

# --- 5. each phase's output, shipped to CloudWatch Logs ---
# On EC2 (LOG_GROUP set) a shipper runs beside each phase and copies its log, read by
# offset (the job writes it as it always does), to the phase's stream in the deployment's
# log group (lib/workflow/job-logs.ts names both). Each PutLogEvents event is a piece of
# the log as it was written, its newline included: one line, several whole lines when a
# job prints more lines than a batch's 10,000 events would hold one a line, or a part of a
# line longer than an event's 256 KiB; a reader that concatenates the messages has the log
# byte for byte, but that a byte that is not UTF-8, and NUL, become U+FFFD. The shipper
# never holds the job up: it only reads the file. When it falls SHIP_BACKLOG_BYTES behind
# (CloudWatch throttling, failing or unreachable, or slower than the job prints) it skips
# to the end and writes into the stream how many bytes it skipped and why. Told the phase
# has ended, or finding the agent gone, it ships what is left within SHIP_DRAIN_MS and
# ends. It signs with credentials the API gives for this node's streams
# only: the instance role has nothing of CloudWatch Logs.

# --- the agent's library: what only some nodes need, fetched when one does ---
# User data (16 KiB gzipped) keeps only what every node needs before it can reach the
# API. The functions between the two marks below ship apart: the tools' signed installs,
# S3 copies and mounts, the task's container and its registry login, the shipper, and the
# next attempt on a node the task may reuse. A node that needs them for its task and
# cannot have them fails at that step (need_library); shipping does without, and a node
# that cannot serve the next attempt shuts down once its job is over. The API serves them (POST .../shipper, with the callback secret) and the
# settings pin their SHA-256 (LIBRARY_SHA256); load_library fetches, checks and loads them.

# relaunch:library-begin

# --- the library: packages and git clones ---

# Installs a distribution's package when its command is missing; 1 if it is still missing.
ensure_command() {
  if command -v "$1" >/dev/null 2>&1; then return 0; fi
  echo "relaunch: installing $2"
  if command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "$2" ||
      { apt-get -o DPkg::Lock::Timeout=600 update -q && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "$2"; }
  elif command -v dnf >/dev/null 2>&1; then
    dnf install -y -q "$2"
  fi
  command -v "$1" >/dev/null 2>&1 || fail_step install "$1 is not on this machine image and could not be installed"
}

# One try at cloning $1 into $2, starting from nothing (a try cut short leaves a partial clone).
clone_fresh() {
  rm -rf "$2"
  GIT_TERMINAL_PROMPT=0 git clone --quiet -- "$1" "$2"
}

# A git repository cloned at the path (once per node), at ref.
clone_repo() {
  local url=$1 ref=$2 dest=$3 try
  ensure_command git git || return 1
  if [ ! -d "$dest/.git" ]; then
    for (( try = 1; ; try++ )); do
      if clone_fresh "$url" "$dest"; then break; fi
      next_try "$try" 3 "$PULL_RETRY_MS" || { fail_step mounts "could not clone $url"; return 1; }
    done
  fi
  if [ "$ref" != - ]; then git -C "$dest" checkout --quiet "$ref" --; fi
}

# --- the library: the tools' pinned, signed downloads ---

# One file of a tool's download: URL $2 to file $3, with curl's own retries; a failure is
# the agent's at install, naming what ($1) could not be fetched from where.
fetch_file() {
  curl_option url "$2" | curl -fsSL --retry 5 --retry-connrefused -o "$3" -K - ||
    fail_step install "could not download $1 from $2"
}

# A tool's package, downloaded and verified before anything in it runs: $1 says what it is,
# $2 is its download setting (script.ts's downloadSetting: the package's URL, its
# signature's, its vendor key's and the key's fingerprint, {arch} and {pkg} filled in), $3
# the file to write. The signature must be good and made by the key with the pinned
# fingerprint: gpg, in a keyring of its own that holds only what the key URL served, says
# so in a VALIDSIG line whose last field is the signing key's primary fingerprint. Any
# other answer (a bad signature, another key, a revoked one, no signature) removes the
# file and is the agent's failure at install, naming the tool and the URL.
fetch_verified() {
  local what=$1 file=$3 url sig key fingerprint home line good=0
  read -r url sig key fingerprint <<<"$2"
  ensure_command gpg gnupg || return 1
  fetch_file "$what" "$url" "$file" && fetch_file "the signature of $what" "$sig" "$file.sig" &&
    fetch_file "the signing key of $what" "$key" "$file.key" || return 1
  home=$(mktemp -d) || { fail_step install "could not make a keyring folder to verify $what"; return 1; }
  gpg --batch --quiet --homedir "$home" --import "$file.key" >/dev/null 2>&1
  while IFS= read -r line; do
    case $line in
      "[GNUPG:] VALIDSIG "*" $fingerprint") if (( good == 0 )); then good=1; fi ;;
      "[GNUPG:] REVKEYSIG "* | "[GNUPG:] BADSIG "* | "[GNUPG:] ERRSIG "*) good=2 ;;
    esac
  done < <(gpg --batch --homedir "$home" --status-fd 1 --verify "$file.sig" "$file" 2>/dev/null)
  gpgconf --homedir "$home" --kill all >/dev/null 2>&1
  rm -rf "$home" "$file.sig" "$file.key"
  if (( good != 1 )); then
    rm -f "$file"
    fail_step install "$what from $url does not carry a good signature by its vendor's key $fingerprint: not installed"
    return 1
  fi
  echo "relaunch: $what from $url is signed by $fingerprint"
}

# The AWS CLI: AWS's bundle of the pinned version
# (script.ts's TOOL_DOWNLOADS), verified by AWS's signature before its installer runs.
install_aws() {
  echo "relaunch: installing the AWS CLI"
  ensure_command unzip unzip || return 1
  fetch_verified "the AWS CLI" "${AWS_CLI_DOWNLOAD//'{arch}'/$(uname -m)}" "$ROOT_DIR/awscli.zip" || return 1
  { unzip -q -o "$ROOT_DIR/awscli.zip" -d "$ROOT_DIR/awscli" && "$ROOT_DIR/awscli/aws/install" >/dev/null; } ||
    fail_step install "could not install the AWS CLI from $ROOT_DIR/awscli.zip"
}

# mountpoint-s3: the distribution's package (Amazon Linux 2023), else AWS's release of the
# pinned version, verified by its signature before it is installed.
install_mount_s3() {
  local arch package download
  if command -v dnf >/dev/null 2>&1 && dnf install -y -q mount-s3 >/dev/null 2>&1; then return 0; fi
  arch=$(uname -m)
  if [ "$arch" = aarch64 ]; then arch=arm64; fi
  if command -v apt-get >/dev/null 2>&1; then package=deb; else package=rpm; fi
  echo "relaunch: installing mountpoint-s3"
  download=${MOUNT_S3_DOWNLOAD//'{arch}'/$arch}
  fetch_verified mountpoint-s3 "${download//'{pkg}'/$package}" "$ROOT_DIR/mount-s3.$package" || return 1
  if [ "$package" = deb ]; then
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "$ROOT_DIR/mount-s3.deb" ||
      { apt-get -o DPkg::Lock::Timeout=600 update -q && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "$ROOT_DIR/mount-s3.deb"; }
  else
    dnf install -y -q "$ROOT_DIR/mount-s3.rpm" || yum install -y -q "$ROOT_DIR/mount-s3.rpm"
  fi || fail_step install "could not install mountpoint-s3"
}

# --- the library: S3 copies and mounts ---

# An S3 object, or every object under a prefix (or the whole bucket). A key that names an
# object is copied as a file; otherwise it is a prefix, and one with nothing under it fails.
copy_s3() {
  local bucket=$1 key=$2 dest=$3 source
  ensure_aws || return 1
  if [ "$key" = - ]; then source="s3://$bucket"; else source="s3://$bucket/$key"; fi
  # A key ending in / is a prefix, even where a console's empty "folder" object has its name.
  if [ "$key" != - ] && [[ $key != */ ]] && with_data_credentials aws s3api head-object --bucket "$bucket" --key "$key" >/dev/null 2>&1; then
    mkdir -p "$(dirname "$dest")" && run_tool with_data_credentials aws s3 cp --only-show-errors "$source" "$dest"
    return
  fi
  mkdir -p "$dest" && run_tool with_data_credentials aws s3 sync --only-show-errors "$source" "$dest" || return 1
  if [ -z "$(ls -A "$dest")" ]; then fail_step mounts "nothing at $source"; fi
}

# A bucket (or a prefix of it) mounted with mountpoint-s3, writable: a file written here is
# in S3 when it is closed, for the next attempt to read. A cached mount gets the cache
# folder $5, its own: mountpoint-s3 needs one per process, two mounts of a bucket included.
mount_bucket() {
  local bucket=$1 prefix=$2 cache=$3 dest=$4 cache_dir=$5
  local -a options=(--allow-delete --allow-overwrite)
  ensure_mount_s3 || return 1
  mkdir -p "$dest" || return 1
  if mountpoint -q "$dest"; then return 0; fi
  if [ "$prefix" != - ]; then options+=(--prefix "$prefix/"); fi
  if [ "$cache" = cached ]; then
    mkdir -p "$cache_dir" || return 1
    options+=(--cache "$cache_dir")
  fi
  run_tool with_data_credentials mount-s3 "$bucket" "$dest" "${options[@]}"
}

# mountpoint-s3, when the image has none.
ensure_mount_s3() {
  if command -v mount-s3 >/dev/null 2>&1; then return 0; fi
  install_mount_s3
}

# --- the library: the container's registry login ---

# Logs docker in to the ECR registry $1 of region $2 with an authorization token from ECR
# (a base64 of AWS:password), which reaches docker on its stdin only. Why it failed in
# REPLY_LOGIN_ERROR.
ecr_login() {
  local url=$ECR_URL code
  if [ -z "$url" ]; then url="https://api.ecr.$2.amazonaws.com"; fi
  if ! aws_call ecr "$2" "$url" AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken '{}'; then
    REPLY_LOGIN_ERROR="no ECR authorization token for $1: $REPLY_AWS_ERROR"
    echo "relaunch: $REPLY_LOGIN_ERROR"
    return 1
  fi
  json_value authorizationToken "$REPLY_AWS_ANSWER"
  REPLY_AWS_ANSWER=''
  printf '%s' "$REPLY_JSON_VALUE" | base64 -d | cut -d: -f2- | docker login --username AWS --password-stdin "$1"
  code=$?
  REPLY_JSON_VALUE=''
  if (( code != 0 )); then REPLY_LOGIN_ERROR="docker login to $1 failed (exit code $code)"; fi
  return "$code"
}

# --- the library: the shipper ---

# The next batch of the log, read from stdin ($1 bytes of it, from the shipper's offset),
# as PutLogEvents' body for stream $3, into file $2: events at time $4 (ms), first a line
# of note $5 when given. A last line without its newline is kept for the next batch when
# $6 is 0; with 1 (it waited a round already) it goes but for a character cut short at its
# end; with 2 (the phase has ended) it all goes. In REPLY_SHIP_TAKEN the
# bytes of the log it holds; REPLY_SHIP_FULL 1 when a limit of the batch stopped it (1 MiB
# of messages, 26 bytes more an event; 10,000 events; 262,118 bytes a message).
ship_batch() {
  local answer
  answer=$(LC_ALL=C awk -v avail="$1" -v out="$2" -v group="$LOG_GROUP" -v stream="$3" -v now="$4" -v note="$5" -v flush="$6" '
    function clean(s,    n, i, c, b, need, low, high, k, o) {
      if (s ~ /\000/) gsub(/\000/, rep, s)
      if (s !~ /[\200-\377]/ || s ~ valid) return s
      n = split(s, a, "")
      o = ""
      for (i = 1; i <= n; ) {
        b = (a[i] in byte) ? byte[a[i]] : 0
        if (b == 0) { o = o a[i++]; continue }
        low = 128; high = 191
        if (b >= 194 && b <= 223) need = 1
        else if (b == 224) { need = 2; low = 160 }
        else if (b == 237) { need = 2; high = 159 }
        else if (b >= 225 && b <= 239) need = 2
        else if (b == 240) { need = 3; low = 144 }
        else if (b == 244) { need = 3; high = 143 }
        else if (b >= 241 && b <= 243) need = 3
        else need = 0
        c = a[i]
        for (k = 1; k <= need; k++) {
          b = (a[i + k] in byte) ? byte[a[i + k]] : 0
          if (b < low || b > high) break
          c = c a[i + k]
          low = 128; high = 191
        }
        if (need > 0 && k > need) { o = o c; i += k } else { o = o rep; i += (k > 1) ? k : 1 }
      }
      return o
    }
    function escape(s,    i) {
      if (s !~ /[\001-\037"\\]/) return s
      gsub(/["\\]/, "\\\\&", s)
      gsub(/\t/, "\\t", s)
      gsub(/\n/, "\\n", s)
      gsub(/\r/, "\\r", s)
      if (s ~ /[\001-\037]/) for (i = 1; i < 32; i++) if (index(s, ch[i])) gsub(ch[i], code[i], s)
      return s
    }
    function emit(m, raw,    e) {
      e = (substr(m, length(m)) == "\n") ? escape(substr(m, 1, length(m) - 1)) "\\n" : escape(m)
      printf "%s{\"timestamp\":%s,\"message\":\"%s\"}", sep, now, e > out
      sep = ","
      room -= length(m) + 26
      left--
      taken += raw
    }
    function settle() {
      if (pend != "") emit(pend, pendraw)
      pend = ""; pendraw = 0
    }
    # Adds text (raw bytes) to the batch, packed with the lines before it while they are
    # shorter than minev; 0 when the batch has no room for it.
    function add(t,    m) {
      m = clean(t)
      if (pend != "" && (length(pend) >= minev || length(pend) + length(m) > 262118)) settle()
      if (left - (pend == "" ? 0 : 1) < 1 || length(pend) + length(m) + 26 > room) { settle(); return 0 }
      pend = pend m
      pendraw += length(t)
      return 1
    }
    # Where to cut t, at most at byte max, not inside a UTF-8 character.
    function cut(t, max,    k) {
      k = max
      while (k > max - 3 && k > 1 && substr(t, k + 1, 1) ~ /[\200-\277]/) k--
      if (substr(t, k + 1, 1) ~ /[\200-\277]/) k = max
      return k
    }
    # t without a UTF-8 character cut short at its end (the rest of it is yet to be written).
    function whole(t,    n, k, b) {
      n = length(t)
      for (k = n; k > n - 3 && k > 0; k--) {
        b = (substr(t, k, 1) in byte) ? byte[substr(t, k, 1)] : 0
        if (b < 128) return t
        if (b >= 192) return (n - k + 1 < (b >= 240 ? 4 : b >= 224 ? 3 : 2)) ? substr(t, 1, k - 1) : t
      }
      return t
    }
    BEGIN {
      for (i = 1; i < 32; i++) { ch[i] = sprintf("%c", i); code[i] = sprintf("\\\\u%04x", i) }
      for (i = 128; i < 256; i++) byte[sprintf("%c", i)] = i
      rep = "\357\277\275"
      valid = "^([\001-\177]|[\302-\337][\200-\277]|\340[\240-\277][\200-\277]|[\341-\354\356\357][\200-\277][\200-\277]|\355[\200-\237][\200-\277]|\360[\220-\277][\200-\277][\200-\277]|[\361-\363][\200-\277][\200-\277][\200-\277]|\364[\200-\217][\200-\277][\200-\277])*$"
      room = 1048576; left = 10000; minev = int(avail / 256); sep = ""; pend = ""
      printf "{\"logGroupName\":\"%s\",\"logStreamName\":\"%s\",\"logEvents\":[", group, stream > out
      if (note != "") emit(note "\n", 0)
    }
    {
      seen += length($0)
      t = $0
      partial = 0
      if (seen < avail) { t = t "\n"; seen++ }
      else if (flush == 0) partial = 1
      else if (flush == 1) t = whole(t)
      while (length(t) > 0) {
        max = (t ~ /[\200-\377]/) ? 87372 : 262118
        if (partial && length(t) <= max) exit
        piece = (length(t) > max) ? substr(t, 1, cut(t, max)) : t
        if (!add(piece)) { full = 1; exit }
        t = substr(t, length(piece) + 1)
      }
    }
    END {
      settle()
      printf "]}" > out
      print taken + 0, full + 0
    }') || return 1
  REPLY_SHIP_TAKEN=${answer% *}
  REPLY_SHIP_FULL=${answer#* }
}

# One CloudWatch Logs call: target $1 (Logs_20140328.<operation>), body file $2, signed
# (SigV4) with the shipper's credentials; its status in REPLY_LOGS_STATUS (000: no answer)
# and, unless a 200, its error type in REPLY_LOGS_ERROR. The signing key lasts a day. With
# $3 `ahead`, ship_ahead makes the next batch while the call is under way.
logs_call() {
  local TZ=UTC0 amz_date day host path canonical scope to_sign part status='' pid
  printf -v amz_date '%(%Y%m%dT%H%M%S)TZ' -1
  day=${amz_date:0:8}
  host=${LOGS_URL#*://}
  path=${host#"${host%%/*}"}/
  host=${host%%/*}
  scope="$day/$LOGS_REGION/logs/aws4_request"
  if [ "$SHIP_SIGN_DAY" != "$day" ]; then
    hex_of "AWS4$SHIP_SECRET_KEY"
    SHIP_SIGN_KEY=$REPLY_HEX
    REPLY_HEX=''
    for part in "$day" "$LOGS_REGION" logs aws4_request; do
      hmac_of "$SHIP_SIGN_KEY" "$part"
      SHIP_SIGN_KEY=$REPLY_HMAC_HEX
    done
    SHIP_SIGN_DAY=$day
  fi
  REPLY_SHA256_HEX=$(sha256sum <"$2")
  printf -v canonical 'POST\n%s\n\ncontent-type:%s\nhost:%s\nx-amz-date:%s\nx-amz-security-token:%s\nx-amz-target:%s\n\n%s\n%s' \
    "$path" "$AWS_CONTENT_TYPE" "$host" "$amz_date" "$SHIP_TOKEN" "$1" "$AWS_SIGNED_HEADERS" "${REPLY_SHA256_HEX%% *}"
  sha256_of "$canonical"
  printf -v to_sign 'AWS4-HMAC-SHA256\n%s\n%s\n%s' "$amz_date" "$scope" "$REPLY_SHA256_HEX"
  hmac_of "$SHIP_SIGN_KEY" "$to_sign"
  {
    curl_option url "$LOGS_URL/"
    for part in "Content-Type: $AWS_CONTENT_TYPE" "X-Amz-Date: $amz_date" "X-Amz-Security-Token: $SHIP_TOKEN" "X-Amz-Target: $1" \
      "Authorization: AWS4-HMAC-SHA256 Credential=$SHIP_KEY_ID/$scope, SignedHeaders=$AWS_SIGNED_HEADERS, Signature=$REPLY_HMAC_HEX"; do
      curl_option header "$part"
    done
  } | curl -s --max-time 10 -X POST -K - --data-binary "@$2" -o "$2.answer" -w '%{http_code}' >"$2.status" 2>/dev/null &
  pid=$!
  if [ "${3:-}" = ahead ]; then ship_ahead; fi
  wait "$pid"
  read -r status 2>/dev/null <"$2.status"
  REPLY_LOGS_STATUS=${status:-000}
  REPLY_LOGS_ERROR=''
  if [ "$REPLY_LOGS_STATUS" = 200 ]; then return 0; fi
  json_file_value __type "$2.answer"
  REPLY_LOGS_ERROR=${REPLY_JSON_VALUE##*#}
  # An answer that is not CloudWatch's JSON (a proxy's, an XML error): its first line.
  if [ -z "$REPLY_LOGS_ERROR" ] && IFS= read -r -d '' -n 2000 REPLY_LOGS_ERROR <"$2.answer"; [ -n "$REPLY_LOGS_ERROR" ]; then
    if [[ $REPLY_LOGS_ERROR =~ \<Code\>([^<]*) ]]; then REPLY_LOGS_ERROR=${BASH_REMATCH[1]}; else REPLY_LOGS_ERROR=${REPLY_LOGS_ERROR%%$'\n'*}; fi
  fi
  return 1
}

# While a full batch is sent (logs_call's $3), makes the next one from where it ends into
# $body.next, when more than a batch was waiting: sending and making overlap, as a flood
# needs. It sets ship_phase's ahead variables, and leaves the batch being sent's replies as
# they were; a batch sent in vain throws the next one away.
ship_ahead() {
  local taken=$REPLY_SHIP_TAKEN full=$REPLY_SHIP_FULL from=$(( off + REPLY_SHIP_TAKEN ))
  if (( final || size <= from || ! (full || avail == 1048576) )); then return; fi
  ahead_avail=$(( size - from > 1048576 ? 1048576 : size - from ))
  clock_ms
  if ship_batch "$ahead_avail" "$body.next" "$stream" "$REPLY_NOW_MS" '' 0 < <(dd if="$file" bs=65536 skip="$from" count="$ahead_avail" iflag=skip_bytes,count_bytes 2>/dev/null) &&
    (( REPLY_SHIP_TAKEN > 0 )); then
    ahead=1
    ahead_taken=$REPLY_SHIP_TAKEN
    ahead_full=$REPLY_SHIP_FULL
  fi
  REPLY_SHIP_TAKEN=$taken
  REPLY_SHIP_FULL=$full
}

# The shipper's credentials, asked of the API when it has none or they are due for a
# refresh (every DATA_REFRESH_MS: a session lasts an hour); 1 when it has none. A refresh
# that fails keeps the last ones while they last.
ship_credentials() {
  local file="$ROOT_DIR/$1.ship.credentials" status
  if [ -n "$SHIP_KEY_ID" ] && (( SECONDS < SHIP_REFRESH_AT )); then return 0; fi
  status=$( umask 077; post_json "$LOG_CREDENTIALS_URL" "$HEARTBEAT_BODY" 10 "$file")
  if [[ $status == 2?? ]]; then
    json_file_value AccessKeyId "$file"
    SHIP_KEY_ID=$REPLY_JSON_VALUE
    json_file_value SecretAccessKey "$file"
    SHIP_SECRET_KEY=$REPLY_JSON_VALUE
    json_file_value SessionToken "$file"
    SHIP_TOKEN=$REPLY_JSON_VALUE
    REPLY_JSON_VALUE=''
    SHIP_SIGN_DAY=''
    SHIP_REFRESH_AT=$(( SECONDS + DATA_REFRESH_MS / 1000 ))
  else
    REPLY_LOGS_ERROR="no credentials from the API (HTTP $status)"
  fi
  rm -f "$file"
  [ -n "$SHIP_KEY_ID" ]
}

# Ships phase $1's log until told it has ended (the file $1.ship.json.end, which it looks
# for each round: a signal could cut short a command substitution of its own) and
# everything is shipped, or SHIP_DRAIN_MS after. Failed calls are tried again after a
# jittered backoff of up to two rounds. It ignores SIGTERM, SIGINT and SIGHUP, as the
# log's writer does: a node shutting down signals every process, and the job's last lines
# are still to go.
ship_phase() {
  local phase=$1 file="$ROOT_DIR/$1.log" body="$ROOT_DIR/$1.ship.json" stream="$LOG_STREAM_PREFIX$NODE_RANK/$1"
  local off=0 size avail final=0 deadline=0 flush=0 note='' skipped=0 why='' created=0 delay=0 sent=0 calls=0 last=0
  # The next batch, made by ship_ahead while the last one was sent: in $body.next when ahead is 1.
  local ahead=0 ahead_taken=0 ahead_full=0 ahead_avail=0
  local -a cpu
  trap '' TERM INT HUP
  # Beside the job, never before it: a CPU-bound job keeps its cores.
  renice -n 10 -p "$BASHPID" >/dev/null 2>&1
  printf '{"logGroupName":"%s","logStreamName":"%s"}' "$LOG_GROUP" "$stream" >"$body.create"
  while :; do
    if (( ! final )) && { [ -e "$body.end" ] || ! agent_alive; }; then final=1; fi
    if (( final )); then
      flush=2
      clock_ms
      if (( deadline == 0 )); then deadline=$(( REPLY_NOW_MS + SHIP_DRAIN_MS )); fi
    fi
    size=$(stat -c %s "$file" 2>/dev/null) || size=0
    if (( size - off > SHIP_BACKLOG_BYTES )) || { (( final && REPLY_NOW_MS >= deadline )) && (( size > off )); }; then
      if (( final && REPLY_NOW_MS >= deadline )); then why=${why:-"the node was going"}; fi
      skipped=$(( skipped + size - off ))
      off=$size
      ahead=0
      note="relaunch: $skipped bytes of this output were not shipped to CloudWatch Logs (${why:-the job printed faster than CloudWatch Logs took it})"
      log "skipped to the end of the $phase log: ${note#relaunch: }"
    fi
    if (( size > off )) || [ -n "$note" ]; then
      if ! ship_credentials "$phase"; then
        why=$REPLY_LOGS_ERROR
        log "the $phase log cannot be shipped yet: $why"
        delay=$(( delay == 0 ? SHIP_INTERVAL_MS / 4 + 1 : (delay * 2 > 2 * SHIP_INTERVAL_MS ? 2 * SHIP_INTERVAL_MS : delay * 2) ))
      elif (( ! created )) && ! logs_call Logs_20140328.CreateLogStream "$body.create" && [ "$REPLY_LOGS_ERROR" != ResourceAlreadyExistsException ]; then
        why="CloudWatch Logs: HTTP $REPLY_LOGS_STATUS $REPLY_LOGS_ERROR"
        log "the $phase log's stream could not be created ($why)"
        delay=$(( delay == 0 ? SHIP_INTERVAL_MS / 4 + 1 : (delay * 2 > 2 * SHIP_INTERVAL_MS ? 2 * SHIP_INTERVAL_MS : delay * 2) ))
      else
        created=1
        if (( ahead )) && [ -z "$note" ] && mv -f "$body.next" "$body"; then
          REPLY_SHIP_TAKEN=$ahead_taken
          REPLY_SHIP_FULL=$ahead_full
          avail=$ahead_avail
        else
          avail=$(( size - off > 1048576 ? 1048576 : size - off ))
          clock_ms
          if ! ship_batch "$avail" "$body" "$stream" "$REPLY_NOW_MS" "$note" "$flush" < <(dd if="$file" bs=65536 skip="$off" count="$avail" iflag=skip_bytes,count_bytes 2>/dev/null); then
            REPLY_SHIP_TAKEN=0
            REPLY_SHIP_FULL=0
          fi
        fi
        ahead=0
        # A last line without its newline waits one round for the rest of it, no more.
        if (( final )); then flush=2; elif (( REPLY_SHIP_TAKEN < avail && ! REPLY_SHIP_FULL )); then flush=1; else flush=0; fi
        if (( REPLY_SHIP_TAKEN == 0 )) && [ -z "$note" ]; then
          :
        elif logs_call Logs_20140328.PutLogEvents "$body" ahead; then
          off=$(( off + REPLY_SHIP_TAKEN ))
          sent=$(( sent + REPLY_SHIP_TAKEN ))
          calls=$(( calls + 1 ))
          clock_ms
          last=$REPLY_NOW_MS
          note=''
          skipped=0
          why=''
          delay=0
          # More than a batch was waiting: the next goes at once.
          if (( REPLY_SHIP_FULL || avail == 1048576 )); then continue; fi
        else
          ahead=0
          case $REPLY_LOGS_STATUS:$REPLY_LOGS_ERROR in
            000:*) why='CloudWatch Logs unreachable' ;;
            *:ThrottlingException) why='throttled: ThrottlingException' ;;
            5??:*) why="CloudWatch Logs answered HTTP $REPLY_LOGS_STATUS" ;;
            *:ResourceNotFoundException) created=0; why='the stream was not found' ;;
            *:ExpiredTokenException | *:UnrecognizedClientException | *:InvalidSignatureException | *:AccessDeniedException)
              SHIP_KEY_ID=''
              why="credentials refused: $REPLY_LOGS_ERROR"
              ;;
            *)
              # No retry changes a refusal of this batch: it is skipped, and said.
              why="refused: HTTP $REPLY_LOGS_STATUS $REPLY_LOGS_ERROR"
              skipped=$(( skipped + REPLY_SHIP_TAKEN ))
              off=$(( off + REPLY_SHIP_TAKEN ))
              note="relaunch: $skipped bytes of this output were not shipped to CloudWatch Logs ($why)"
              ;;
          esac
          log "the $phase log's shipping to CloudWatch Logs failed ($why); $(( size - off )) bytes wait"
          delay=$(( delay == 0 ? SHIP_INTERVAL_MS / 4 + 1 : (delay * 2 > 2 * SHIP_INTERVAL_MS ? 2 * SHIP_INTERVAL_MS : delay * 2) ))
        fi
      fi
    fi
    if (( final )); then
      clock_ms
      if (( off >= size )) && [ -z "$note" ]; then break; fi
      if (( REPLY_NOW_MS >= deadline )) && (( off >= size )); then break; fi
    fi
    if (( delay > 0 )); then jittered_ms "$delay"; pause_ms "$REPLY_JITTERED_MS"; else ship_wait "$file" "$off" "$body.end"; fi
  done
  # Its CPU and its children's, user and system (the benchmark reads them here).
  times >"$body.cpu"
  mapfile -t cpu <"$body.cpu"
  log "shipped $sent bytes of the $phase log in $calls calls, the last acknowledged at $last (CPU: ${cpu[*]})"
  rm -f "$body" "$body.create" "$body.answer" "$body.cpu" "$body.status" "$body.next" "$body.create.status"
}

# --- the library: the next attempt on this node ---
# A node the task may reuse (REUSE_NODE) does not shut down once its job is over: it proves
# the attempt's processes gone, asks the API what next (POST .../next, with the ended
# attempt's secret, which that route alone still takes), and shuts down or becomes a node
# of the next attempt: that attempt's secret, rank, IPs, URLs, log streams and environment,
# its setup run again or skipped as the answer says. docs/agent.md tells the whole of it.
# Its globals, unexported as the state block's (declared global: the library is sourced in
# a function): the folder of the phases' cgroups (cgroup_dir; empty where the agent can make
# none), and what of the ended attempt is still alive, in one line (prove_gone).
declare -g +x CGROUP_DIR=''
declare -g +x REPLY_ALIVE=''

# In the interruption watcher, one look at the held-after tag (HELD_TAG): once it names
# this attempt (it has ended, and this node is kept for the next), the agent is told
# (SIGUSR2), once; the watch goes on.
held_look() {
  if imds_get "tags/instance/$HELD_TAG" && [ "$REPLY_IMDS_VALUE" = "$ATTEMPT" ]; then
    kill -USR2 "$AGENT_PID"
    HELD_TAG=''
  fi
}

# The folder under which each phase gets a cgroup of its own, in CGROUP_DIR: beneath the
# agent's own cgroup (a local node's cgroup then still holds all of it), where the agent is
# root and cgroup v2 is mounted (at /sys/fs/cgroup, or at /sys/fs/cgroup/unified beside v1's
# controllers); empty elsewhere (the mark and the groups find the phases' processes then).
cgroup_dir() {
  local line mount=''
  CGROUP_DIR=''
  if (( EUID != 0 )); then return; fi
  # The last cgroup2 mount in the table: one mounted later over the same place hides those before.
  while IFS= read -r line; do
    if [[ ${line#* - } == 'cgroup2 '* ]]; then
      read -r _ _ _ _ mount _ <<<"${line%% - *}"
    fi
  done </proc/self/mountinfo
  # A mount point the table escapes (\040 for a space) is not used.
  if [[ -z $mount || $mount == *\\* ]] || [ "$(stat -f -c %T "$mount" 2>/dev/null)" != cgroup2fs ]; then return; fi
  while IFS= read -r line; do
    if [[ $line == 0::/* ]]; then
      CGROUP_DIR=$mount${line#0::}
      CGROUP_DIR=${CGROUP_DIR%/}/relaunch-phases
    fi
  done </proc/self/cgroup
}

# Marks phase $1's process (phase_process, before it becomes the phase) on a node the task
# may reuse: RELAUNCH_PHASE_MARK (this instance and attempt) in its environment, which its
# children inherit, and, where the agent can make one, a cgroup of its own, which whatever
# the phase starts stays in, whatever it does to its session, group or environment.
phase_mark() {
  local group
  if [ -z "$REUSE_NODE" ]; then return; fi
  export RELAUNCH_PHASE_MARK="$INSTANCE_ID/$ATTEMPT"
  cgroup_dir
  if [ -z "$CGROUP_DIR" ]; then return; fi
  group="$CGROUP_DIR/attempt-$ATTEMPT-$1"
  if ! { mkdir -p "$group" && printf '%s\n' "$BASHPID" >"$group/cgroup.procs"; } 2>/dev/null; then
    echo "relaunch: could not put $1 in the cgroup $group: its processes are found by their environment and group"
  fi
}

# At the node's end: the phases' cgroups that hold no process are removed, and their folder
# once it is empty, as a proof removes them (a phase stopped by a shutdown leaves its own).
remove_phase_cgroups() {
  cgroup_dir
  if [ -n "$CGROUP_DIR" ]; then rmdir "$CGROUP_DIR/attempt-"* "$CGROUP_DIR" 2>/dev/null; fi
}

# Process $1 in words: its pid and command line (at most 80 bytes of it).
describe_pid() {
  local command=''
  command=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)
  command=${command% }
  printf 'pid %s (%s)' "$1" "${command:0:80}"
}

# The pids of this attempt's processes still alive on the node, one a line: those in its
# phases' cgroups, those whose environment holds its mark (RELAUNCH_PHASE_MARK), and those
# in its phases' process groups or sessions (PHASE_GROUPS; a group whose leader runs but
# started at another time is another's: end_orphaned_node says why). Never the agent.
left_pids() {
  local mark="RELAUNCH_PHASE_MARK=$INSTANCE_ID/$ATTEMPT" entry group started file
  local -a groups=()
  for entry in "${PHASE_GROUPS[@]}"; do
    read -r group started <<<"$entry"
    if ! process_start "$group" || [ "$REPLY_STARTED" = "$started" ]; then groups+=("$group"); fi
  done
  {
    if [ -n "$CGROUP_DIR" ]; then
      for file in "$CGROUP_DIR/attempt-$ATTEMPT-"*/cgroup.procs; do
        if [ -f "$file" ]; then cat "$file"; fi
      done
    fi
    grep -lzxF -e "$mark" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
    if (( ${#groups[@]} )); then
      ps -A -o pid= -o pgid= -o sid= -o stat= 2>/dev/null |
        awk -v groups="${groups[*]}" 'BEGIN { n = split(groups, g, " "); for (i = 1; i <= n; i++) ours[g[i]] = 1 }
          $4 !~ /^Z/ && ($2 in ours || $3 in ours) { print $1 }'
    fi
  } | sort -un | grep -vx -e "$AGENT_PID" -e "$BASHPID"
}

# Proves this attempt's processes gone, within PROOF_SECONDS: what is left of its phases
# gets SIGTERM, and SIGKILL (and, where the kernel has it, cgroup.kill) once the grace
# period has passed; its container is removed, and docker must list it no more; with
# nvidia-smi on the node, it must list no live compute process. 1 when it cannot, what
# is still alive in REPLY_ALIVE.
prove_gone() {
  local signal=TERM pid out file start
  local -a alive
  cgroup_dir
  clock_ms
  start=$REPLY_NOW_MS
  while :; do
    alive=()
    while IFS= read -r pid; do
      if [[ $pid =~ ^[0-9]+$ ]] && kill -"$signal" "$pid" 2>/dev/null; then alive+=("$(describe_pid "$pid")"); fi
    done < <(left_pids)
    if [ "$signal" = KILL ] && [ -n "$CGROUP_DIR" ]; then
      for file in "$CGROUP_DIR/attempt-$ATTEMPT-"*/cgroup.kill; do
        if [ -f "$file" ]; then echo 1 >"$file"; fi
      done
    fi
    if [ -n "$CONTAINER" ]; then
      docker rm -f "$CONTAINER" >/dev/null 2>&1
      if ! out=$(docker ps -a -q --filter "name=^/$CONTAINER\$" 2>&1); then
        alive+=("the container $CONTAINER, docker ps failing: ${out%%$'\n'*}")
      elif [ -n "$out" ]; then
        alive+=("the container $CONTAINER")
      fi
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
      if out=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>&1); then
        while read -r pid; do
          if [[ $pid =~ ^[0-9]+$ ]] && [ -e "/proc/$pid" ]; then alive+=("GPU compute process $(describe_pid "$pid")"); fi
        done <<<"$out"
      else
        alive+=("GPU processes unknown, nvidia-smi failing: ${out%%$'\n'*}")
      fi
    fi
    if (( ${#alive[@]} == 0 )); then
      # Their folder too (the next attempt makes it again): rmdir refuses a cgroup with one
      # beneath it, so the cgroup a local node runs in would outlive the node.
      if [ -n "$CGROUP_DIR" ]; then rmdir "$CGROUP_DIR/attempt-$ATTEMPT-"* "$CGROUP_DIR" 2>/dev/null; fi
      return 0
    fi
    clock_ms
    if (( REPLY_NOW_MS - start >= PROOF_SECONDS * 1000 )); then
      printf -v REPLY_ALIVE '%s, ' "${alive[@]}"
      REPLY_ALIVE="attempt $ATTEMPT's processes are not all gone $PROOF_SECONDS s after its job ended: ${REPLY_ALIVE%, }"
      return 1
    fi
    if (( REPLY_NOW_MS - start >= STOP_GRACE_SECONDS * 1000 )); then signal=KILL; fi
    pause_ms 100
  done
}

# The non-negative integer value of key $1 in the JSON text $2, in REPLY_JSON_VALUE; empty
# when it has none.
json_integer() {
  local pattern="\"$1\"[[:space:]]*:[[:space:]]*([0-9]+)"
  REPLY_JSON_VALUE=''
  if [[ $2 =~ $pattern ]]; then REPLY_JSON_VALUE=${BASH_REMATCH[1]}; fi
}

# Once the job is over on this node (its last report sent, or its phase stopped because
# the node is held): the attempt's helpers stopped, its output shipped, its processes
# proved gone (prove_gone), then the API asked what next, with the ended attempt's secret,
# at once and then every HOLD_POLL_MS, jittered, for up to NEXT_WAIT_SECONDS: `wait`, `stop`
# (1: the node shuts down) or `run` (become_next). A refusal (401, 409, any 4xx but 429)
# is final; throttling, a 5xx or no answer is asked again.
next_attempt() {
  local answer="$ROOT_DIR/next.answer.json" status proved=1 deadline=$(( SECONDS + NEXT_WAIT_SECONDS ))
  stop_helper "$DATA_PID"
  DATA_PID=''
  stop_helper "$HEARTBEAT_PID"
  HEARTBEAT_PID=''
  finish_shippers end
  SHIP_PHASE=''
  log "job $JOB_ID attempt $ATTEMPT is over on node $NODE_RANK: proving its processes gone"
  if ! prove_gone; then
    proved=0
    log "$REPLY_ALIVE"
  fi
  log "asking what next"
  while :; do
    status=$(post_json "$NEXT_URL" "$HEARTBEAT_BODY" 10 "$answer")
    case $status in
      2??)
        json_file_value next "$answer"
        case $REPLY_JSON_VALUE in
          run) break ;;
          stop)
            json_file_value reason "$answer"
            log "told to shut down: $REPLY_JSON_VALUE"
            return 1
            ;;
        esac
        ;;
      429 | 5?? | 000) ;;
      *) log "the API refused to say what next (HTTP $status): shutting down"; return 1 ;;
    esac
    if (( SECONDS >= deadline )); then
      log "no next attempt for this node in $NEXT_WAIT_SECONDS s: shutting down"
      return 1
    fi
    jittered_ms "$HOLD_POLL_MS"
    pause_ms "$REPLY_JITTERED_MS"
  done
  become_next "$answer" "$proved"
}

# Makes this node the node the API's `run` answer (file $1) names, of the attempt it names:
# the ended attempt's logs, truncated marks and reports kept as <phase>.attempt-<n>.<rest>
# and the attempt it serves written into `attempt`, every callback URL and log
# stream the new attempt's, its rank, the nodes' IPs and the job's environment, its
# callback secret (the instance's parameter, rewritten for it: read until it is no longer
# the ended attempt's, which is never sent on the new attempt's routes), a first heartbeat
# and the helpers, the data credentials and the container again. With $2 0 (the ended
# attempt's processes are not proved gone) it reports the agent's failure at
# previous-attempt, naming them, and returns 1, as it does when any of that fails. Else 0,
# REPLY_NEXT_SETUP saying whether setup runs again (rerun) or was skipped (skip): a node
# with a container, which is new, runs it again.
become_next() {
  local text='' old=$ATTEMPT new rank nodes ips setup name rest from to was=$SECRET deadline=$(( SECONDS + DISCOVERY_TIMEOUT_SECONDS ))
  local pattern='"nodeIps"[[:space:]]*:[[:space:]]*\[([^]]*)\]'
  IFS= read -r -d '' text <"$1"
  json_integer attempt "$text"
  new=$REPLY_JSON_VALUE
  json_integer nodeRank "$text"
  rank=$REPLY_JSON_VALUE
  json_integer numNodes "$text"
  nodes=$REPLY_JSON_VALUE
  json_value setup "$text"
  setup=$REPLY_JSON_VALUE
  ips=''
  if [[ $text =~ $pattern ]]; then ips=${BASH_REMATCH[1]//[\"[:space:]]/}; fi
  ips=${ips//,/$'\n'}
  if [ -z "$new" ] || (( new <= old )) || [ -z "$nodes" ] || [ -z "$rank" ] || (( rank >= nodes )) ||
    [[ ! $setup =~ ^(rerun|skip)$ ]] || (( $(grep -c . <<<"$ips") != nodes )); then
    log "the API's answer to what next is not one this agent reads (${text:0:300}): shutting down"
    return 1
  fi
  log "this node is node $rank of $nodes of attempt $new (it served attempt $old)"
  # The ended attempt's files keep its number in their names, and `attempt` says which one
  # this folder serves now (written whole: a reader never sees half of it), before anything
  # of the new attempt is written: readers (local/paths.ts attemptFile) take the plain names
  # as the attempt's that `attempt` names.
  for name in setup run; do
    for rest in log log.truncated report.json stopped.json; do
      if [ -e "$ROOT_DIR/$name.$rest" ]; then mv -f "$ROOT_DIR/$name.$rest" "$ROOT_DIR/$name.attempt-$old.$rest"; fi
    done
  done
  printf '%s\n' "$new" >"$ROOT_DIR/attempt.next" && mv -f "$ROOT_DIR/attempt.next" "$ROOT_DIR/attempt"
  from="/attempts/$old/"
  to="/attempts/$new/"
  for name in HEARTBEAT_URL REPORT_URL HOLD_URL DATA_CREDENTIALS_URL LOG_CREDENTIALS_URL LIBRARY_URL NEXT_URL; do
    printf -v "$name" '%s' "${!name/"$from"/$to}"
  done
  # The replacements are variables: bash 4.2 keeps the backslash of an escaped slash in one.
  to="/attempt-$new/"
  LOG_STREAM_PREFIX=${LOG_STREAM_PREFIX/"/attempt-$old/"/$to}
  ATTEMPT=$new
  NODE_RANK=$rank
  NUM_NODES=$nodes
  NODE_IPS=$ips
  STOP_CAUSE=''
  FAILED_STEP=''
  FAILED_ERROR=''
  PHASE_GROUPS=()
  { printf '%s' "$JOB_ENV"
    printf 'export RELAUNCH_ATTEMPT=%q SKYPILOT_TASK_ID=%q\n' "$new" "$JOB_ID-$new"
    printf 'export RELAUNCH_NUM_NODES=%q SKYPILOT_NUM_NODES=%q\n' "$nodes" "$nodes"
  } >"$ROOT_DIR/env.sh"
  write_node_env
  while :; do
    if ! fetch_secret; then
      SECRET=''
      log "no callback secret for attempt $new after $DISCOVERY_TIMEOUT_SECONDS s ($REPLY_SSM_ERROR): shutting down"
      return 1
    fi
    if [ "$SECRET" != "$was" ]; then break; fi
    if (( SECONDS >= deadline )); then
      SECRET=''
      log "the callback secret is still attempt $old's after $DISCOVERY_TIMEOUT_SECONDS s: shutting down"
      return 1
    fi
    pause_ms 1000
  done
  was=''
  start_heartbeat
  stop_helper "$WATCH_PID"
  WATCH_PID=''
  start_interruption_watch
  log "job $JOB_ID attempt $ATTEMPT node $NODE_RANK of $NUM_NODES: setup"
  start_shipper setup
  if (( ! $2 )); then
    fail_step previous-attempt "$REPLY_ALIVE" >>"$ROOT_DIR/setup.log"
    report_agent_failure
    return 1
  fi
  if ! { if [ -n "$DATA_CREDENTIALS_URL" ]; then CURRENT_STEP=data-credentials; start_data_credentials; fi &&
    if [ -n "$CONTAINER_IMAGE" ]; then container_start; fi; } >>"$ROOT_DIR/setup.log" 2>&1 </dev/null; then
    log "the agent failed at ${FAILED_STEP:-$CURRENT_STEP} before setup: ${FAILED_ERROR:-see setup.log}"
    report_agent_failure
    return 1
  fi
  REPLY_NEXT_SETUP=$setup
  if [ "$setup" = skip ] && [ -n "$CONTAINER_IMAGE" ]; then
    echo "relaunch: setup runs again: it ran on this node in attempt $old, but in a container that is new" >>"$ROOT_DIR/setup.log"
    REPLY_NEXT_SETUP=rerun
  elif [ "$setup" = skip ]; then
    echo "relaunch: setup skipped: it ran on this node in attempt $old" >>"$ROOT_DIR/setup.log"
  fi
}

# relaunch:library-end

# Fetches the agent's library from the API once (three tries, 2 and 4 s apart), checks
# its SHA-256 is LIBRARY_SHA256 and loads it; 1 when it cannot be had, why in
# REPLY_LIBRARY_ERROR.
load_library() {
  local file="$ROOT_DIR/library.sh" status try got
  if (( LIBRARY_LOADED )); then return 0; fi
  for (( try = 1; try <= 3; try++ )); do
    status=$(post_json "$LIBRARY_URL" "$HEARTBEAT_BODY" 10 "$file")
    if [[ $status == 2?? ]]; then
      got=$(sha256sum <"$file")
      if [ "${got%% *}" = "$LIBRARY_SHA256" ]; then
        # shellcheck disable=SC1090
        . "$file"
        LIBRARY_LOADED=1
        return 0
      fi
      status="a program whose SHA-256 is ${got%% *}, not $LIBRARY_SHA256"
    else
      status="HTTP $status"
    fi
    if (( try < 3 )); then jittered_ms $(( 2000 << (try - 1) )); pause_ms "$REPLY_JITTERED_MS"; fi
  done
  REPLY_LIBRARY_ERROR="the agent's library could not be fetched from $LIBRARY_URL (last answer: $status)"
  return 1
}

# The library for a node that cannot go on without it (to do $2): its failure is the
# agent's, at step $1.
need_library() {
  load_library || fail_step "$1" "$REPLY_LIBRARY_ERROR: cannot $2"
}

# A round's wait: SHIP_INTERVAL_MS, looking at the log $1 (shipped up to offset $2) every
# half second, and over at once when a whole batch (1 MiB) waits or the phase has ended
# (file $3): a job printing fast is not kept waiting a round, and a few lines are.
ship_wait() {
  local waited=0 slice=$(( SHIP_INTERVAL_MS < 500 ? SHIP_INTERVAL_MS : 500 )) size
  while (( waited < SHIP_INTERVAL_MS )); do
    pause_ms "$slice"
    waited=$(( waited + slice ))
    if [ -e "$3" ]; then return; fi
    size=$(stat -c %s "$1" 2>/dev/null) || size=0
    if (( size - $2 >= 1048576 )); then return; fi
  done
}

# Starts phase $1's shipper, once, when the deployment ships logs.
start_shipper() {
  if [ -z "$LOG_GROUP" ] || [ "$SHIP_PHASE" = "$1" ]; then return; fi
  # Without its library the job runs unshipped, its log on the node as always.
  if ! load_library; then
    log "$REPLY_LIBRARY_ERROR: nothing ships to CloudWatch Logs"
    LOG_GROUP=''
    return
  fi
  rm -f "$ROOT_DIR/$1.ship.json.end"
  ship_phase "$1" </dev/null >/dev/null 2>>"$ROOT_DIR/ship.log" &
  SHIP_PIDS+=("$!:$1")
  SHIP_PHASE=$1
}

# Tells every shipper its phase has ended, and with $1 (end), waits for them to ship what
# is left: a round to notice, SHIP_DRAIN_MS, and the 10 s of their last call, then SIGKILL.
finish_shippers() {
  local entry deadline
  for entry in "${SHIP_PIDS[@]}"; do : >"$ROOT_DIR/${entry#*:}.ship.json.end"; done
  if [ "${1:-}" != end ]; then return; fi
  clock_ms
  deadline=$(( REPLY_NOW_MS + 2 * SHIP_INTERVAL_MS + SHIP_DRAIN_MS + 11000 ))
  for entry in "${SHIP_PIDS[@]}"; do
    while kill -0 "${entry%%:*}" 2>/dev/null; do
      clock_ms
      if (( REPLY_NOW_MS >= deadline )); then kill -KILL "${entry%%:*}" 2>/dev/null; break; fi
      pause_ms 50
    done
  done
  SHIP_PIDS=()
}

# --- 5. setup and run, and their reports ---

# Copies a phase's output (stdin, its FIFO) to its log ($1) until every writer has closed
# it. It ignores SIGTERM, SIGINT and SIGHUP: a node that shuts down signals every process,
# and a job saving its state on SIGTERM must still be able to print (a reader that died
# first would kill it with SIGPIPE at its next line). A log that cannot be written (a full
# disk) is left as it is, marked truncated, and the rest is read and dropped: the job
# keeps running.
log_writer() {
  trap '' TERM INT HUP
  if ! cat >>"$1"; then
    : >"$1.truncated"
    cat >/dev/null
  fi
} 2>/dev/null

# The phase $1 as the process the agent waits for: it becomes the phase's shell (or, with a
# container, the docker exec that runs it there) in a session of its own, its pid the
# session's and the process group's id. Called in a background subshell, which is no
# group leader, so setsid does not fork. On a node that may serve the next attempt, its
# phases are marked first (phase_mark): what one leaves behind is found when the attempt
# ends (prove_gone).
phase_process() {
  if (( LIBRARY_LOADED )); then phase_mark "$1"; fi
  if [ -n "$CONTAINER_IMAGE" ]; then
    exec setsid docker exec -i -w "$WORK_DIR" "${HOME_FLAGS[@]}" "$CONTAINER" \
      bash -c "$PHASE_PROGRAM" relaunch-phase "$ROOT_DIR" "$WORK_DIR" "$1" < <(secret_exports)
  fi
  exec setsid bash -c "$PHASE_PROGRAM" relaunch-phase "$ROOT_DIR" "$WORK_DIR" "$1" < <(secret_exports)
}

# Runs phase $1 and sets REPLY_PHASE_CODE to its exit code, as soon as its shell exits. Its
# output reaches the log through a FIFO read by log_writer; a background child of the
# phase may hold that FIFO open long after, so the writer gets a moment to finish, no more.
# The phase's group id and its leader's start time are in phase.group, for what stops the
# job when the agent cannot (end_orphaned_node, the local launcher's watcher), until the
# group is gone: its id may then be another group's. A phase stopped because this node is
# kept for the next attempt (held) is reported as stopped, and run_phase returns 1.
run_phase() {
  local phase=$1 fifo="$ROOT_DIR/$1.pipe"
  rm -f "$fifo"
  WRITER_PID=''
  if mkfifo "$fifo" 2>/dev/null; then
    log_writer "$ROOT_DIR/$phase.log" <"$fifo" &
    WRITER_PID=$!
    phase_process "$phase" >"$fifo" 2>&1 &
  else
    phase_process "$phase" >>"$ROOT_DIR/$phase.log" 2>&1 &
  fi
  PHASE_PID=$!
  PHASE_NAME=$phase
  start_shipper "$phase"
  process_start "$PHASE_PID"
  printf '%s %s\n' "$PHASE_PID" "$REPLY_STARTED" >"$ROOT_DIR/phase.group"
  PHASE_GROUPS+=("$PHASE_PID $REPLY_STARTED")
  wait "$PHASE_PID"
  REPLY_PHASE_CODE=$?
  if ! group_alive "$PHASE_PID"; then rm -f "$ROOT_DIR/phase.group"; fi
  PHASE_PID=''
  PHASE_NAME=''
  await_writer
  finish_shippers
  rm -f "$fifo"
  if [ "$STOP_CAUSE" = held ]; then
    report_stopped "$phase"
    return 1
  fi
}

# Gives the log's writer up to 200 ms to copy what the phase printed last: a background
# child of the phase may hold the FIFO open long after, so no longer.
await_writer() {
  local tries
  for (( tries = 0; tries < 20; tries++ )); do
    if [ -z "$WRITER_PID" ] || ! kill -0 "$WRITER_PID" 2>/dev/null; then break; fi
    pause_ms 10
  done
}

# The end of a log as a JSON string: the last lines, at most TAIL_BYTES of them.
output_tail() {
  tail -n "$TAIL_LINES" "$1" 2>/dev/null | tail -c "$TAIL_BYTES" | json_string
}

# Sends a report (the JSON in file $2, about phase $1, described as $3 in the agent's log)
# until it is acknowledged (0; the answer in $1.answer.json) or refused for good (1): stale (409), any other answer but
# a timeout, throttling or a 5xx (a 3xx or a 4xx: no retry would change it), or $4
# seconds (REPORT_RETRY_SECONDS unless given) of those and of silence. Giving up ends the
# agent and the node shuts down; the controller then decides the attempt as it does for an
# instance that went.
send_report() {
  local phase=$1 body=$2 what=$3 retry=${4:-$REPORT_RETRY_SECONDS} delay=$BACKOFF_INITIAL_MS status
  local deadline
  clock_ms
  deadline=$(( REPLY_NOW_MS + retry * 1000 ))
  while :; do
    status=$(post_json "$REPORT_URL" "$body" 30 "$ROOT_DIR/$phase.answer.json")
    case $status in
      2??) log "reported $what"; return 0 ;;
      "$STALE_STATUS") log "attempt $ATTEMPT is no longer live: the API refused the $phase report ($status)"; return 1 ;;
      408 | 429 | 5?? | 000) ;;
      *) log "the API refused the $phase report for good (HTTP $status); giving up"; return 1 ;;
    esac
    clock_ms
    if (( REPLY_NOW_MS >= deadline )); then
      log "the $phase report was not acknowledged in $retry s (last answer: HTTP $status); giving up"
      return 1
    fi
    jittered_ms "$delay"
    seconds_of_ms "$REPLY_JITTERED_MS"
    log "the $phase report got HTTP $status; retrying in $REPLY_SECONDS s"
    pause_ms "$REPLY_JITTERED_MS"
    delay=$(( delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2 ))
  done
}

# Reports phase $1's exit code $2, with the end of its log; for setup, $3 is how long it
# ran in ms (0 skipped; never below 0, which the API would refuse).
report() {
  local body="$ROOT_DIR/$1.report.json"
  printf '{"nodeRank":%d,"phase":"%s","exitCode":%d%s,"outputTail":%s}' \
    "$NODE_RANK" "$1" "$2" "${3:+,\"setupMs\":$3}" "$(output_tail "$ROOT_DIR/$1.log")" >"$body"
  send_report "$1" "$body" "$1 exit code $2"
}

# Reports that phase $1 was stopped before it exited (STOP_CAUSE says why), with the end
# of its log, printed in its grace period included: the attempt's record then names the
# phase it was in and how far it got. No code: the one it gave would be relaunch's doing.
# Tried for STOPPED_RETRY_SECONDS only, as the node is going; written to $1.stopped.json,
# apart from the phase's report file a later local runtime reads for lost exit codes.
report_stopped() {
  local body="$ROOT_DIR/$1.stopped.json"
  printf '{"nodeRank":%d,"phase":"%s","stopped":"%s","outputTail":%s}' \
    "$NODE_RANK" "$1" "$STOP_CAUSE" "$(output_tail "$ROOT_DIR/$1.log")" >"$body"
  send_report "$1" "$body" "$1 stopped ($STOP_CAUSE)" "$STOPPED_RETRY_SECONDS"
}

# Reports that one of the agent's own steps failed before setup (FAILED_STEP, else the step
# it was in), with why and the end of setup's log, where the agent said what it did: the
# controller recovers the attempt, and the job's error budget is untouched.
report_agent_failure() {
  local body="$ROOT_DIR/setup.report.json" step=${FAILED_STEP:-$CURRENT_STEP} error=${FAILED_ERROR:-"see setup.log"}
  printf '{"nodeRank":%d,"phase":"setup","agentFailure":{"step":"%s","error":%s},"outputTail":%s}' \
    "$NODE_RANK" "$step" "$(printf '%s' "${error:0:1000}" | json_string)" "$(output_tail "$ROOT_DIR/setup.log")" >"$body"
  send_report setup "$body" "the agent's failure at $step"
}

# The API's answer to a setup report or a hold (the file $1): its word in REPLY_RUN_WORD
# (go, stop or hold; empty when it says none) and why in REPLY_RUN_REASON.
run_answer() {
  json_file_value run "$1"
  REPLY_RUN_WORD=$REPLY_JSON_VALUE
  json_file_value reason "$1"
  REPLY_RUN_REASON=$REPLY_JSON_VALUE
}

# Whether to go on to run once setup is reported (0) or not (1), as the API's answer to the
# setup report says: `go` (or no word: an API that knows no standbys), `stop`, or `hold`:
# a standby (launch_on_warning) asks every HOLD_POLL_MS, jittered, until it is told to go
# or to stop. A refusal other than throttling, a 5xx or no answer stops it too: only the
# API can say go. Its heartbeats go on meanwhile; a release shuts the node down.
may_run() {
  local status
  run_answer "$ROOT_DIR/setup.answer.json"
  case $REPLY_RUN_WORD in
    stop) log "told not to run: $REPLY_RUN_REASON"; return 1 ;;
    hold) ;;
    *) return 0 ;;
  esac
  log "holding before run: $REPLY_RUN_REASON"
  while :; do
    jittered_ms "$HOLD_POLL_MS"
    pause_ms "$REPLY_JITTERED_MS"
    status=$(post_json "$HOLD_URL" "$HEARTBEAT_BODY" 10 "$ROOT_DIR/hold.answer.json")
    case $status in
      2??)
        run_answer "$ROOT_DIR/hold.answer.json"
        case $REPLY_RUN_WORD in
          go) log "told to go: $REPLY_RUN_REASON"; return 0 ;;
          stop) log "told not to run: $REPLY_RUN_REASON"; return 1 ;;
        esac
        ;;
      408 | 429 | 5?? | 000) ;;
      *) log "the API refused the hold (HTTP $status): not running"; return 1 ;;
    esac
  done
}

# Runs the attempt's job on this node: setup (with $1 skip, only its report, 0 ms: it ran on this
# node in the attempt before, and its log says so: become_next), then, if setup exited 0
# and the API says go, run; each reported (setup with the ms it ran). Returns once the job
# is over on this node.
run_job() {
  local from
  if [ "$1" = skip ]; then
    report setup 0 0 || return
  else
    clock_ms
    from=$REPLY_NOW_MS
    run_phase setup || return
    clock_ms
    if ! report setup "$REPLY_PHASE_CODE" $(( REPLY_NOW_MS > from ? REPLY_NOW_MS - from : 0 )) || (( REPLY_PHASE_CODE != 0 )); then return; fi
  fi
  may_run || return
  log "job $JOB_ID attempt $ATTEMPT node $NODE_RANK of $NUM_NODES: run"
  run_phase run || return
  report run "$REPLY_PHASE_CODE"
}

# --- 6. the end: everything stopped, the node shut down ---

# Stops the running phase, if one runs: SIGTERM to its whole process group (in a container,
# docker stop gives the container's processes the same), STOP_GRACE_SECONDS for every
# process of it to end while its output still reaches the log, then SIGKILL to what is left.
stop_phase() {
  local group=$PHASE_PID deadline
  if [ -z "$group" ]; then return; fi
  log "stopping the job: SIGTERM, and SIGKILL after $STOP_GRACE_SECONDS s"
  clock_ms
  deadline=$(( REPLY_NOW_MS + STOP_GRACE_SECONDS * 1000 ))
  if [ -n "$CONTAINER" ]; then
    docker stop --time "$STOP_GRACE_SECONDS" "$CONTAINER" >/dev/null 2>&1 &
  else
    kill -TERM -- "-$group" 2>/dev/null
  fi
  while group_alive "$group"; do
    clock_ms
    if (( REPLY_NOW_MS >= deadline )); then
      log "the job did not end in $STOP_GRACE_SECONDS s: SIGKILL"
      break
    fi
    pause_ms 100
  done
  kill -KILL -- "-$group" 2>/dev/null
  PHASE_PID=''
}

# Removes the task's container, whatever state it is in (none: nothing to do).
container_remove() {
  if [ -n "$CONTAINER" ] && command -v docker >/dev/null 2>&1; then docker rm -f "$CONTAINER" >/dev/null 2>&1; fi
}

# Unmounts what mount_bucket mounted, at the end (the local runtime's nodes share a
# machine; on EC2 the instance goes anyway).
unmount_buckets() {
  local path
  if [ ! -f "$ROOT_DIR/mounts.paths" ]; then return 0; fi
  while IFS= read -r path; do
    if mountpoint -q "$path" 2>/dev/null; then umount "$path" 2>/dev/null || fusermount -u "$path" 2>/dev/null; fi
  done <"$ROOT_DIR/mounts.paths"
}

# The agent died without its EXIT trap (SIGKILL, the OOM killer): the heartbeat ends the
# node as that trap would have, but for a report, so the instance cannot run on unheard.
# The controller sees it go before a final report: a lost attempt, recovered.
end_orphaned_node() {
  local group started
  log "the agent is gone: stopping the job and shutting down"
  # Only the phase's own group: an id whose leader is gone cannot be taken while a process
  # of the group lives, and a leader that started at another time is a new process's.
  if read -r group started 2>/dev/null <"$ROOT_DIR/phase.group" && [[ $group =~ ^[0-9]+$ ]] &&
    { ! process_start "$group" || [ -z "$started" ] || [ "$REPLY_STARTED" = "$started" ]; }; then
    kill -KILL -- "-$group" 2>/dev/null
  fi
  container_remove
  unmount_buckets
  shut_down
}

shut_down() {
  eval "$SHUTDOWN_COMMAND"
}

# The one way out, whatever ended the agent (its work done, a signal, a command that failed
# under set -u): the job, the container, the mounts and the helpers are stopped, then the
# node shuts down. Signals that arrive meanwhile (the node's own shutdown signals every
# process) are ignored: the job's grace period runs to its end.
end_node() {
  local code=$1 stopped=$PHASE_NAME
  trap '' TERM INT HUP USR1 USR2
  trap - EXIT
  stop_phase
  if [ -n "$stopped" ]; then await_writer; fi
  # The job's last lines go to CloudWatch Logs while the stopped report goes to the API.
  finish_shippers
  if [ -n "$stopped" ] && [ -n "$STOP_CAUSE" ]; then report_stopped "$stopped"; fi
  container_remove
  unmount_buckets
  if (( LIBRARY_LOADED )); then remove_phase_cgroups; fi
  stop_helper "$DATA_PID"
  stop_helper "$WATCH_PID"
  finish_shippers end
  stop_helper "$HEARTBEAT_PID"
  log "shutting down (exit code $code)"
  shut_down
  exit "$code"
}

# --- main ---
main() {
  AGENT_PID=$$
  trap 'end_node "$?"' EXIT
  # SIGTERM, SIGINT or SIGHUP: the node shuts down (a cancel, a release) or the agent is told
  # to stop. SIGUSR1: the interruption watcher saw a spot interruption notice, and the
  # instance goes in two minutes. Either way the job is stopped now and its code is not
  # reported (it would be relaunch's doing), only its last lines (report_stopped). After a
  # notice the controller ends the attempt as preempted when the instance goes.
  trap 'STOP_CAUSE=shutdown; log "got SIGTERM: stopping"; exit 0' TERM
  trap 'STOP_CAUSE=shutdown; log "got SIGINT: stopping"; exit 0' INT
  trap 'STOP_CAUSE=shutdown; log "got SIGHUP: stopping"; exit 0' HUP
  trap 'STOP_CAUSE=interruption; log "spot interruption notice in instance metadata: stopping"; exit 0' USR1
  # SIGUSR2: the watcher saw the held-after tag name this attempt (held_look): it has ended
  # and this node is kept for the next. A running phase is stopped as above and reported
  # stopped, cause held (run_phase); the agent then goes on to the next attempt.
  trap '[ -z "$PHASE_PID" ] || { STOP_CAUSE=held; log "attempt $ATTEMPT has ended: this node is kept for the next"; stop_phase; }' USR2
  init_node || exit 1
  if ! resolve_node_rank; then
    log "no node rank from instance metadata after $DISCOVERY_TIMEOUT_SECONDS s; giving up"
    exit 1
  fi
  if ! fetch_secret; then
    log "no callback secret from SSM after $DISCOVERY_TIMEOUT_SECONDS s ($REPLY_SSM_ERROR); giving up"
    exit 1
  fi
  if [ -n "$CONTAINER_IMAGE" ]; then CONTAINER="$CONTAINER_PREFIX$INSTANCE_ID"; fi
  start_heartbeat
  # The next attempt's part of the agent is in its library, which a node fetches while its
  # attempt is live (an ended attempt's routes take its secret no more, but for next).
  if [ -n "$REUSE_NODE" ] && ! load_library; then
    log "$REPLY_LIBRARY_ERROR: this node shuts down once its job has ended"
    REUSE_NODE=''
    HELD_TAG=''
  fi
  start_interruption_watch
  if ! resolve_node_ips; then
    log "no node IPs from instance metadata after $DISCOVERY_TIMEOUT_SECONDS s; giving up"
    exit 1
  fi
  write_node_env

  log "job $JOB_ID attempt $ATTEMPT node $NODE_RANK of $NUM_NODES: setup"
  start_shipper setup
  if ! prepare_node >>"$ROOT_DIR/setup.log" 2>&1 </dev/null; then
    log "the agent failed at ${FAILED_STEP:-$CURRENT_STEP} before setup: ${FAILED_ERROR:-see setup.log}"
    report_agent_failure
    end_node 0
  fi
  # Until the job is over on this node; one the task may reuse then asks what next.
  while run_job "$REPLY_NEXT_SETUP"; [ -n "$REUSE_NODE" ] && next_attempt; do :; done
  end_node 0
}

main "$@"
