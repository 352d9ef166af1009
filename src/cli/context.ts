import { readFileSync } from 'node:fs';
import { type Config, loadConfig } from '../config.ts';
import type { Container } from '../container.ts';

/** Shared by the `postyard` commands: configuration, a container for one-shot commands, output. */
export function config(): Config {
  return loadConfig(process.env);
}

/** Containers for one-shot commands log only warnings, to keep their output clean. */
export async function withContainer<T>(fn: (c: Container) => Promise<T>): Promise<T> {
  const cfg = config();
  // Loaded here, not up front: `postyard --help` must not pay for the whole server.
  const [{ createContainer }, { createLogger }] = await Promise.all([
    import('../container.ts'),
    import('../logger.ts'),
  ]);
  const c = await createContainer(cfg, createLogger(cfg.logLevel === 'info' ? 'warn' : cfg.logLevel));
  try {
    return await fn(c);
  } finally {
    await c.close();
  }
}

export function print(json: boolean, value: unknown, text: string) {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${text}\n`);
}

/** JSON lines, one row per line (the `--json` form of list commands). */
export function printLines(rows: unknown[]) {
  process.stdout.write(rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
}

/** Fixed-width columns for list output; an empty list prints `empty` instead. */
export function table(rows: string[][], header: string[], empty: string): string {
  if (rows.length === 0) return empty;
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all
    .map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  '))
    .join('\n');
}

/** The package version (package.json two levels up from src/cli, and from a compiled dist/cli). */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
