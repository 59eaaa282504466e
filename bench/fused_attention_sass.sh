#!/bin/sh
# What ptxas makes of the tensor-core fused attention kernels (bench/fused_attention_sass.cu):
# for each kernel and head width, its registers, spilled bytes, sm_90 SASS instructions, and
# those of its main loop (the longest loop with tensor-core products: a tile of keys, or of
# queries, a step) with its products (HMMA), shared-memory fragment loads (LDSM), exp2s (MUFU)
# and branches (the dK/dV kernel twice: `backward_keys+dQ sums`, the default backward's, adds dQ
# with atomics; `backward_keys` is the deterministic backward's, beside `backward_queries`); then
# `tile`, the instructions a warp issues for one step on an unmasked tile of whole rows without
# dropout, walked through the SASS: whole-tile staging and unmasked loops taken (the branches on
# two predicates), around dropout's calls and 64-bit divisions (a forward branch over a CALL and
# no copy), around the element-at-a-time paths of masked tiles and partial rows (a forward branch
# over a global load or atomic, and no copy or product, to code that reaches its join without a
# branch: the bias's loads, dQ's checked adds), each 16-byte copy loop run D / 16 times, dQ's loop
# over 32 columns D / 32 times, other inner loops once; a call on that path counts with its
# function's body; `local`, the local loads and stores (spilled registers) on that path. Then the
# same kernels under ALiBi with learned slopes (`ALiBi forward`, ...), at widths 64 and 128
# (inlined: its backward's derivative taken at every score, without a branch), and plain
# attention's on packed sentences (`packed forward`, ...: short sentences, several a block;
# every tile masked, so no tile is walked). A score modification called out of line behind a
# branch (the backward's, where dS ≠ 0) is walked around as dropout's is: its backward kernels'
# tiles are counted as of scores whose dS is 0. A walk that meets other than a tile's products
# (D / 2 for each 64-wide product) stops the script: the SASS no longer fits these rules.
# Counted, not timed. Needs nvcc (and cuobjdump and nvdisasm: bench/sass_tools.sh).
#   usage: bench/fused_attention_sass.sh [path to the attn tree, default: this one]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tree=${1:-$here}
. "$here/bench/sass_tools.sh"
sass_of fused_attention_sass.cu
python3 - "$work/ptxas.txt" "$work/probe.sass" <<'PY'
import collections, re, sys
registers, spills, name = {}, {}, None
for line in open(sys.argv[1]):
    entry = re.search(r"(?:Compiling entry function|Function properties for) '?([^' ]+)", line)
    if entry: name = entry.group(1).strip()
    used = re.search(r'Used (\d+) registers', line)
    if used: registers[name] = int(used.group(1))
    spilled = re.search(r'(\d+) bytes spill stores', line)
    if spilled: spills[name] = int(spilled.group(1))
code, name = {}, None
for line in open(sys.argv[2]):
    function = re.match(r'\s+Function : (\S+)', line)
    if function: name = function.group(1); code[name] = []; continue
    op = re.match(r'\s+/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)\s*([^;]*);', line)
    if op and name and op.group(3) != 'NOP':
        code[name].append((int(op.group(1), 16), op.group(3).split('.')[0], op.group(4), bool(op.group(2)),
                           op.group(3)))
def label(mangled):
    kernel = re.search(r'(forward|backward_keys|backward_queries)ILi(\d+)', mangled)
    # backward_keys<D, T, Rule, M, sums_queries = true, ...>
    sums = kernel.group(1) == 'backward_keys' and 'no_score_modificationELb1E' in mangled
    alibi = 'device_score_modification' in mangled
    packed = 'Lb1EEEv' in mangled  # the last template argument, packs, true
    return ('ALiBi ' if alibi else 'packed ' if packed else '') + kernel.group(1) + ('+dQ sums' if sums else ''), \
        int(kernel.group(2))
