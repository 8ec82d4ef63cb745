#!/usr/bin/env python3
"""Import circles between the files of a crate: the strongly connected components of the
graph "file A names an item of file B" (`crate::`, `super::` and `self::` paths, in `use`
declarations and inline), so a newcomer can read the files of a crate in some order.

    python3 .ci/circles.py root/src [--max N]

Prints every circle of more than one file (largest first) and exits 1 if one has more than
N files (default: report only). Test-only files (`*_tests.rs`, `tests.rs`, `tests/`) and
`#[cfg(test)]` modules declared inline are left out: tests may reach anywhere.
"""
import os, re, sys

def module_files(src):
    """module path (tuple) -> file, for every .rs file under src."""
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith('.rs'):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ('mod', 'lib', 'main'):
                parts = parts[:-1]
            out[tuple(parts)] = os.path.join(dirpath, f)
    return out

def test_only(path):
    base = os.path.basename(path)
    return base.endswith('_tests.rs') or base == 'tests.rs' or f'{os.sep}tests{os.sep}' in path

def strip(src):
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'/\*.*?\*/', '', src, flags=re.S)
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
    # drop inline test modules: `#[cfg(test)] mod x { ... }` (brace matched)
    while True:
        m = re.search(r'#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod\s+\w+\s*\{', src)
        if not m:
            break
        depth, i = 1, m.end()
        while i < len(src) and depth:
            depth += {'{': 1, '}': -1}.get(src[i], 0)
            i += 1
        src = src[:m.start()] + src[i:]
    return src

def paths_in(src, children):
    """Every path starting with crate/super/self or a child module's name, with `{a, b::c}`
    groups expanded."""
    out = []
    heads = '|'.join(['crate', 'super', 'self'] + sorted(children))
    for m in re.finditer(r'(?<![\w:])(' + heads + r')((?:::\w+)*)(::\{|::\*)?', src):
        if not m.group(2) and m.group(3) is None:
            continue  # a bare `crate`, `super` (`pub(super)`) or child name is not a path
        if m.group(3) == '::*':
            out.append([m.group(1)] + [p for p in m.group(2).split('::') if p])
            continue
        head = [m.group(1)] + [p for p in m.group(2).split('::') if p]
        if m.group(3):
            depth, i, start = 1, m.end(), m.end()
            while i < len(src) and depth:
                depth += {'{': 1, '}': -1}.get(src[i], 0)
                i += 1
            for item in re.split(r',', re.sub(r'\{[^{}]*\}', '', src[start:i - 1])):
                item = item.strip().split(' as ')[0].strip()
                if item == 'self':
                    out.append(head)
                elif item:
                    out.append(head + [p for p in item.split('::') if p])
        else:
            out.append(head)
    return out

def resolve(mod, path, files):
    if path[0] == 'crate':
        base, rest = (), path[1:]
    elif path[0] not in ('super', 'self'):
        base, rest = tuple(mod), path
    else:
        base = list(mod)
        rest = path
        while rest and rest[0] in ('super', 'self'):
            if rest[0] == 'super':
                base = base[:-1]
            rest = rest[1:]
        base = tuple(base)
    best = None
    cur = base
    if cur in files:
        best = cur
    for p in rest:
        cur = cur + (p,)
        if cur in files:
            best = cur
        else:
            break
    return best

def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1
        stack.append(v); on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            out.append(comp)
    for v in graph:
        if v not in index:
            visit(v)
    return out

def main():
    src = sys.argv[1]
    limit = int(sys.argv[sys.argv.index('--max') + 1]) if '--max' in sys.argv else None
    files = module_files(src)
    graph = {}
    for mod, path in files.items():
        if test_only(path):
            continue
        deps = set()
        children = {m[-1] for m in files if len(m) == len(mod) + 1 and m[:len(mod)] == mod}
        for p in paths_in(strip(open(path).read()), children):
            t = resolve(mod, p, files)
            if t is not None and t != mod and not test_only(files[t]):
                # a file naming its own ancestor module's re-export is still an edge
                deps.add(t)
        graph[mod] = deps
    comps = sorted((c for c in sccs(graph) if len(c) > 1), key=len, reverse=True)
    for c in comps:
        print(f'{len(c)} files: ' + ', '.join(sorted('/'.join(m) or 'lib' for m in c)))
    if not comps:
        print('no import circle')
    if limit is not None and comps and len(comps[0]) > limit:
        sys.exit(1)

main()
