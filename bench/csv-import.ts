/**
 * node --import tsx bench/csv-import.ts — the suppression CSV import at its contract limit.
 *
 * Writes a 1,000,000-row CSV to a temp file (0.1% deliberately bad rows, some quoted fields with
 * commas), starts the API server as a child process (`bin/postyard-src.js start --roles api`) on a
 * fresh SQLite database and, when BENCH_DATABASE_URL or DATABASE_URL is set, on a fresh
 * PostgreSQL schema, and uploads the file over loopback HTTP as a streamed multipart request
 * (undici; the file is never held in memory on either side). Each backend gets three passes:
 * every row new, every row changed (a second file with other reasons), the changed file again
 * (nothing to write). Prints rows, seconds, rows/s and the
 * server process's RSS: sampled from /proc/<pid>/status every 50 ms during the upload, and its
 * lifetime peak (VmHWM). Targets: under 30 s and under 300 MB.
 *
 * BENCH_ROWS overrides the row count (e.g. 100000 for a quick run).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { request } from 'undici';
import { freePort, freshPgSchema, machine, peakRssMb, spawnNode, stop, table, waitHttp } from './lib.ts';

const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const BAD_EVERY = 1000;
const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? '';
const TARGET_SECONDS = 30;
const TARGET_RSS_MB = 300;

/** `variant` rotates every row's reason: the rows of variant 1 all differ from those of variant 0. */
async function writeCsv(file: string, rows: number, variant: number): Promise<number> {
  const out = createWriteStream(file);
  const reasons = ['hard_bounce', 'unsubscribe', 'complaint', 'manual', 'invalid'];
  let buf = 'identifier,type,reason_category,description\n';
  let bad = 0;
  for (let i = 1; i <= rows; i++) {
    if (i % BAD_EVERY === 0) {
      buf += `not-an-address-${i},email,manual,\n`;
      bad++;
    } else if (i % 50 === 0) {
      const reason = reasons[(i + variant) % reasons.length];
      buf += `blocked-${i}.example.net,domain,${reason},"Imported from legacy list, batch ${i % 7}"\n`;
    } else {
      buf += `User.${i}@Example-${i % 997}.com,email,${reasons[(i + variant) % reasons.length]},\n`;
    }
    if (buf.length > 1 << 20) {
      if (!out.write(buf)) await new Promise<void>((r) => out.once('drain', () => r()));
      buf = '';
    }
  }
  out.end(buf);
  await finished(out);
  return bad;
}

interface Sample {
  rows: number;
  imported: number;
  skipped: number;
  seconds: number;
  rssBeforeMb: number;
  rssPeakDuringMb: number;
  vmHwmMb: number;
}

