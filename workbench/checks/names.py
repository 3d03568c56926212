"""Does every kernel name ET-VK's C++ can ask for exist among the codegen's variants? ("Could not find ShaderInfo"
found at a desk instead of on a phone.)

    report = check(checkout)          # names the C++ assembles, matched against Codegen(source(checkout)).variants()
    report.missing                    # DataFrame: names no variant matches (file:line, the pattern)
    report.unresolved                 # names built from values the C++ only knows at run time
    report.unrequested                # templates no name of the C++ can reach

How names are read. For every ``VK_KERNEL_FROM_STR(var)`` / ``VK_KERNEL(name)`` in
``backends/vulkan/runtime/graph/ops/impl/*.cpp``, the statements of the enclosing function that build ``var`` are
followed in order, as the C++ assembles the name:
* ``std::string var = "lit" + other;`` / ``var = cond ? a + "_x" : b;`` set it (string literals, other names already
  built in the function, ``?:`` giving both branches);
* ``var += "lit";`` appends; inside an ``if`` / ``else`` / ``switch`` it may or may not happen, so both are kept;
* ``add_dtype_suffix(var, …)``, ``add_storage_type_suffix(var, …)`` and every other ``add_*_suffix`` append one of
  the suffixes that function can append: read from its own definition in ``ops/utils/*.cpp`` (its
  ``kernel_name += "…"`` lines), so the check follows the checkout's revision.
A name is *missing* when none of its fully known spellings matches a variant; a dtype or storage suffix may be any
of its values (which dtype a graph uses is known at run time only), so a missing name means a family or a literal
spelling that the templates do not generate. A name built from a function parameter, a member or a call the
reading cannot see is listed as *unresolved* (with the pattern of what is known of it), never guessed; a template
that only such names might reach says so in `unrequested`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

IMPL_DIR = "backends/vulkan/runtime/graph/ops/impl"
UTILS_DIR = "backends/vulkan/runtime/graph/ops/utils"
WILD = "\0"  # stands for a value the reading cannot know (an unresolved part)

_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass
class Report:
    names: pd.DataFrame        # every name found: file, line, var, pattern, status (ok / missing / unresolved)
    unrequested: pd.DataFrame  # templates none of whose variants any name reaches
    variants: int

    @property
    def missing(self) -> pd.DataFrame:
        return self.names[self.names["status"] == "missing"]

    @property
    def unresolved(self) -> pd.DataFrame:
        return self.names[self.names["status"] == "unresolved"]

    def summary(self) -> str:
        counts = self.names["status"].value_counts().to_dict()
        return (f"{len(self.names)} kernel names in the C++ against {self.variants} variants: "
                f"{counts.get('ok', 0)} found, {counts.get('missing', 0)} missing, "
                f"{counts.get('unresolved', 0)} unresolved; {len(self.unrequested)} templates nothing requests")


def suffix_tables(utils_dir: Path) -> dict[str, list[str]]:
    """`add_*_suffix` function name → the suffixes its body appends, from the checkout's own definitions."""
    tables: dict[str, list[str]] = {}
    for path in sorted(Path(utils_dir).glob("*.cpp")):
        text = path.read_text(errors="replace")
        for match in re.finditer(r"\bvoid\s+(add_\w+_suffix)\s*\(", text):
            body = _braced(text, text.index("{", match.end()))
            suffixes = [s for s in _STRING.findall("\n".join(re.findall(r"\+=\s*[^;]*;", body)))]
            if suffixes:
                tables.setdefault(match.group(1), [])
                tables[match.group(1)] += [s for s in suffixes if s not in tables[match.group(1)]]
    return tables


def _braced(text: str, open_at: int) -> str:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at:i + 1]
    return text[open_at:]


