#!/usr/bin/env python3
"""Play the model: an OpenAI-compatible chat-completions server whose answers an agent (or a person) writes.

KernelEvolve's `--mutator llm|mix` asks a model for each new kernel. This server stands in for the model:
each request is written to a folder as a markdown prompt, and the server answers with whatever text is then
put beside it. So an agent with shell access can be the model and be compared, call for call, with a real
one (bench/agent_model.sh runs a whole run this way and prints a summary).

  python3 bench/agent_model.py serve  --dir D [--port P] [--wait SEC]
      Listens on 127.0.0.1:P (0 = a free port, written to D/port once listening) for
      POST /v1/chat/completions (or /chat/completions). Request N is written as D/NNN.prompt.md (the system
      message, then the user message(s), under headings saying which); the server then waits (polling
      every 0.5 s, at most --wait seconds, default 3600) for D/NNN.answer.md and returns its whole text as
      the assistant's message, with a usage block estimated at 4 bytes a token. One line per request on stderr,
      and one in D/calls.tsv. No answer in time (or D/done appearing) gives HTTP 408, which the run records
      as a failed call without retrying.
  python3 bench/agent_model.py next   --dir D [--wait SEC]
      Blocks until a prompt has no answer (prints its path, exit 0) or D/done exists (prints "done", exit 3);
      exit 4 if --wait runs out first.
  python3 bench/agent_model.py answer --dir D [--file F] [--number N]
      Puts F's text (or stdin's) in place, atomically, as the answer to the oldest unanswered prompt
      (or prompt N), and prints the number it answered.
  python3 bench/agent_model.py summary --export E.json [--run-json R.json] [--calls D/calls.tsv] [--out S.tsv]
      (used by agent_model.sh) the per-call table of a run exported with `kernelevolve export --format json`;
      D/calls.tsv lets calls that made no node count.

How an agent plays the model, one call at a time:

  while P=$(python3 bench/agent_model.py next --dir OUT/model); do
      # read $P: the device, the spec, the parent kernel with its times, failures, the best so far ...
      # write a reply as a model would: a whole kernel in a ```c fenced block, or SEARCH/REPLACE edits
      python3 bench/agent_model.py answer --dir OUT/model --file reply.md
  done          # `next` exits 3 ("done") once the run is over

Python 3 standard library only.
"""
import argparse
import http.server
import json
import os
import re
import socketserver
import sys
import threading
import time

POLL_S = 0.5
PROMPT_RE = re.compile(r"^(\d{3,})\.prompt\.md$")


def log(msg):
    sys.stderr.write("[agent_model %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def write_atomic(path, text):
    """Writes text to path through a temporary in the same folder and a rename, so a reader never sees half."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder or ".", ".%s.tmp.%d.%d" % (name, os.getpid(), threading.get_ident()))
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def prompt_numbers(folder):
    out = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return out
    for name in names:
        m = PROMPT_RE.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def num_str(n):
    return "%03d" % n


def prompt_path(folder, n):
    return os.path.join(folder, num_str(n) + ".prompt.md")


def answer_path(folder, n):
    return os.path.join(folder, num_str(n) + ".answer.md")


def unanswered(folder):
    return [n for n in prompt_numbers(folder) if not os.path.exists(answer_path(folder, n))]


def content_text(content):
    """A message's content: a string, or OpenAI's list of parts ({"type": "text", "text": ...})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, str):
                parts.append(p)
        return "\n".join(parts)
    return "" if content is None else json.dumps(content)


def render_prompt(n, request):
    model = request.get("model", "")
    # Level-1 headings here; the messages' own sections are level 2 and below.
    lines = ["# Model call %s (model: %s)" % (num_str(n), model), ""]
    lines.append("Answer as the model would: write your reply (a whole kernel in a fenced code block, or "
                 "SEARCH/REPLACE edits on the parent) to %s.answer.md." % num_str(n))
    lines.append("")
    system = request.get("system")  # Anthropic's shape, tolerated
    if system is not None:
        lines += ["# System message", "", content_text(system), ""]
    counts = {}
    for msg in request.get("messages") or []:
        role = str(msg.get("role", "user"))
        counts[role] = counts.get(role, 0) + 1
        heading = {"system": "System message", "user": "User message", "assistant": "Assistant message"}.get(
            role, role.capitalize() + " message")
        total = sum(1 for m in request.get("messages") or [] if str(m.get("role", "user")) == role)
        if total > 1:
            heading += " %d" % counts[role]
        lines += ["# " + heading, "", content_text(msg.get("content")), ""]
    return "\n".join(lines)


