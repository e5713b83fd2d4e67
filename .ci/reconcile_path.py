#!/usr/bin/env python3
"""Counts the files and context types one Cinder pass crosses, from the watch event to the
status write, and keeps docs/architecture.md's account of it true.

The path is declared below as hops: a hop is an item (a function or a message handler) in a file
of operator/src, and each hop names the calls its body makes to the next hops. The script finds
every item, checks that its body really makes each call (so a renamed function or a message sent
elsewhere fails the check instead of leaving the docs wrong), walks the hops from the start and
counts:

- files: the distinct files whose code the pass runs through (the items walked);
- types: the operator's own types (struct, enum, trait, alias) the bodies walked name;
- context types: the operator's structs that carry what the pass needs (names ending in Context,
  Env, Options, Reconciler, Memory or Scope) named in the bodies walked, plus those reachable
  through their fields; one a walked file keeps in a task-local is marked so.

    python3 .ci/reconcile_path.py           # print the account
    python3 .ci/reconcile_path.py --write   # rewrite the block in docs/architecture.md
    python3 .ci/reconcile_path.py --check   # fail when a hop is missing or the block is stale
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "operator" / "src"
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- reconcile-path:begin (python3 .ci/reconcile_path.py --write) -->"
END = "<!-- reconcile-path:end -->"

# One step stands for all of them: every step body is called the same way (the step table gives
# each `StepName` its function), so the path crosses one file of `steps/`.
STEP = ("steps/secrets.rs", r"pub(?:\(crate\))? async fn run\(")

# hop id -> (file, anchor regex of the item, what it does, [(call regex, next hop id)])
HOPS = {
    "run_operator": ("controller/mod.rs", r"pub(?:\(crate\))? async fn run_operator\(",
                     "starts the Cinder controller on the shared watches",
                     [(r"cinder_controller\(", "cinder_controller"),
                      (r"cinder::reconcile\b", "reconcile")]),
    "cinder_controller": ("controller/mod.rs", r"fn cinder_controller\(",
                          "a watch event (the Cinder, a child, a referenced object) enqueues the Cinder",
                          [(r"Controller::for_shared_stream", None)]),
    "reconcile": ("controller/cinder.rs", r"pub(?:\(crate\))? async fn reconcile\(",
                  "asks the registry for a turn, then runs the pass",
                  [(r"Admit\s*\{", "admit"),
                   (r"reconcile_in_span\(", "reconcile_in_span"),
                   (r"PassSucceeded\(", "pass_succeeded")]),
    "admit": ("pipeline/actors.rs", r"impl<C: EngineContext> Handler<Admit> for Pipelines<C>",
              "the one scheduling decision: back-off, minimum gap, admission",
              [(r"self\.backoffs\.holding\(", "backoff_holding"),
               (r"self\.admission\.ask\(", "admission_ask")]),
    "backoff_holding": ("pipeline/schedule.rs", r"pub(?:\(crate\))? fn holding\(",
                        "whether a failed Cinder's retry is due", []),
    "admission_ask": ("pipeline/schedule.rs", r"pub(?:\(crate\))? fn ask\(",
                      "first come first served slots", []),
    "pass_succeeded": ("pipeline/actors.rs", r"impl<C: EngineContext> Handler<PassSucceeded> for Pipelines<C>",
                       "clears the back-off count", []),
    "reconcile_in_span": ("controller/cinder.rs", r"async fn reconcile_in_span\(",
                          "finalizer and target gate, the pass, the status write",
                          [(r"\bReconcile\(", "registry_reconcile"),
                           (r"write_if_changed\(", "write_if_changed")]),
    "registry_reconcile": ("pipeline/actors.rs", r"impl<C: EngineContext> Handler<Reconcile<C>> for Pipelines<C>",
                           "forwards the pass to the Cinder's pipeline actor",
                           [(r"RunPass\(", "run_pass_handler")]),
    "run_pass_handler": ("pipeline/actors.rs", r"impl<C: EngineContext> Handler<RunPass<C>> for PipelineActor<C>",
                         "queues the pass", [(r"self\.start_next\(", "start_next")]),
    "start_next": ("pipeline/actors.rs", r"fn start_next\(",
                   "runs the next queued pass and records it", [(r"run_pass\(", "run_pass")]),
    "run_pass": ("pipeline/pass.rs", r"pub(?:\(crate\))? async fn run_pass<C: EngineContext>\(",
                 "the lane step by step, then the group", [(r"run_step\(", "run_step")]),
    "run_step": ("pipeline/pass.rs", r"async fn run_step<C: EngineContext>\(",
                 "asks the step's actor to run it", [(r"RunStep\(", "run_step_handler")]),
    "run_step_handler": ("pipeline/step.rs", r"impl<C: EngineContext> Handler<RunStep<C>> for StepActor<C>",
                         "gives the run the step actor's memory",
                         [(r"self\.step\.run\(", "step_fn_run")]),
    "step_fn_run": ("pipeline/step.rs", r"impl<B, C> Step<C> for StepFn<B>",
                    "calls the step's function with both contexts",
                    [(r"body\(op, &mut ctx\)", "step_body")]),
    "step_body": (STEP[0], STEP[1], "the step: reads from the stores, writes its children", []),
    "write_if_changed": ("controller/status.rs", r"pub(?:\(crate\))? async fn write_if_changed\(",
                         "the one status write (merge patch guarded by resourceVersion)", []),
}
START = "run_operator"
CONTEXT_NAME = re.compile(r"(Context|Env|Options|Reconciler|Memory|Scope)$")


def strip_code(text):
    """The text with comments, strings and char literals blanked (same length), so braces and
    names are only the code's."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 8]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            close = '"' + hashes
            j = text.find(close, i + len(hashes) + 2)
            j = n if j < 0 else j + len(close)
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                blank(i, i + m.end())
                i += m.end()
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return "".join(out)


