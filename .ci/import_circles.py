#!/usr/bin/env python3
"""Import circles of the crates given as src/ directories: `python3 .ci/import_circles.py */src`.

The graph has a node per module file; an edge per `mod` declaration of a directory module, and
per `use`/inline path through `crate::`, `super::` or `self::` (a name a module re-exports with
`pub use` counts as an edge to the module defining it). A circle is a set of modules that reach
each other. Test modules (`#[cfg(test)]` onward) are left out. Prints each circle with its edges
and the count; exits 1 when there is a circle (the dependency rule of docs/architecture.md).
"""
import os, re, sys
from collections import defaultdict

def modules(src):
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"): continue
            p = os.path.join(root, f)
            rel = os.path.relpath(p, src)[:-3]
            parts = rel.split(os.sep)
            if parts[-1] in ("mod", "lib", "main"): parts = parts[:-1]
            mods[tuple(parts)] = p
    return mods

def resolve(path, mods):
    # longest prefix that is a module
    for i in range(len(path), -1, -1):
        if tuple(path[:i]) in mods: break
    else:
        return None
    m = tuple(path[:i])
    rest = path[i:]
    # an item re-exported by that module resolves to the module that defines it
    if rest and rest[0] not in ("*", "self"):
        text = open(mods[m]).read()
        for u in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
            for f in flatten(u.group(1).replace("\n", " ")):
                ps = [x.strip() for x in f.split("::")]
                if ps[-1] == rest[0]:
                    base = list(m)
                    if ps[0] == "crate": base, ps = [], ps[1:]
                    elif ps[0] == "self": ps = ps[1:]
                    elif ps[0] == "super": base, ps = list(m[:-1]), ps[1:]
                    sub = resolve(base + ps[:-1] + [], mods) if ps[:-1] else None
                    if sub and sub != m: return sub
    return m

def expand_use(text):
    # flatten `use a::{b, c::{d}}` roughly: yield token paths
    out = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        out += flatten(m.group(1).replace("\n", " "))
    # also inline paths crate::x::y
    rest = re.sub(r"\buse\s+[^;]+;", "", text)
    for m in re.finditer(r"\b((?:crate|super)(?:::\w+)+)", rest):
        out.append(m.group(1))
    return out

def flatten(s):
    s = s.strip()
    i = s.find("{")
    if i < 0:
        return [s.split(" as ")[0].strip()]
    prefix = s[:i]
    inner = s[i+1:s.rfind("}")]
    depth = 0; cur = ""; items = []
    for ch in inner:
        if ch == "{": depth += 1
        if ch == "}": depth -= 1
        if ch == "," and depth == 0: items.append(cur); cur = ""
        else: cur += ch
    items.append(cur)
    res = []
    for it in items:
        if it.strip():
            res += [prefix + x for x in flatten(it)]
    return res

def strip_tests(text):
    i = text.find("#[cfg(test)]")
    return text if i < 0 else text[:i]

def graph(src):
    mods = modules(src)
    g = defaultdict(set)
    for m, p in mods.items():
        text = strip_tests(open(p).read())
        text = re.sub(r"//[^\n]*", "", text)
        is_dir_mod = os.path.basename(p) in ("mod.rs", "lib.rs", "main.rs")
        if is_dir_mod:
            for md in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text, re.M):
                t = tuple(list(m) + [md.group(1)])
                if t in mods: g[m].add(t)
        for u in expand_use(text):
            parts = [x.strip() for x in u.split("::") if x.strip()]
            if not parts: continue
            if parts[0] == "crate": base = []; parts = parts[1:]
            elif parts[0] in ("super", "self"):
                base = list(m)
                while parts and parts[0] in ("super", "self"):
                    if parts[0] == "super": base = base[:-1]
                    parts = parts[1:]
            elif is_dir_mod and tuple(list(m) + [parts[0]]) in mods: base = list(m)
            else: continue
            t = resolve(base + parts, mods)
            if t is None or t == m: continue
            # an edge to an ancestor module (re-export hub) counts as that module
            g[m].add(t)
    return mods, g

def sccs(nodes, g):
    idx = {}; low = {}; st = []; on = set(); out = []; c = [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in g.get(v, ()):
            if w not in idx: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(comp)
    for v in nodes:
        if v not in idx: visit(v)
    return out

total = 0
for src in sys.argv[1:]:
    mods, g = graph(src)
    for comp in sccs(list(mods), g):
        total += 1
        names = sorted("::".join(x) or "crate" for x in comp)
        print(f"{src}: circle of {len(comp)}: {', '.join(names)}")
        for a in comp:
            for b in g.get(a, ()):
                if b in comp: print(f"    {'::'.join(a)} -> {'::'.join(b)}")
print(f"{total} import circle(s)")
sys.exit(1 if total else 0)
