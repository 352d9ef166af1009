#!/usr/bin/env python3
# Diagnostic beside `npm run bench:soak` (docs/benchmarks.md, session 11): every N seconds, the RSS
# of one process split by kind of mapping, from /proc/PID/smaps. Usage: python3 bench/smaps-watch.py PID 30
# Every N s: RSS of a process split by region kind, from /proc/PID/smaps.
# brk heap ([heap]: main malloc arena), anon regions inside 64 MiB-aligned malloc arenas
# (thread arenas), other anonymous (V8 heap pages, mmapped malloc chunks, stacks), file-backed.
import sys, time, re
pid, every = int(sys.argv[1]), float(sys.argv[2])
hdr = re.compile(r'^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$')
t0 = time.time()
print('t_s heap_mb arena_mb anon_big_mb anon_small_mb file_mb total_mb n_maps', flush=True)
while True:
    try:
        lines = open(f'/proc/{pid}/smaps').read().splitlines()
    except FileNotFoundError:
        break
    cur = None; sums = {'heap':0,'arena':0,'anon_big':0,'anon_small':0,'file':0}; n=0
    for ln in lines:
        m = hdr.match(ln)
        if m:
            lo, hi = int(m.group(1),16), int(m.group(2),16); name = m.group(5).strip(); n+=1
            size = hi-lo
            if name == '[heap]': cur='heap'
            elif name.startswith('/') : cur='file'
            elif name.startswith('['): cur='anon_small'
            elif lo % (64<<20) == 0 and size <= (64<<20): cur='arena'
            elif size >= (8<<20): cur='anon_big'
            else: cur='anon_small'
        elif ln.startswith('Rss:') and cur:
            sums[cur] += int(ln.split()[1])
    mb = {k: v/1024 for k,v in sums.items()}
    print(f"{time.time()-t0:.0f} {mb['heap']:.1f} {mb['arena']:.1f} {mb['anon_big']:.1f} {mb['anon_small']:.1f} {mb['file']:.1f} {sum(mb.values()):.1f} {n}", flush=True)
    time.sleep(every)