def item_body(code, anchor, where):
    """The text of the item starting at `anchor`: its signature and its braced body."""
    m = re.search(anchor, code)
    if not m:
        raise SystemExit(f"reconcile_path: {where}: no item matches /{anchor}/")
    start = code.find("{", m.end())
    depth, i = 0, start
    while i < len(code):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return code[m.start():i + 1]
        i += 1
    raise SystemExit(f"reconcile_path: {where}: unbalanced braces after /{anchor}/")


def declared_types():
    """Every type name operator/src declares (struct, enum, trait, type alias)."""
    names = set()
    for path in SRC.rglob("*.rs"):
        code = strip_code(path.read_text())
        names |= set(re.findall(r"\b(?:struct|enum|trait|type)\s+([A-Z]\w*)", code))
    return names


def structs():
    """Every struct of operator/src: name -> (file, its declaration text)."""
    found = {}
    for path in sorted(SRC.rglob("*.rs")):
        code = strip_code(path.read_text())
        for m in re.finditer(r"\bstruct\s+([A-Z]\w*)", code):
            name = m.group(1)
            end = code.find(";", m.end())
            brace = code.find("{", m.end())
            decl = code[m.start():end] if brace < 0 or (0 <= end < brace) else item_body(code[m.start():], r"struct", path)
            found.setdefault(name, (path.relative_to(SRC).as_posix(), decl))
    return found


def walk():
    """The hops in the order a pass reaches them (depth first), their bodies and file texts."""
    codes, bodies, order = {}, {}, []

    def visit(hop):
        if hop in bodies:
            return
        file, anchor, _, calls = HOPS[hop]
        if file not in codes:
            path = SRC / file
            if not path.exists():
                raise SystemExit(f"reconcile_path: {hop}: operator/src/{file} does not exist")
            codes[file] = strip_code(path.read_text())
        body = item_body(codes[file], anchor, f"operator/src/{file}")
        bodies[hop] = body
        order.append(hop)
        for call, nxt in calls:
            if not re.search(call, body):
                raise SystemExit(f"reconcile_path: {hop} (operator/src/{file}) does not call /{call}/")
            if nxt:
                visit(nxt)

    visit(START)
    return order, bodies, codes


def account():
    order, bodies, codes = walk()
    files = []
    for hop in order:
        f = HOPS[hop][0]
        if f not in files:
            files.append(f)
    all_structs = structs()
    contexts = {n for n in all_structs if CONTEXT_NAME.search(n)}
    named = set()
    for body in bodies.values():
        named |= {n for n in contexts if re.search(rf"\b{n}\b", body)}
    todo = list(named)
    while todo:  # the contexts a named one carries in its fields
        decl = all_structs[todo.pop()][1]
        for n in contexts - named:
            if re.search(rf"\b{n}\b", decl):
                named.add(n)
                todo.append(n)
    types = {n for n in declared_types() for b in bodies.values() if re.search(rf"\b{n}\b", b)}
    # A task-local holds one of the named types: it is that context, read without being passed.
    task_local = {f for f in files if "task_local!" in codes[f]}
    lines = [
        f"One pass crosses **{len(files)} files** and **{len(named)} context types**; its items name "
        f"{len(types)} of the operator's types (`python3 .ci/reconcile_path.py`, run by `.ci/run`, which fails when a hop below is "
        f"renamed or no longer calls the next).",
        "",
        "| file | item | what it does |",
        "|---|---|---|",
    ]
    for hop in order:
        file, anchor, what, _ = HOPS[hop]
        shown = "steps/&lt;step&gt;.rs" if file == STEP[0] else file
        name = re.sub(r"pub(\(\?:\\\(crate\\\)\)\? )?|async |\\", "", anchor).rstrip("(<")
        lines.append(f"| `{shown}` | `{name}` | {what} |")
    shown = []
    for n in sorted(named):
        file = all_structs[n][0]
        local = ", set task-local" if file in task_local else ""
        shown.append(f"`{n}` ({file}{local})")
    lines += ["", "Context types: " + ", ".join(shown) + "."]
    return "\n".join(lines) + "\n"


def main():
    text = account()
    if len(sys.argv) == 1:
        print(text, end="")
        return
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"reconcile_path: {DOC} has no block between {BEGIN} and {END}")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{text}{END}{tail}"
    if sys.argv[1] == "--write":
        DOC.write_text(new)
    elif sys.argv[1] == "--check":
        if new != doc:
            raise SystemExit("reconcile_path: docs/architecture.md's reconcile path is stale; "
                             "run python3 .ci/reconcile_path.py --write")
        print("reconcile path: " + text.splitlines()[0])
    else:
        raise SystemExit(f"reconcile_path: unknown argument {sys.argv[1]}")


if __name__ == "__main__":
    main()
