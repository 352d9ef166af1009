/**
 * The disk's own commit latency, measured beside a soak (bench/soak.ts): every 50 ms this
 * process writes one 8 KB block to a file in the given directory and waits for fdatasync, the
 * call a database commit waits for, and prints `<epoch ms> <latency ms>` for each. It runs in its
 * own process so that the soak's busy event loop does not add to what it measures.
 *
 * Why: in the PostgreSQL soak of session 10 some commits took 200-1,300 ms while Node's event
 * loop never stalled over 45 ms; this probe, started by hand beside it, saw its own 8 KB
 * fdatasync take 170-280 ms at the same moments (docs/benchmarks.md). A window whose p99 rises
 * with the probe's is the storage's, not Postyard's.
 *
 *   node --import tsx bench/fsync-probe.ts <dir> [interval ms]
 */
import { closeSync, fdatasyncSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
if (!dir) throw new Error('usage: fsync-probe.ts <dir> [interval ms]');
const interval = Number(process.argv[3] ?? 50);
const file = join(dir, `fsync-probe-${process.pid}.dat`);
const fd = openSync(file, 'w', 0o600);
const block = Buffer.alloc(8192, 0x78);
let i = 0;
const timer = setInterval(() => {
  const at = Date.now();
  const t0 = performance.now();
  // 1,024 blocks in turn (8 MB): rewrites, as a WAL that has been recycled is.
  writeSync(fd, block, 0, block.length, (i++ % 1024) * block.length);
  fdatasyncSync(fd);
  process.stdout.write(`${at} ${(performance.now() - t0).toFixed(2)}\n`);
}, interval);
const end = () => {
  clearInterval(timer);
  closeSync(fd);
  rmSync(file, { force: true });
  process.exit(0);
};
process.once('SIGTERM', end);
process.once('SIGINT', end);