async function currentRssMb(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const m = /VmRSS:\s+(\d+) kB/.exec(status);
    return m ? Number(m[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Streams `file` as the single part of a multipart/form-data body; Content-Length is exact. */
async function upload(url: string, key: string, file: string) {
  const boundary = `----postyardbench${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="suppressions.csv"\r\n` +
      'Content-Type: text/csv\r\n\r\n',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const length = head.length + statSync(file).size + tail.length;
  async function* body() {
    yield head;
    for await (const chunk of createReadStream(file, { highWaterMark: 256 * 1024 })) yield chunk as Buffer;
    yield tail;
  }
  const res = await request(`${url}/v1/suppressions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': `multipart/form-data; boundary=${boundary}`,
      'content-length': String(length),
    },
    body: Readable.from(body()),
    headersTimeout: 600_000,
    bodyTimeout: 600_000,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`import answered ${res.statusCode}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as { imported: number; skipped: number; errors: { line: number; message: string }[] };
}

const PASSES = [
  { pass: 'insert (all new)', file: 0 },
  { pass: 'update (all changed)', file: 1 },
  { pass: 're-import (unchanged)', file: 1 },
] as const;

async function runBackend(label: string, env: Record<string, string>, files: readonly [string, string], bad: number) {
  const port = await freePort();
  const fullEnv = {
    ...env,
    POSTYARD_HTTP_PORT: String(port),
    POSTYARD_HTTP_HOST: '127.0.0.1',
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_RATE_LIMIT_RPS: '0',
    POSTYARD_DEV_MODE: 'true',
  };
  const out = execFileSync(
    process.execPath,
    ['bin/postyard-src.js', 'tenants', 'create', '--name', 'bench', '--from', 'Bench <bench@example.com>', '--json'],
    { env: { ...process.env, ...fullEnv } },
  ).toString();
  const key = (JSON.parse(out) as { api_key: string }).api_key;
  const child = spawnNode(['bin/postyard-src.js', 'start', '--roles', 'api'], fullEnv);
  const url = `http://127.0.0.1:${port}`;
  const results: Record<string, string | number>[] = [];
  try {
    await waitHttp(`${url}/healthz`);
    const pid = child.pid ?? 0;
    for (const { pass, file: fileIndex } of PASSES) {
      const file = files[fileIndex];
      const rssBeforeMb = await currentRssMb(pid);
      let rssPeakDuringMb = rssBeforeMb;
      const sampler = setInterval(() => {
        void currentRssMb(pid).then((mb) => {
          if (mb > rssPeakDuringMb) rssPeakDuringMb = mb;
        });
      }, 50);
      const t0 = performance.now();
      let res: Awaited<ReturnType<typeof upload>>;
      try {
        res = await upload(url, key, file);
      } finally {
        clearInterval(sampler);
      }
      const seconds = (performance.now() - t0) / 1000;
      const s: Sample = {
        rows: ROWS,
        imported: res.imported,
        skipped: res.skipped,
        seconds,
        rssBeforeMb,
        rssPeakDuringMb,
        vmHwmMb: await peakRssMb(pid),
      };
      if (res.imported + res.skipped !== ROWS || res.skipped !== bad) {
        throw new Error(`unexpected counts: ${JSON.stringify({ ...res, errors: res.errors.slice(0, 3) })}`);
      }
      results.push({
        backend: label,
        pass,
        rows: s.rows,
        imported: s.imported,
        skipped: s.skipped,
        seconds: s.seconds,
        'rows/s': Math.round(s.rows / s.seconds),
        'RSS before MB': Math.round(s.rssBeforeMb),
        'RSS peak (50 ms samples) MB': Math.round(s.rssPeakDuringMb),
        'VmHWM MB': Math.round(s.vmHwmMb),
        verdict: s.seconds < TARGET_SECONDS && s.vmHwmMb < TARGET_RSS_MB ? 'ok' : 'MISSED TARGET',
      });
      process.stderr.write(`${label} ${pass}: ${s.seconds.toFixed(1)} s\n`);
    }
  } finally {
    await stop(child);
  }
  return results;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-csv-'));
  const files = [join(dir, 'suppressions-0.csv'), join(dir, 'suppressions-1.csv')] as const;
  try {
    const t0 = performance.now();
    const bad = await writeCsv(files[0], ROWS, 0);
    await writeCsv(files[1], ROWS, 1);
    const mb = statSync(files[0]).size / 1024 / 1024;
    process.stderr.write(
      `wrote 2 x ${ROWS} rows (${mb.toFixed(1)} MB each) in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
    );

    const rows: Record<string, string | number>[] = [];
    rows.push(...(await runBackend('sqlite', { POSTYARD_DATA_DIR: join(dir, 'sqlite') }, files, bad)));
    if (PG_URL) {
      const schema = await freshPgSchema(PG_URL);
      try {
        const env = { POSTYARD_DATA_DIR: join(dir, 'pg'), DATABASE_URL: schema.url };
        rows.push(...(await runBackend('postgres', env, files, bad)));
      } finally {
        await schema.drop();
      }
    }
    console.log(`\nSuppression CSV import, ${ROWS} rows (${mb.toFixed(1)} MB), ${machine()}`);
    console.log('Server in a child process; RSS from /proc/<pid>/status (VmHWM = lifetime peak).\n');
    console.log(table(rows));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
