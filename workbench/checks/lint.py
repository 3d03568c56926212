"""Static checks on compiled compute shaders (SPIR-V), parsed here from the binary's words.

Checks, per function (glslc -O inlines everything into `main`):

``barrier_divergence`` (error)
    An ``OpReturn`` / ``OpReturnValue`` / ``OpKill`` / ``OpTerminateInvocation`` is reachable from the function's
    entry by a path that passes no ``OpControlBarrier`` *and* that took a conditional branch (or switch) whose
    condition is not provably uniform, at which the other way reaches a barrier: some invocations leave while the
    others wait at the barrier (the GLSL pattern ``if (oob) return; … barrier();``). "Provably uniform" is
    conservative: a condition computed only from constants, specialization constants and loads of uniform /
    push-constant / uniform-constant memory. False positives: a condition uniform per workgroup for a reason the
    check cannot see (``gl_WorkGroupID``, a bounds check that never splits a workgroup because the sizes divide the
    grid), and a barrier in a block that also returns after it on the same path.

``shared_race`` (warning)
    A Workgroup (``shared``) variable is stored and later loaded on some path with no ``OpControlBarrier`` between
    them (a may-analysis over the CFG, loops included). A load through the same access-chain indices (the same SSA
    ids) as the store is the invocation reading its own element back and is not flagged. False positives: accesses
    to one element through different but equal index expressions, and stores that only this invocation reads.

Each row: variant, check, severity, instruction (the index of the flagged instruction in the module's instruction
stream, 0 = the first after the header), line (the GLSL line from the nearest preceding ``OpLine``, where the module
still has debug info; the workbench's compiles strip it, so usually empty) and message.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

SPIRV_MAGIC = 0x07230203
OP_LINE, OP_NO_LINE, OP_STRING = 8, 317, 7
OP_FUNCTION, OP_FUNCTION_END, OP_LABEL = 54, 56, 248
OP_BRANCH, OP_BRANCH_CONDITIONAL, OP_SWITCH = 249, 250, 251
OP_KILL, OP_RETURN, OP_RETURN_VALUE, OP_TERMINATE_INVOCATION = 252, 253, 254, 4416
OP_CONTROL_BARRIER, OP_LOAD, OP_STORE, OP_VARIABLE, OP_COPY_OBJECT = 224, 61, 62, 59, 83
OP_ACCESS_CHAIN, OP_IN_BOUNDS_ACCESS_CHAIN, OP_PTR_ACCESS_CHAIN = 65, 66, 67
OP_COMPOSITE_EXTRACT = 81
CONSTANT_OPS = {41, 42, 43, 44, 46, 48, 49, 50, 51, 52}  # OpConstant*, OpSpecConstant*
EXITS = {OP_KILL, OP_RETURN, OP_RETURN_VALUE, OP_TERMINATE_INVOCATION}
SC_UNIFORM_CONSTANT, SC_WORKGROUP, SC_UNIFORM, SC_PUSH_CONSTANT = 0, 4, 2, 9
# conversions, arithmetic, bit, relational and logical instructions: every operand after type and result is an id
ID_OPERAND_OPS = set(range(109, 128)) | set(range(128, 161)) | set(range(164, 206))

COLUMNS = ("variant", "check", "severity", "instruction", "line", "message")


@dataclass
class Instruction:
    index: int
    opcode: int
    operands: tuple
    line: str = ""


def parse(code: bytes) -> list[Instruction]:
    """The module's instructions after the 5-word header, each with the GLSL file:line of the OpLine before it."""
    if len(code) < 20 or len(code) % 4:
        raise ValueError(f"not a SPIR-V module: expected a multiple of 4 bytes, at least 20, got {len(code)}")
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if words[0] != SPIRV_MAGIC:
        raise ValueError(f"not a SPIR-V module: expected magic {SPIRV_MAGIC:#x}, got {words[0]:#x}")
    out, strings, line, at = [], {}, "", 5
    while at < len(words):
        count, opcode = words[at] >> 16, words[at] & 0xFFFF
        if count == 0 or at + count > len(words):
            raise ValueError(f"malformed SPIR-V: instruction {len(out)} at word {at} has word count {count}")
        operands = words[at + 1:at + count]
        if opcode == OP_STRING:
            raw = struct.pack(f"<{len(operands) - 1}I", *operands[1:])
            strings[operands[0]] = raw.split(b"\0", 1)[0].decode(errors="replace")
        elif opcode == OP_LINE:
            line = f"{strings.get(operands[0], '?')}:{operands[1]}"
        elif opcode in (OP_NO_LINE, OP_FUNCTION_END):
            line = ""
        out.append(Instruction(len(out), opcode, tuple(operands), line))
        at += count
    return out


