/**
 * Runs the real `postyard` command as a child process, the way an operator does: for CLI tests
 * and for tests over a real socket. Children get a clean environment (no inherited POSTYARD_*,
 * DATABASE_URL or REDIS_URL) plus what the test passes. Only loopback addresses are used.
 *
 * The command runs from the TypeScript sources (bin/postyard-src.js, through tsx), never from
 * the compiled dist/: src/ changes all the time and a dist/ built before the last edit would be
 * tested instead. The compiled command is tested as installed from the packed tarball
 * (.ci/deploy-check.sh).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = join(REPO_ROOT, 'bin', 'postyard-src.js');

/**
 * Timeouts around process spawns. One `postyard` child loads its sources through tsx: about 1 s
 * on an idle machine, 13 s measured for `postyard --help` on a 2-core machine at load 15. So a
 * spawn gets minutes, not seconds, and a test that spawns gets SPAWN_TEST_TIMEOUT_MS (vitest's
 * default of 30 s is not enough for one spawn under that load).
 */
export const SPAWN_TIMEOUT_MS = 120_000;
export const SPAWN_TEST_TIMEOUT_MS = 240_000;

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

const children = new Set<ChildProcess>();

/** process.env without Postyard's own variables, plus `extra`. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('POSTYARD_') || k === 'DATABASE_URL' || k === 'REDIS_URL' || k === 'NODE_OPTIONS') continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

function spawnPostyard(args: string[], env: Record<string, string>, stdin: 'ignore' | 'pipe' = 'ignore'): ChildProcess {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: REPO_ROOT,
    env: childEnv(env),
    stdio: [stdin, 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Runs one command to completion; `input` is written to its stdin (else stdin is closed). */
export async function runCli(
  args: string[],
  opts: { env?: Record<string, string>; timeoutMs?: number; input?: string } = {},
): Promise<CliResult> {
  const child = spawnPostyard(args, opts.env ?? {}, opts.input === undefined ? 'ignore' : 'pipe');
  if (opts.input !== undefined) child.stdin?.end(opts.input);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? SPAWN_TIMEOUT_MS);
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  return { code, signal, stdout, stderr };
}

/** A TCP port that was free a moment ago on 127.0.0.1 (listen on 0, read it, close). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

export interface ServerProcess {
  child: ChildProcess;
  port: number;
  baseUrl: string;
  stdout(): string;
  stderr(): string;
  /** Sends `signal` and waits for the exit; resolves with the exit code and how long it took. */
  stop(
    signal?: NodeJS.Signals,
    timeoutMs?: number,
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

/**
 * `postyard start <args>` on a free port of 127.0.0.1; resolves once GET /healthz answers 200.
 * Rejects (with the child's stderr) if it exits first or is not up within `timeoutMs`.
 */
export async function startServer(
  args: string[] = ['--roles', 'api'],
  opts: { env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawnPostyard(['start', ...args], {
    POSTYARD_HTTP_HOST: '127.0.0.1',
    POSTYARD_HTTP_PORT: String(port),
    // Free ports for the other listeners too: the defaults (2587, 2525) are shared by every test
    // file running at once, and by anything else on the machine.
    POSTYARD_SMTP_PORT: String(await freePort()),
    POSTYARD_INBOUND_PORT: String(await freePort()),
    ...(opts.env ?? {}),
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = once(child, 'exit');
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (opts.timeoutMs ?? SPAWN_TIMEOUT_MS);
  let exitedEarly = false;
  void exited.then(() => {
    exitedEarly = true;
  });
  for (;;) {
    if (exitedEarly) throw new Error(`postyard start exited early (code ${child.exitCode}): ${stderr || stdout}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`postyard start did not answer /healthz in time: ${stderr || stdout}`);
    }
    try {
      const res = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    child,
    port,
    baseUrl,
    stdout: () => stdout,
    stderr: () => stderr,
    async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
      const started = Date.now();
      if (child.exitCode !== null || child.signalCode !== null) {
        return { code: child.exitCode, signal: child.signalCode, ms: 0 };
      }
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.kill(signal);
      const [code, sig] = (await exited) as [number | null, NodeJS.Signals | null];
      clearTimeout(timer);
      return { code, signal: sig, ms: Date.now() - started };
    },
  };
}

/** Kills (by pid) every child this module started that is still running; for afterAll. */
export function killChildren(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  children.clear();
}