CALLS_HEADER = "call\tstart_epoch\tend_epoch\toutcome\tprompt_tokens\tcompletion_tokens\n"


def record_call(state, n, start, end, outcome, p_tok, c_tok):
    """One line per request in D/calls.tsv: when it came and went, so a summary can count model calls."""
    path = os.path.join(state["dir"], "calls.tsv")
    with state["lock"]:
        new = not os.path.exists(path)
        with open(path, "a", encoding="utf-8") as f:
            if new:
                f.write(CALLS_HEADER)
            f.write("%d\t%.3f\t%.3f\t%s\t%d\t%d\n" % (n, start, end, outcome, p_tok, c_tok))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_handler(state):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # answers curl's "Expect: 100-continue" at once

        def log_message(self, fmt, *args):  # the one line per request is ours
            pass

        def reply(self, status, obj):
            body = json.dumps(obj).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def do_GET(self):
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self.reply(200, {"object": "list", "data": [{"id": "agent", "object": "model", "owned_by": "agent"}]})
            else:
                self.reply(404, {"error": {"message": "not found: " + self.path}})

        def do_POST(self):
            path = self.path.split("?", 1)[0].rstrip("/")
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            if path not in ("/v1/chat/completions", "/chat/completions"):
                self.reply(404, {"error": {"message": "not found: " + self.path}})
                return
            try:
                request = json.loads(raw.decode("utf-8"))
                if not isinstance(request, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                self.reply(400, {"error": {"message": "the request is not JSON: %s" % e}})
                return
            folder = state["dir"]
            with state["lock"]:
                state["next"] = max([state["next"]] + [k + 1 for k in prompt_numbers(folder)])
                n = state["next"]
                state["next"] += 1
                prompt = render_prompt(n, request)
                write_atomic(prompt_path(folder, n), prompt)
            start = time.time()
            ans = answer_path(folder, n)
            done = os.path.join(folder, "done")
            answer = None
            while True:
                if os.path.exists(ans):
                    with open(ans, encoding="utf-8", errors="replace") as f:
                        answer = f.read()
                    break
                if os.path.exists(done) or state["stop"].is_set():
                    break
                if time.time() - start >= state["wait"]:
                    break
                time.sleep(POLL_S)
            end = time.time()
            waited = end - start
            model = request.get("model", "agent")
            if answer is None:
                why = "the agent ended (%s exists)" % done if os.path.exists(done) else \
                      "no answer within %.0f s" % state["wait"]
                log("%s %s: prompt %d B, %s" % (num_str(n), model, len(prompt.encode()), why))
                record_call(state, n, start, end, "unanswered", 0, 0)
                # 408: the client records a failed call and goes on; it retries 429 and 5xx only.
                self.reply(408, {"error": {"message": "%s: %s" % (os.path.basename(ans), why), "type": "timeout"}})
                return
            p_tok = max(1, len(raw) // 4)
            c_tok = max(1, len(answer.encode("utf-8")) // 4)
            log("%s %s: prompt %d B, answer %d B after %.1f s" %
                (num_str(n), model, len(prompt.encode()), len(answer.encode()), waited))
            record_call(state, n, start, end, "answered", p_tok, c_tok)
            self.reply(200, {
                "id": "agent-%s" % num_str(n),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok},
            })

    return Handler


def cmd_serve(args):
    os.makedirs(args.dir, exist_ok=True)
    existing = prompt_numbers(args.dir)
    state = {"dir": args.dir, "wait": args.wait, "lock": threading.Lock(), "stop": threading.Event(),
             "next": (existing[-1] + 1) if existing else 1}
    server = Server(("127.0.0.1", args.port), make_handler(state))
    port = server.server_address[1]
    write_atomic(os.path.join(args.dir, "port"), "%d\n" % port)
    log("listening on http://127.0.0.1:%d/v1, prompts in %s" % (port, args.dir))
    try:
        server.serve_forever(poll_interval=POLL_S)
    except KeyboardInterrupt:
        pass
    finally:
        state["stop"].set()
        server.server_close()
    return 0


def cmd_next(args):
    deadline = None if args.wait is None else time.time() + args.wait
    done = os.path.join(args.dir, "done")
    while True:
        if os.path.exists(done):
            print("done")
            return 3
        pending = unanswered(args.dir)
        if pending:
            print(prompt_path(args.dir, pending[0]))
            return 0
        if deadline is not None and time.time() >= deadline:
            print("timeout", file=sys.stderr)
            return 4
        time.sleep(POLL_S)


def cmd_answer(args):
    text = open(args.file, encoding="utf-8").read() if args.file and args.file != "-" else sys.stdin.read()
    if args.number is not None:
        n = args.number
        if not os.path.exists(prompt_path(args.dir, n)):
            print("no prompt %s in %s" % (num_str(n), args.dir), file=sys.stderr)
            return 2
        if os.path.exists(answer_path(args.dir, n)):
            print("prompt %s is already answered" % num_str(n), file=sys.stderr)
            return 2
    else:
        pending = unanswered(args.dir)
        if not pending:
            print("no unanswered prompt in %s" % args.dir, file=sys.stderr)
            return 2
        n = pending[0]
    write_atomic(answer_path(args.dir, n), text)
    print(num_str(n))
    return 0


def fmt_speedup(x):
    return "-" if x is None else "%.3f" % x


def read_calls(path):
    """D/calls.tsv as the server wrote it: [{n, start, end, outcome, tokens}] by call number."""
    calls = []
    if not path or not os.path.exists(path):
        return calls
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 6 or not parts[0].isdigit():
                continue
            calls.append({"n": int(parts[0]), "start": float(parts[1]), "end": float(parts[2]),
                          "outcome": parts[3], "tokens": int(parts[4]) + int(parts[5])})
    return sorted(calls, key=lambda c: c["n"])


def iso_epoch(text):
    from datetime import datetime, timezone
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()
        except (TypeError, ValueError):
            pass
    return None


def cmd_summary(args):
    """The table agent_model.sh prints: each model-written node with its model-call index, status and speedup.

    A node's model-call index is the number of the request that wrote it (matched through the tokens the
    server reported, which the node records), so calls that gave no node (an answer without code, or one
    that changed nothing) still count; a parameter step counts the calls answered before it was created.
    Without calls.tsv, the model-written nodes are counted instead.
    """
    with open(args.export, encoding="utf-8") as f:
        doc = json.load(f)
    run = doc.get("run") or {}
    run_json = {}
    if args.run_json and os.path.exists(args.run_json):
        try:
            with open(args.run_json, encoding="utf-8") as f:
                run_json = json.load(f)
        except ValueError:
            run_json = {}
    calls = read_calls(args.calls)
    origin = iso_epoch(run.get("started_at"))
    nodes = sorted(doc.get("nodes") or [], key=lambda n: (n.get("created_s") or 0, n.get("id", 0)))
    rows, seen, last_call = [], set(), 0
    for node in nodes:
        mutator = str(node.get("mutator") or "")
        by_model = mutator.startswith("llm") or (bool(node.get("model")) and mutator not in ("param", "seed"))
        created = None if origin is None or node.get("created_s") is None else origin + float(node["created_s"])
        if by_model:
            # The call that wrote it: the latest unclaimed one answered before the node was created whose
            # tokens are the node's; else the first later one with its tokens; else the latest answered.
            fresh = [c for c in calls if c["n"] > last_call and c["n"] not in seen]
            before = [c for c in fresh if created is not None and c["end"] <= created + 0.5]
            same = lambda c: c["tokens"] == node.get("tokens")
            match = next((c["n"] for c in reversed(before) if same(c)), None)
            if match is None:
                match = next((c["n"] for c in fresh if same(c)), None)
            if match is None and before:
                match = before[-1]["n"]
            call = match if match is not None else last_call + 1
            seen.add(call)
            last_call = max(last_call, call)
        else:
            answered = sum(1 for c in calls if created is not None and c["end"] <= created)
            call = max(last_call, answered)
        speedup = node.get("speedup")
        ok = node.get("status") == "ok" and isinstance(speedup, (int, float))
        rows.append({"id": node.get("id"), "mutator": mutator, "by_model": by_model, "call": call,
                     "status": node.get("status"), "speedup": speedup if ok else None})
    best = max([r["speedup"] for r in rows if r["speedup"] is not None], default=None)
    to90 = None
    if best is not None:
        for r in rows:
            if r["speedup"] is not None and r["speedup"] >= 0.9 * best:
                to90 = r
                break
    lines = ["call\tnode\tstatus\tspeedup"]
    listed = []
    for r in rows:
        if r["by_model"]:
            listed.append((r["call"], "%d\t%s\t%s\t%s" % (r["call"], r["id"], r["status"], fmt_speedup(r["speedup"]))))
    for c in calls:  # calls that wrote no node: a recorded failure of the mutator, or no answer
        if c["n"] not in seen:
            listed.append((c["n"], "%d\t-\t%s\t-" % (c["n"], "no node" if c["outcome"] == "answered" else c["outcome"])))
    lines += [text for _, text in sorted(listed, key=lambda t: t[0])]
    total_calls = len(calls) if calls else sum(1 for r in rows if r["by_model"])
    lines.append("# model calls\t%d" % total_calls)
    if "mutator_failures" in run_json or "mutator_failures" in run:
        lines.append("# mutator failures\t%s" % run_json.get("mutator_failures", run.get("mutator_failures")))
    lines.append("# best speedup\t%s\t(the search's, over all nodes)" % fmt_speedup(best))
    rbest = run_json.get("best") or {}
    if isinstance(rbest.get("speedup"), (int, float)):
        lines.append("# best confirmed\t%s\t(node %s, %s)" % (fmt_speedup(rbest["speedup"]), rbest.get("node"),
                     "confirmed" if rbest.get("confirmed") else "not confirmed"))
    if to90 is not None:
        lines.append("# iterations to 90%% of best\t%d\t(node %s, %s, %sx)" %
                     (to90["call"], to90["id"], to90["mutator"], fmt_speedup(to90["speedup"])))
    else:
        lines.append("# iterations to 90% of best\t-")
    text = "\n".join(lines) + "\n"
    if args.out:
        write_atomic(args.out, text)
    sys.stdout.write(text)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="the model server")
    s.add_argument("--dir", required=True)
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--wait", type=float, default=3600.0, help="seconds to wait for an answer (default 3600)")
    s.set_defaults(func=cmd_serve)
    n = sub.add_parser("next", help="wait for a prompt without an answer")
    n.add_argument("--dir", required=True)
    n.add_argument("--wait", type=float, default=None, help="give up after SEC seconds (exit 4)")
    n.set_defaults(func=cmd_next)
    a = sub.add_parser("answer", help="answer the oldest unanswered prompt")
    a.add_argument("--dir", required=True)
    a.add_argument("--file", default=None, help="the answer's text (default: stdin)")
    a.add_argument("--number", type=int, default=None, help="answer prompt N rather than the oldest")
    a.set_defaults(func=cmd_answer)
    m = sub.add_parser("summary", help="per-node summary of an exported run (agent_model.sh uses it)")
    m.add_argument("--export", required=True)
    m.add_argument("--run-json", default=None, help="the run's --json output (for its confirmed best)")
    m.add_argument("--calls", default=None, help="the server's calls.tsv (without it, model-written nodes are counted)")
    m.add_argument("--out", default=None)
    m.set_defaults(func=cmd_summary)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