@dataclass
class Block:
    label: int
    instructions: list
    successors: list

    @property
    def terminator(self) -> Instruction:
        return self.instructions[-1]


def _functions(instructions):
    """[(function instruction, {label: Block}, entry label)]."""
    functions, current, blocks, block = [], None, None, None
    for ins in instructions:
        if ins.opcode == OP_FUNCTION:
            current, blocks, block = ins, {}, None
        elif current is None:
            continue
        elif ins.opcode == OP_FUNCTION_END:
            if blocks:
                functions.append((current, blocks, next(iter(blocks))))
            current = None
        elif ins.opcode == OP_LABEL:
            block = Block(ins.operands[0], [ins], [])
            blocks[block.label] = block
        elif block is not None:
            block.instructions.append(ins)
            if ins.opcode == OP_BRANCH:
                block.successors = [ins.operands[0]]
            elif ins.opcode == OP_BRANCH_CONDITIONAL:
                block.successors = list(dict.fromkeys(ins.operands[1:3]))
            elif ins.opcode == OP_SWITCH:
                block.successors = list(dict.fromkeys([ins.operands[1], *ins.operands[3::2]]))
    return functions


def _uniform_ids(instructions) -> set:
    """Ids whose value is the same in every invocation, as far as this conservative look can prove."""
    roots, uniform = {}, set()
    for ins in instructions:
        if ins.opcode == OP_VARIABLE:
            roots[ins.operands[1]] = ins.operands[2]
    for ins in instructions:
        ops = ins.operands
        if ins.opcode in CONSTANT_OPS:
            uniform.add(ops[1])
        elif ins.opcode in (OP_ACCESS_CHAIN, OP_IN_BOUNDS_ACCESS_CHAIN) and ops[2] in roots:
            if all(i in uniform for i in ops[3:]):
                roots[ops[1]] = roots[ops[2]]
        elif ins.opcode == OP_LOAD and roots.get(ops[2]) in (SC_UNIFORM, SC_PUSH_CONSTANT, SC_UNIFORM_CONSTANT):
            uniform.add(ops[1])
        elif ins.opcode == OP_COMPOSITE_EXTRACT and ops[2] in uniform:
            uniform.add(ops[1])
        elif ins.opcode in ID_OPERAND_OPS and len(ops) > 2 and all(i in uniform for i in ops[2:]):
            uniform.add(ops[1])
    return uniform


def _where(ins: Instruction) -> str:
    return f"instruction {ins.index}" + (f" (GLSL {ins.line})" if ins.line else "")


def _reaches(blocks, start, targets) -> bool:
    seen, todo = set(), [start]
    while todo:
        label = todo.pop()
        if label in targets:
            return True
        if label in seen or label not in blocks:
            continue
        seen.add(label)
        todo.extend(blocks[label].successors)
    return False


def _barrier_divergence(blocks, entry, uniform) -> list[tuple[Instruction, str]]:
    barrier_blocks = {label for label, b in blocks.items()
                      if any(i.opcode == OP_CONTROL_BARRIER for i in b.instructions)}
    if not barrier_blocks:
        return []
    found, seen = {}, set()
    todo = [(entry, None)]  # (block, the divergent branch taken so far, or None)
    while todo:
        label, divergent = todo.pop()
        if (label, divergent is None) in seen or label not in blocks or label in barrier_blocks:
            continue
        seen.add((label, divergent is None))
        block = blocks[label]
        term = block.terminator
        if term.opcode in EXITS and divergent is not None and term.index not in found:
            found[term.index] = (term, divergent)
        branches = term.opcode in (OP_BRANCH_CONDITIONAL, OP_SWITCH) and len(block.successors) > 1
        for succ in block.successors:
            here = divergent
            if (branches and here is None and term.operands[0] not in uniform
                    and any(_reaches(blocks, other, barrier_blocks) for other in block.successors if other != succ)):
                here = term
            todo.append((succ, here))
    return [(term, f"{term_name(term)} at {_where(term)} is reachable without any OpControlBarrier after the "
                   f"non-uniform branch at {_where(branch)}, whose other way reaches a barrier: invocations that "
                   f"leave here never arrive at the barrier the others wait at")
            for term, branch in sorted(found.values(), key=lambda p: p[0].index)]


