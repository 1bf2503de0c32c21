#!/usr/bin/env python3
"""Import cycles between the modules of one crate.

Rust lets module `a` use `b` while `b` uses `a`; the compiler never minds, but a
reader does: neither file can be understood first. This script finds such
cycles so they do not creep back in. For every crate (a directory with a
Cargo.toml and a src/) it reads src/**/*.rs, finds the paths that name another
module of the same crate (`use crate::…`, `use super::…`, `crate::x::f()`,
`super::x::Y` anywhere in the code), and builds one graph per level: the
top-level modules of the crate, and the children of every directory module.
A reference from `a::b` to `c::d` is an edge a→c between top-level modules; a
reference from `a::b` to `a::c` is an edge b→c among the children of `a`.
Names that a module re-exports (`pub use child::Name;`) resolve to the child
that defines them, so a cycle through a re-export is still a cycle.

Inline `#[cfg(test)]` modules are skipped: test code may look anywhere.

Usage: scripts/module-cycles.py [crate-or-workspace-dir ...]   (default: .)
Prints every cycle (a strongly connected component of more than one module)
with the references that make it, and exits 1 if there is any.
"""

import os
import re
import sys

SKIP_DIRS = {"target", ".git", "fuzz", "node_modules"}


def strip_code(text):
    """The source with comments, strings and char literals blanked out
    (newlines kept, so line numbers still hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 260]) if c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) else None
        if m:
            end = text.find('"' + m.group(1), i + m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + re.sub(r"[^\n]", "", text[i:end]))
            i = end
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + re.sub(r"[^\n]", "", text[i:j + 1]))
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def drop_test_modules(code):
    """Blank out `#[cfg(test)] mod x { … }` blocks."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
        if not m:
            return code
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[:m.start()] + re.sub(r"[^\n]", " ", code[m.start():j]) + code[j:]


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (no spaces)."""
    tree = re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", tree.strip())
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\s+as\s+\w+$", "", tree)] if tree else []
    prefix, inner = tree[:brace], tree[brace + 1:tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    parts.append(inner[start:])
    result = []
    for p in parts:
        for q in expand_use_tree(p):
            result.append(prefix + q if q != "self" else prefix.rstrip(":"))
    return result


class Crate:
    def __init__(self, root):
        self.root = root
        self.src = os.path.join(root, "src")
        self.files = {}  # module path tuple -> file path
        for dirpath, dirnames, filenames in os.walk(self.src):
            rel = os.path.relpath(dirpath, self.src)
            if rel.split(os.sep)[0] == "bin":
                dirnames[:] = []
                continue
            parts = () if rel == "." else tuple(rel.split(os.sep))
            for f in filenames:
                if not f.endswith(".rs"):
                    continue
                stem = f[:-3]
                if stem in ("lib", "main") and not parts:
                    mod = ()
                elif stem == "mod":
                    mod = parts
                else:
                    mod = parts + (stem,)
                self.files[mod] = os.path.join(dirpath, f)
        self.modules = set(self.files)
        self.code = {}
        for mod, path in self.files.items():
            with open(path, encoding="utf-8", errors="replace") as fh:
                self.code[mod] = drop_test_modules(strip_code(fh.read()))
        # name re-exported by a module -> the child path it comes from
        self.reexports = {}
        for mod, code in self.code.items():
            for m in re.finditer(r"\bpub(\([^)]*\))?\s+use\s+([^;]+);", code):
                for p in expand_use_tree(m.group(2)):
                    segs = [s for s in p.split("::") if s]
                    if segs and segs[-1] != "*" and len(segs) >= 2:
                        target = self.absolute(mod, segs[:-1])
                        if target is not None:
                            self.reexports[(mod, segs[-1])] = target + (segs[-1],)

    def absolute(self, mod, segs):
        """Module path (tuple) of `segs` as written in module `mod`, or None
        when it does not start inside this crate."""
        segs = list(segs)
        if not segs:
            return None
        if segs[0] == "crate":
            base = ()
            segs = segs[1:]
        elif segs[0] in ("super", "self"):
            base = tuple(mod)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
        elif tuple(mod) + (segs[0],) in self.modules:
            base = tuple(mod)  # a child module named without `self::`
        else:
            return None
        return base + tuple(segs)

    def resolve(self, path, seen=None):
        """The deepest module of this crate that `path` (absolute segments)
        names, following re-exports."""
        seen = seen or set()
        mod = ()
        for k, seg in enumerate(path):
            if mod + (seg,) in self.modules:
                mod = mod + (seg,)
                continue
            target = self.reexports.get((mod, seg))
            if target is not None and (mod, seg) not in seen:
                seen.add((mod, seg))
                return self.resolve(target + tuple(path[k + 1:]), seen)
            break
        return mod

    def references(self):
        """(from module, to module, line number) for every path that names a module."""
        refs = []
        path_re = re.compile(r"(?<![\w:])((?:crate|super|self)(?:\s*::\s*(?:\w+|\*))+)")
        use_re = re.compile(r"\buse\s+([^;]+);")
        for mod, code in self.code.items():
            spans = []
            for m in use_re.finditer(code):
                spans.append((m.start(), m.end()))
                line = code.count("\n", 0, m.start()) + 1
                for p in expand_use_tree(m.group(1)):
                    segs = [s for s in p.split("::") if s and s != "*"]
                    target = self.absolute(mod, segs)
                    if target is not None:
                        refs.append((mod, self.resolve(target), line))
            for m in path_re.finditer(code):
                if any(a <= m.start() < b for a, b in spans):
                    continue
                segs = [s for s in re.sub(r"\s+", "", m.group(1)).split("::") if s and s != "*"]
                if segs[0] == "self" and len(segs) == 1:
                    continue
                # `pub(in crate::x)` is a visibility, not a use
                if re.search(r"\bin\s*$", code[max(0, m.start() - 8):m.start()]):
                    continue
                target = self.absolute(mod, segs)
                if target is not None:
                    line = code.count("\n", 0, m.start()) + 1
                    refs.append((mod, self.resolve(target), line))
        return refs


def strongly_connected(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def crate_cycles(crate):
    """[(scope, [modules], [(from, to, file:line)])] for one crate."""
    levels = {}  # scope tuple -> {edge (a, b): [where]}
    for frm, to, line in crate.references():
        k = 0
        while k < len(frm) and k < len(to) and frm[k] == to[k]:
            k += 1
        if k >= len(frm) or k >= len(to):
            continue  # a module using its own parent or child
        scope = frm[:k]
        edge = (frm[k], to[k])
        where = "%s:%d" % (os.path.relpath(crate.files[frm]), line)
        levels.setdefault(scope, {}).setdefault(edge, []).append(where)
    found = []
    for scope, edges in sorted(levels.items()):
        graph = {}
        for a, b in edges:
            graph.setdefault(a, set()).add(b)
        nodes = set(graph) | {b for bs in graph.values() for b in bs}
        for comp in strongly_connected(nodes, graph):
            inside = [(a, b, edges[(a, b)]) for (a, b) in sorted(edges) if a in comp and b in comp]
            found.append((scope, comp, inside))
    return found


def crates_under(top):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        if "Cargo.toml" in filenames and os.path.isdir(os.path.join(dirpath, "src")):
            yield dirpath
            dirnames[:] = [d for d in dirnames if d != "src"]


def main(args):
    tops = args or ["."]
    cycles = 0
    for top in tops:
        for root in crates_under(top):
            for scope, comp, inside in crate_cycles(Crate(root)):
                cycles += 1
                name = os.path.relpath(root) + "/src" + "".join("/" + s for s in scope)
                print("cycle in %s: %s" % (name, " <-> ".join(comp)))
                for a, b, wheres in inside:
                    more = " (+%d more)" % (len(wheres) - 1) if len(wheres) > 1 else ""
                    print("    %s -> %s  %s%s" % (a, b, wheres[0], more))
    if cycles:
        print("%d import cycle(s) between modules of one crate" % cycles)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