def tile_path(ops, loop_begin, loop_end, copies):
    """Instructions from the loop's head to its back edge along an unmasked tile's branches."""
    at = {o[0]: k for k, o in enumerate(ops)}
    calls = [o[0] for o in ops if o[1] == 'CALL']
    copy_instructions = [o[0] for o in ops if o[1] == 'LDGSTS']
    # Global loads and atomics one at a time: the bias's and a table's loads of a masked tile, the
    # checked adds of dQ's sums (an unmasked tile of whole rows takes neither).
    element_accesses = [o[0] for o in ops if o[1] in ('LDG', 'REDG', 'ATOMG', 'RED')]
    products = [o[0] for o in ops if o[1] == 'HMMA']  # never walked around
    def branch_free_from(target):
        """Whether code at target runs to its join without a branch (an unchecked path, not a skip)."""
        for n, o in enumerate(ops[at[target]:]):
            if o[1] == 'BSYNC': return n > 0
            if o[1] == 'BRA': return False
        return False
    k, count, back_edges, walked = at[loop_begin], 0, collections.Counter(), collections.Counter()
    while True:
        address, op, operands, predicate, _ = ops[k]
        count += 1
        walked[op] += 1
        callee = re.match(r'0x([0-9a-f]+)', operands) if op == 'CALL' else None
        if callee and int(callee.group(1), 16) in at:  # an out-of-line function: its body to RET too
            c = at[int(callee.group(1), 16)]
            while ops[c][1] != 'RET': count, c = count + 1, c + 1
            count += 1
        if address == loop_end: return count, walked
        if op == 'BRA':
            target = int(re.search(r'0x([0-9a-f]+)', operands).group(1), 16)
            two_predicates = ',' in operands
            if not predicate and not two_predicates: take = True
            elif target < address:  # an inner loop: a thread's 16-byte copies, or once
                back_edges[address] += 1
                wide = any(o[1] == 'LDGSTS' and '.128' in o[4] for o in ops if target <= o[0] <= address)
                multiplies = any(o[1] == 'HMMA' for o in ops if target <= o[0] <= address)  # dQ's 32 columns a time
                take = back_edges[address] < (copies if wide else copies // 2 if multiplies else 1)
            elif two_predicates: take = True
            else:
                def over(kind): return any(address < c < target for c in kind)
                take = not over(copy_instructions + products) and \
                    (over(calls) or over(element_accesses) and branch_free_from(target))
            if take:
                k = at[target]
                continue
        k += 1

print(f"{'kernel':27s} {'d':>4s} {'registers':>9s} {'spilled':>7s} {'SASS':>6s} {'loop':>6s} "
      f"{'HMMA':>5s} {'LDSM':>5s} {'MUFU':>5s} {'BRA':>5s} {'tile':>5s} {'local':>5s}")
for mangled in sorted(code, key=label):
    ops = code[mangled]
    loops = []
    for address, op, operands, *_ in ops:
        target = re.search(r'0x([0-9a-f]+)', operands) if op == 'BRA' else None
        if target and int(target.group(1), 16) < address:
            body = [o for o in ops if int(target.group(1), 16) <= o[0] <= address]
            if any(o[1] == 'HMMA' for o in body): loops.append(body)
    if not loops:
        sys.exit(f'{mangled}: no loop with tensor-core products found in its SASS')
    body = max(loops, key=len)
    count = collections.Counter(o[1] for o in body)
    kernel, d = label(mangled)
    if kernel.startswith('packed '):  # every tile masked: no unmasked tile to walk
        print(f"{kernel:27s} {d:4d} {registers[mangled]:9d} {spills.get(mangled, 0):7d} {len(ops):6d} {len(body):6d} "
              f"{count['HMMA']:5d} {count['LDSM']:5d} {count['MUFU']:5d} {count['BRA']:5d} {'-':>5s} {'-':>5s}")
        continue
    tile, walked = tile_path(ops, body[0][0], body[-1][0], d // 16)
    walked_products = walked['HMMA']
    # m16n8k16 products a 64-wide tile takes: D / 2 for each of the forward's two, dK/dV's four,
    # dQ's three, and the dQ sums' one more.
    products = {'forward': d, 'backward_keys': 2 * d, 'backward_keys+dQ sums': 5 * d // 2,
                'backward_queries': 3 * d // 2}
    if walked_products != products[kernel.removeprefix('ALiBi ')]:
        sys.exit(f'{kernel} at d = {d}: the walk met {walked_products} products where a tile has '
                 f'{products[kernel.removeprefix("ALiBi ")]}: the SASS no longer fits the walk\'s rules')
    print(f"{kernel:27s} {d:4d} {registers[mangled]:9d} {spills.get(mangled, 0):7d} {len(ops):6d} {len(body):6d} "
          f"{count['HMMA']:5d} {count['LDSM']:5d} {count['MUFU']:5d} {count['BRA']:5d} {tile:5d} "
          f"{walked['LDL'] + walked['STL']:5d}")
PY
