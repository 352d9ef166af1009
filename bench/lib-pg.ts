import { fork } from 'node:child_process';
import pg from 'pg';
import { freePort, stop } from './lib.ts';

/**
 * A fresh PostgreSQL database `postyard_bench_<pid>_<n>` next to the one `url` names, dropped by
 * drop() (WITH (FORCE): connections a crashed child left behind do not keep it alive).
 */
let seq = 0;
export async function freshPgDatabase(url: string): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const name = `postyard_bench_${process.pid}_${seq++}`;
  const admin = async (q: string) => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query(q);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const u = new URL(url);
  u.pathname = `/${name}`;
  return { url: u.toString(), name, drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/** Runs `fn` against `url` and closes the client. */
export async function withPg<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** bench/sink-recipients.ts in its own process: total count, and per-recipient counts at the end. */
export async function startRecipientSink(capacity: number) {
  const port = await freePort();
  const child = fork('bench/sink-recipients.ts', {
    env: { ...process.env, PORT: String(port), CAPACITY: String(capacity) },
    execArgv: ['--import', 'tsx'],
    serialization: 'advanced',
  });
  await new Promise((r) => child.once('message', r));
  const ask = <T>(msg: object) =>
    new Promise<T>((resolve) => {
      child.once('message', (m) => resolve(m as T));
      child.send(msg);
    });
  return {
    port,
    pid: child.pid as number,
    count: async () => (await ask<{ count: number }>({ count: true })).count,
    dump: () => ask<{ count: number; unparsed: number; counts: Uint8Array }>({ dump: true }),
    close: () => stop(child),
  };
}

/** Lost (accepted, never received) and duplicated indices, comparing accepted[i] with counts[i]. */
export function compareDelivery(accepted: Uint8Array, acceptedCount: number, counts: Uint8Array) {
  let lost = 0;
  let duplicates = 0;
  let unexpected = 0;
  const firstLost: number[] = [];
  for (let i = 0; i < Math.max(acceptedCount, counts.length); i++) {
    const got = counts[i] ?? 0;
    if (accepted[i]) {
      if (got === 0) {
        lost++;
        if (firstLost.length < 5) firstLost.push(i);
      } else if (got > 1) duplicates += got - 1;
    } else if (got > 0) unexpected += got;
  }
  return { lost, duplicates, unexpected, firstLost };
}