def _strip_comments(text: str) -> str:
    """Comments blanked (line structure kept), string literals left alone."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(c if c == "\n" else " " for c in text[i:j]))
            i = j
        elif text[i] == '"':
            match = _STRING.match(text, i)
            j = match.end() if match else i + 1
            out.append(text[i:j])
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _statements(body: str, base_line: int):
    """(statement text, line, nesting depth) of a function body, split at ';' and braces."""
    depth, start, line, start_line = 0, 0, base_line, base_line
    in_string = False
    for i, ch in enumerate(body):
        if ch == "\n":
            line += 1
        if ch == '"' and (i == 0 or body[i - 1] != "\\"):
            in_string = not in_string
        if in_string:
            continue
        if ch in "{};":
            text = body[start:i].strip()
            if text:
                yield text, start_line, depth
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            start, start_line = i + 1, line
    tail = body[start:].strip()
    if tail:
        yield tail, start_line, depth


def _split_top(expr: str, sep: str) -> list[str]:
    parts, depth, start, in_string = [], 0, 0, False
    for i, ch in enumerate(expr):
        if ch == '"' and (i == 0 or expr[i - 1] != "\\"):
            in_string = not in_string
        if in_string:
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return parts


def _eval(expr: str, known: dict[str, set[str]]) -> set[str]:
    """The spellings a C++ string expression can take (WILD marks an unknown part)."""
    expr = expr.strip()
    while expr.startswith("(") and expr.endswith(")") and _split_top(expr[1:-1], ",") == [expr[1:-1]]:
        expr = expr[1:-1].strip()
    branches = _split_top(expr, "?")
    if len(branches) == 2:
        options = _split_top(branches[1], ":")
        if len(options) == 2:
            return _eval(options[0], known) | _eval(options[1], known)
    values = {""}
    for term in _split_top(expr, "+"):
        term = term.strip()
        term = re.sub(r"^std::string\s*\((.*)\)$", r"\1", term)
        if _STRING.fullmatch(term):
            pieces = {_STRING.fullmatch(term).group(1)}
        elif re.fullmatch(r"[A-Za-z_]\w*", term) and term in known:
            pieces = known[term]
        else:
            pieces = {WILD}
        values = {v + p for v in values for p in pieces}
    return values


def _function_at(text: str, offset: int) -> tuple[str, int]:
    """The body of the function enclosing `offset` (from its opening brace) and the line it starts at."""
    lines = text[:offset].split("\n")
    for back in range(len(lines) - 1, -1, -1):
        if lines[back] and not lines[back][0].isspace() and lines[back][0] not in "}#/" and "(" in lines[back]:
            start = sum(len(l) + 1 for l in lines[:back])
            brace = text.find("{", start)
            if 0 <= brace < offset:
                return text[brace:offset], text[:brace].count("\n") + 1
    return text[:offset], 1


def kernel_names(impl_dir: Path, tables: dict[str, list[str]]) -> list[dict]:
    """Every kernel name the C++ of `impl_dir` asks for: file, line, var, spellings (WILD for unknown parts)."""
    found = []
    for path in sorted(Path(impl_dir).glob("*.cpp")):
        text = _strip_comments(path.read_text(errors="replace"))
        for match in re.finditer(r"\bVK_KERNEL(_FROM_STR)?\s*\(\s*([^()]*?)\s*\)", text):
            line = text[:match.start()].count("\n") + 1
            arg = match.group(2)
            if not match.group(1):  # VK_KERNEL(name): the name itself
                found.append({"file": path.name, "line": line, "var": arg, "spellings": {arg}})
                continue
            body, base = _function_at(text, match.start())
            known: dict[str, set[str]] = {}
            assigned: dict[str, set[str]] = {}  # what the branches of a switch / if chain assigned so far
            for stmt, _, depth in _statements(body, base):
                _follow(stmt, depth, known, tables, assigned)
            if _STRING.fullmatch(arg):
                spellings = {_STRING.fullmatch(arg).group(1)}
            else:
                spellings = known.get(arg, {WILD})
            found.append({"file": path.name, "line": line, "var": arg, "spellings": spellings})
    return found


def _follow(stmt: str, depth: int, known: dict[str, set[str]], tables: dict[str, list[str]],
            assigned: dict[str, set[str]]) -> None:
    stmt = re.sub(r"^(?:else\s+)?(?:if|for|while|switch)\s*\(.*?\)\s*", "", stmt.strip(), flags=re.S)
    stmt = re.sub(r"^(?:(?:else|case\s+(?:\w+::)*\w+\s*:|default\s*:|return)\s*)+", "", stmt).strip()
    conditional = depth > 1
    m = re.fullmatch(r"(?:const\s+)?std::string\s*&?\s*(\w+)\s*(?:=\s*(.*)|\{(.*)\}|\((.*)\))?", stmt, flags=re.S)
    if m:
        value = m.group(2) or m.group(3) or m.group(4)
        known[m.group(1)] = _eval(value, known) if value else {""}
        return
    m = re.fullmatch(r"(\w+)\s*(\+?=)\s*(.*)", stmt, flags=re.S)
    if m and m.group(1) in known:
        values = _eval(m.group(3), known)
        if m.group(2) == "=":  # a branch that assigns: the other branches may assign too, or keep the old value
            keep = conditional and known[m.group(1)] != {""}
            known[m.group(1)] = values | (known[m.group(1)] if keep else set())
            if conditional and not keep:
                known[m.group(1)] = values | assigned.get(m.group(1), set())
            assigned.setdefault(m.group(1), set()).update(values)
        else:
            grown = {v + p for v in known[m.group(1)] for p in values}
            known[m.group(1)] = grown | (known[m.group(1)] if conditional else set())
        return
    m = re.fullmatch(r"(add_\w+_suffix)\s*\(\s*(\w+)\s*,.*", stmt, flags=re.S)
    if m and m.group(2) in known:
        suffixes = tables.get(m.group(1))
        pieces = set(suffixes) if suffixes else {WILD}
        grown = {v + p for v in known[m.group(2)] for p in pieces}
        known[m.group(2)] = grown | (known[m.group(2)] if conditional else set())


def _pattern(spelling: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(part) for part in spelling.split(WILD)) + r"\Z")


def check_tree(variants: dict, root: Path) -> Report:
    """The check of the C++ under `root` (a tree holding IMPL_DIR and UTILS_DIR) against `variants` (the codegen's
    {variant name: template path})."""
    impl, utils = root / IMPL_DIR, root / UTILS_DIR
    if not impl.is_dir():
        raise FileNotFoundError(f"no {IMPL_DIR} in {root}: the check reads the C++ that requests the kernels")
    tables = suffix_tables(utils)
    rows, reached, maybe = [], set(), set()
    for entry in kernel_names(impl, tables):
        spellings = sorted(entry["spellings"])
        resolved = [s for s in spellings if WILD not in s]
        partial = [s for s in spellings if WILD in s and s.strip(WILD)]
        exact = {v for s in resolved for v in variants if _pattern(s).match(v)}
        possible = {v for s in partial for v in variants if _pattern(s).match(v)}
        reached |= exact
        maybe |= possible
        if resolved:
            status = "ok" if exact else "missing"
        else:
            status = "unresolved"
        rows.append({"file": entry["file"], "line": entry["line"], "var": entry["var"], "status": status,
                     "spellings": len(spellings), "pattern": " | ".join(s.replace(WILD, "*") for s in spellings[:4])
                     + (" | …" if len(spellings) > 4 else ""), "variants_matched": len(exact | possible)})
    names = pd.DataFrame(rows, columns=["file", "line", "var", "status", "spellings", "pattern", "variants_matched"])
    templates = {}
    for name, path in variants.items():
        templates.setdefault(path.name, []).append(name)
    unrequested = pd.DataFrame([{"template": t, "variants": len(v), "an_unresolved_name_may_request_it": bool(maybe & set(v))}
                                for t, v in sorted(templates.items()) if not reached & set(v)],
                               columns=["template", "variants", "an_unresolved_name_may_request_it"])
    return Report(names, unrequested, len(variants))
