/**
 * Reading one environment variable: the primitives every area of the config parses with.
 * Kept apart from the settings themselves so each area's file (network.ts, secrets.ts) and
 * loadConfig in ../config.ts share one meaning of "unset", "integer", "boolean" and "list".
 */

/** The environment as loadConfig receives it (process.env, or a test's own object). */
export type Env = Record<string, string | undefined>;

/**
 * A bad value throws ConfigError naming the variable; the CLI prints that one line and exits 1.
 */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

/** The trimmed value; an unset or blank variable is undefined, so defaults apply to both. */
export function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

export function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = str(env, name);
  if (raw === undefined) return def;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `expected an integer, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

export function bool(env: Env, name: string, def: boolean): boolean {
  const raw = str(env, name)?.toLowerCase();
  if (raw === undefined) return def;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(name, `expected true or false, got "${raw}"`);
}

/**
 * A comma-separated list, items trimmed, empty items dropped; null when the variable is unset
 * or blank (callers tell "not configured" from an explicit list).
 */
export function list(env: Env, name: string): string[] | null {
  const raw = str(env, name);
  return raw
    ? raw
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
    : null;
}
