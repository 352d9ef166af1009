/**
 * bench:cli-start: how fast the compiled `postyard` command starts (issue 20 item 1).
 *
 * In one run, alternating so that machine load hits both sides alike:
 * - `node bin/postyard.js --help` against bare `node -e 0` (target: within 300 ms of it), and the
 *   same `--help` from the TypeScript sources through tsx (bin/postyard-src.js) for comparison;
 * - `postyard start` (every role, SQLite, a fresh data directory: migrations included) until
 *   GET /readyz answers 200 (target: 1.5 s), and a second start on that migrated directory;
 * - the resident set (VmRSS) of the all-roles process after it has sat idle for a few seconds.
 *
 * Medians are printed with the same-run ratio and difference. The server is built first
 * (`npm run build:server`) so the figures are those of the current sources, not of an old dist/.
 *
 *   npm run bench:cli-start [-- --runs 15 --start-runs 5 --idle-seconds 5 --no-build]
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, machine } from './lib.ts';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '15' },
    'start-runs': { type: 'string', default: '5' },
    'idle-seconds': { type: 'string', default: '5' },
    'no-build': { type: 'boolean', default: false },
  },
});
const RUNS = Number(args.runs);
const START_RUNS = Number(args['start-runs']);
const IDLE_MS = Number(args['idle-seconds']) * 1000;
const ROOT = join(import.meta.dirname, '..');
const HELP_TARGET_MS = 300;
const READY_TARGET_MS = 1500;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
const fmt = (ms: number) => `${ms.toFixed(0)} ms`;

/** Wall time of one process from spawn to exit, in ms; fails on a non-zero exit. */
function timeRun(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: 'ignore', env: cleanEnv({}) });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${args.join(' ')} exited ${code}`)),
    );
  });
}

/** process.env without Postyard's own variables (as the tests' children get it), plus `extra`. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('POSTYARD_') || k === 'DATABASE_URL' || k === 'REDIS_URL' || k === 'NODE_OPTIONS') continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}

/** `postyard start` (every role) on `dataDir`; resolves with the time to the first /readyz 200. */
async function startUntilReady(dataDir: string): Promise<{ child: ChildProcess; ms: number }> {
  const port = await freePort();
  const env = cleanEnv({
    NODE_ENV: 'production',
    POSTYARD_DATA_DIR: dataDir,
    POSTYARD_HTTP_HOST: '127.0.0.1',
    POSTYARD_HTTP_PORT: String(port),
    POSTYARD_SMTP_HOST: '127.0.0.1',
    POSTYARD_SMTP_PORT: String(await freePort()),
    POSTYARD_INBOUND_HOST: '127.0.0.1',
    POSTYARD_INBOUND_PORT: String(await freePort()),
    POSTYARD_EHLO_NAME: 'bench.postyard.test',
    POSTYARD_LOG_LEVEL: 'warn',
  });
  const t0 = performance.now();
  const child = spawn(process.execPath, ['bin/postyard.js', 'start'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}/readyz`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`postyard start exited ${child.exitCode}`);
    if (performance.now() - t0 > 120_000) {
      child.kill('SIGKILL');
      throw new Error('postyard start: /readyz not 200 within 120 s');
    }
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(1000) })).status === 200) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  return { child, ms: performance.now() - t0 };
}

async function main() {
  console.log(machine());
  console.log(`node ${process.version}`);
  if (!args['no-build']) {
    console.log('building dist/ (npm run build:server) ...');
    execFileSync('npm', ['run', '--silent', 'build:server'], { cwd: ROOT, stdio: 'inherit' });
  }

  // --- --help against bare Node, interleaved -------------------------------------------------
  const bare: number[] = [];
  const help: number[] = [];
  const helpSrc: number[] = [];
  await timeRun(['bin/postyard.js', '--help']); // warm the file cache (and Node 22's compile cache)
  for (let i = 0; i < RUNS; i++) {
    bare.push(await timeRun(['-e', '0']));
    help.push(await timeRun(['bin/postyard.js', '--help']));
    helpSrc.push(await timeRun(['bin/postyard-src.js', '--help']));
  }
  const [b, h, hs] = [median(bare), median(help), median(helpSrc)];
  console.log(`\n--help, median of ${RUNS} interleaved runs`);
  console.log(`  node -e 0                    ${fmt(b)}`);
  console.log(
    `  postyard --help (dist/)      ${fmt(h)}  = node -e 0 + ${fmt(h - b)} (x${(h / b).toFixed(2)}); target +${HELP_TARGET_MS} ms: ${h - b <= HELP_TARGET_MS ? 'met' : 'NOT met'}`,
  );
  console.log(`  postyard --help (src, tsx)   ${fmt(hs)}  = node -e 0 + ${fmt(hs - b)} (x${(hs / b).toFixed(2)})`);

  // --- start until ready, RSS when idle ------------------------------------------------------
  const fresh: number[] = [];
  const again: number[] = [];
  const rss: number[] = [];
  for (let i = 0; i < START_RUNS; i++) {
    const dataDir = mkdtempSync(join(tmpdir(), 'postyard-bench-start-'));
    try {
      const first = await startUntilReady(dataDir);
      fresh.push(first.ms);
      await stopChild(first.child);
      const second = await startUntilReady(dataDir);
      again.push(second.ms);
      await new Promise((r) => setTimeout(r, IDLE_MS));
      rss.push(rssMb(second.child.pid as number));
      await stopChild(second.child);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  const bareMs = median(bare);
  const [f, a] = [median(fresh), median(again)];
  console.log(`\npostyard start (every role, SQLite) until GET /readyz 200, median of ${START_RUNS}`);
  console.log(
    `  fresh data dir (migrations)  ${fmt(f)}  (x${(f / bareMs).toFixed(1)} node -e 0); target ${READY_TARGET_MS} ms: ${f <= READY_TARGET_MS ? 'met' : 'NOT met'}`,
  );
  console.log(
    `  migrated data dir            ${fmt(a)}  (x${(a / bareMs).toFixed(1)} node -e 0); target ${READY_TARGET_MS} ms: ${a <= READY_TARGET_MS ? 'met' : 'NOT met'}`,
  );
  console.log(`  all runs: fresh ${fresh.map(fmt).join(', ')}; migrated ${again.map(fmt).join(', ')}`);
  console.log(
    `  RSS of the idle all-roles process after ${IDLE_MS / 1000} s: median ${median(rss).toFixed(0)} MB (${rss.map((r) => r.toFixed(0)).join(', ')})`,
  );
}

await main();