def term_name(ins: Instruction) -> str:
    return {OP_KILL: "OpKill", OP_RETURN: "OpReturn", OP_RETURN_VALUE: "OpReturnValue",
            OP_TERMINATE_INVOCATION: "OpTerminateInvocation"}.get(ins.opcode, str(ins.opcode))


def _shared_race(blocks, entry, instructions) -> list[tuple[Instruction, str]]:
    shared = {i.operands[1] for i in instructions if i.opcode == OP_VARIABLE and i.operands[2] == SC_WORKGROUP}
    if not shared:
        return []
    names = {i.operands[0]: _name(i.operands[1:]) for i in instructions if i.opcode == 5}
    pointers = {v: (v, ()) for v in shared}  # pointer id → (shared variable, index ids)
    for ins in instructions:
        ops = ins.operands
        if ins.opcode in (OP_ACCESS_CHAIN, OP_IN_BOUNDS_ACCESS_CHAIN, OP_PTR_ACCESS_CHAIN) and ops[2] in pointers:
            var, idx = pointers[ops[2]]
            pointers[ops[1]] = (var, idx + tuple(ops[3:]))
        elif ins.opcode == OP_COPY_OBJECT and ops[2] in pointers:
            pointers[ops[1]] = pointers[ops[2]]

    def transfer(block, state, report):
        state = dict(state)  # (var) → frozenset of (store instruction index, index ids)
        for ins in block.instructions:
            if ins.opcode == OP_CONTROL_BARRIER:
                state = {}
            elif ins.opcode == OP_STORE and ins.operands[0] in pointers:
                var, idx = pointers[ins.operands[0]]
                state[var] = state.get(var, frozenset()) | {(ins.index, idx)}
            elif ins.opcode == OP_LOAD and ins.operands[2] in pointers and report is not None:
                var, idx = pointers[ins.operands[2]]
                racing = sorted(s for s, sidx in state.get(var, ()) if sidx != idx or not idx)
                if racing:
                    report.setdefault(ins.index, (ins, var, racing))
        return state

    # may-analysis to a fixed point: at each block's entry, the stores since the last barrier on some path
    into = {entry: {}}
    todo = [entry]
    while todo:
        label = todo.pop()
        out = transfer(blocks[label], into[label], None)
        for succ in blocks[label].successors:
            if succ not in blocks:
                continue
            old = into.get(succ)
            merged = dict(old or {})
            for var, stores in out.items():
                merged[var] = merged.get(var, frozenset()) | stores
            if old is None or merged != old:
                into[succ] = merged
                todo.append(succ)
    report = {}
    for label, state in into.items():
        transfer(blocks[label], state, report)
    by_index = {i.index: i for i in instructions}
    return [(ins, f"OpLoad of shared {names.get(var, f'%{var}')} at {_where(ins)} may read what another invocation "
                  f"stored with no OpControlBarrier between: OpStore at "
                  + ", ".join(_where(by_index[s]) for s in racing[:3]) + (" …" if len(racing) > 3 else ""))
            for _, (ins, var, racing) in sorted(report.items())]


def _name(words) -> str:
    raw = struct.pack(f"<{len(words)}I", *words)
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def lint_spirv(code: bytes, variant: str = "") -> list[dict]:
    """The rows (COLUMNS) of every finding in one SPIR-V module."""
    instructions = parse(code)
    uniform = _uniform_ids(instructions)
    rows = []
    for _function, blocks, entry in _functions(instructions):
        for check, severity, found in (("barrier_divergence", "error", _barrier_divergence(blocks, entry, uniform)),
                                       ("shared_race", "warning", _shared_race(blocks, entry, instructions))):
            rows += [{"variant": variant, "check": check, "severity": severity, "instruction": ins.index,
                      "line": ins.line, "message": message} for ins, message in found]
    return rows
